// Crash isolation for NVRTC: ptxas inside NVRTC has been seen to segfault on some wgmma code
// (a compile-time-constant descriptor). compileIsolated() forks, compiles in the child, and sends
// the encoded RtcResult (or the error) back over a pipe, so a crash becomes a CompileError in the
// parent instead of killing the process (a Python session, a pytest run).
//
// Isolation is the default (a fork adds ~25 ms with torch loaded, small next to a matmul compile); threads may mix
// isolated and in-process compiles: fork() never runs while another thread is inside a compiler
// (compilerForkLock), so no child starts with a compiler lock held by a thread it does not have.
//
// Environment:
//   HEDDLE_RTC_ISOLATE=0             compile in-process by default (unset or anything else: isolate)
//   HEDDLE_RTC_ISOLATE_TIMEOUT_S=N   kill a child that has not answered after N s (default 600)
//   HEDDLE_RTC_TEST_CRASH=1          TEST HOOK: the child raises SIGSEGV before compiling
#pragma once

#include <sys/types.h>

#include <map>
#include <shared_mutex>
#include <string>

#include "heddle/runtime/cuda/nvrtc.h"

namespace heddle::rt {

// True unless $HEDDLE_RTC_ISOLATE is "0".
bool isolateByDefault();

// In-process compiles (NVRTC, hiprtc) hold this shared; fork() for an isolated compile holds it
// exclusively, so a forked child never inherits a compiler lock held by another thread.
std::shared_mutex& compilerForkLock();
// fork() while no thread is inside a compiler (holds compilerForkLock exclusively for the call).
pid_t forkOutsideCompilers();

// Same contract as Nvrtc::compile (throws CompileError / RuntimeUnavailable), plus a CompileError
// naming the signal when the child dies. Loads NVRTC in the parent first, so the child never dlopens.
RtcResult compileIsolated(const std::string& source, const std::string& name,
                          const std::map<std::string, std::string>& headers, const RtcOptions& opts);

}  // namespace heddle::rt
