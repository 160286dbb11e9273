// Crash isolation for NVRTC: ptxas inside NVRTC has been seen to segfault on some wgmma code
// (a compile-time-constant descriptor). compileIsolated() forks, compiles in the child, and sends
// the encoded RtcResult (or the error) back over a pipe, so a crash becomes a CompileError in the
// parent instead of killing the process (a Python session, a pytest run).
//
// Environment:
//   HEDDLE_RTC_ISOLATE=1             isolate by default (RtcOptions::isolate unset)
//   HEDDLE_RTC_ISOLATE_TIMEOUT_S=N   kill a child that has not answered after N s (default 600)
//   HEDDLE_RTC_TEST_CRASH=1          TEST HOOK: the child raises SIGSEGV before compiling
#pragma once

#include <map>
#include <string>

#include "heddle/runtime/nvrtc.h"

namespace heddle::rt {

// $HEDDLE_RTC_ISOLATE is set to something other than "" or "0".
bool isolateByDefault();

// Same contract as Nvrtc::compile (throws CompileError / RuntimeUnavailable), plus a CompileError
// naming the signal when the child dies. Loads NVRTC in the parent first, so the child never dlopens.
RtcResult compileIsolated(const std::string& source, const std::string& name,
                          const std::map<std::string, std::string>& headers, const RtcOptions& opts);

}  // namespace heddle::rt
