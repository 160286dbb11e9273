// heddle-rtc-worker: one isolated compile (runtime/rtc_isolate.h). Started by posix_spawn with a socket as
// stdin and stdout: reads the request to EOF, loads the compiler library the parent names (the same file the
// parent loaded, so the same compiler and the same binary), compiles, writes the tagged reply, exits.
// A crash here ends this process only; the parent reports the signal.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "heddle/runtime/cuda/nvrtc.h"
#include "heddle/runtime/dynlib.h"
#include "heddle/runtime/hip/hip_rtc.h"
#include "heddle/runtime/rtc_isolate.h"
#include "heddle/runtime/serialize.h"

namespace {

using namespace heddle::rt;

std::string readStdin() {
  std::string in;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return in;
    in.append(buf, static_cast<size_t>(n));
  }
}

void writeStdout(const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(1, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone or timed out: nothing useful left to do
    off += static_cast<size_t>(n);
  }
}

RtcResult compile(const WorkerRequest& r) {
  // the loaders read these first (dynlib.h, hip_rtc.cpp): the library the parent loaded, nothing else
  if (r.compiler == IsolatedCompiler::Hiprtc) {
    ::setenv("HEDDLE_HIPRTC_PATH", r.libraryPath.c_str(), 1);
    return Hiprtc::instance().compile(r.source, r.name, r.headers, r.options);
  }
  ::setenv("HEDDLE_NVRTC_PATH", r.libraryPath.c_str(), 1);
  return Nvrtc::instance().compile(r.source, r.name, r.headers, r.options);
}

}  // namespace

int main() {
  struct rlimit noCore{0, 0};
  ::setrlimit(RLIMIT_CORE, &noCore);  // no core files from a compiler crash
  std::string request = readStdin();
  const std::string crash = envOr("HEDDLE_RTC_TEST_CRASH");
  if (!crash.empty() && crash != "0") ::raise(SIGSEGV);  // test hook (rtc_isolate.h)
  writeStdout(workerReply([&] { return compile(decodeWorkerRequest(request)); }));
  ::_exit(0);  // the compiler libraries' static destructors have nothing to say
}
