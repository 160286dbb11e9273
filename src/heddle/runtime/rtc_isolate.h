// Crash isolation for the run-time compilers: ptxas inside NVRTC has been seen to segfault on some wgmma
// code (a compile-time-constant descriptor), and Debian's hiprtc 5.2 aborts on anything but gfx90a.
// compileIsolated() runs one compile in a fresh process, heddle-rtc-worker (installed next to heddle._C,
// src/heddle/worker), so a crash becomes a CompileError here instead of killing the process (a Python
// session, a pytest run).
//
// The worker is started with posix_spawn (a vfork + exec: nothing of this process runs in the child but
// the exec), never a bare fork(): a fork copies every lock another thread holds at that moment (NVRTC's,
// the dynamic loader's, the unwinder's, a library's), and a child that needs one of them hangs. CI saw it
// in a long pytest process with a forked child (2 of 12 children hung until the timeout); no lock can be
// taken around every thread of a Python process, so the child must start from an exec.
//
// Protocol over one socketpair (the worker's stdin and stdout): the request (encodeWorkerRequest) is sent,
// the write side shut down; the worker compiles with the library the parent loaded (same file, so the same
// CUBIN as an in-process compile) and answers u32 tag (0 ok, 1 CompileError, 2 RuntimeUnavailable,
// 3 other error) + payload, then exits.
//
// Environment:
//   HEDDLE_RTC_ISOLATE=0             compile in-process by default (unset or anything else: isolate)
//   HEDDLE_RTC_ISOLATE_TIMEOUT_S=N   kill a worker that has not answered after N s (default 600)
//   HEDDLE_RTC_WORKER=PATH           the worker program (default: heddle-rtc-worker beside the heddle._C library)
//   HEDDLE_RTC_TEST_CRASH=1          TEST HOOK: the worker raises SIGSEGV before compiling
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "heddle/runtime/cuda/nvrtc.h"

namespace heddle::rt {

// True unless $HEDDLE_RTC_ISOLATE is "0".
bool isolateByDefault();

enum class IsolatedCompiler : uint32_t { Nvrtc = 0, Hiprtc = 1 };

// One compile as the worker receives it.
struct WorkerRequest {
  IsolatedCompiler compiler = IsolatedCompiler::Nvrtc;
  std::string libraryPath;  // the compiler library the parent loaded; the worker loads this file
  std::string source, name;
  std::map<std::string, std::string> headers;
  RtcOptions options;  // isolate is not sent
};
std::string encodeWorkerRequest(const WorkerRequest& r);
WorkerRequest decodeWorkerRequest(const std::string& bytes);  // throws DecodeError

// The worker's answer to a request: the tagged message described above. `compile` runs the request in the
// worker; its CompileError / RuntimeUnavailable / other exceptions become tags 1 / 2 / 3.
enum WorkerTag : uint32_t { kWorkerOk = 0, kWorkerCompileError = 1, kWorkerUnavailable = 2, kWorkerOtherError = 3 };
std::string workerReply(const std::function<RtcResult()>& compile);

// The worker program: $HEDDLE_RTC_WORKER, else heddle-rtc-worker in the directory of the library this code
// is linked into (heddle._C). Throws RuntimeUnavailable naming the path and what to do when it is missing.
std::string workerPath();

// Same contract as Nvrtc::compile / Hiprtc::compile (throws CompileError / RuntimeUnavailable), plus a
// CompileError naming the signal when the worker dies. `crashHint` ends that message (what is known to
// crash this compiler, or how to debug it).
RtcResult compileIsolated(const WorkerRequest& request, const std::string& crashHint);

}  // namespace heddle::rt
