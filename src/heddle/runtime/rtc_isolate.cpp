// fork + pipe around Nvrtc::compile. The child only compiles, writes one message and _exit()s: it
// never returns into the caller (no Python, no atexit handlers, no destructors of parent state).
// Message: u32 tag (0 ok, 1 CompileError, 2 RuntimeUnavailable, 3 other error) + payload.
#include "heddle/runtime/rtc_isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

#include "heddle/ir/errors.h"
#include "heddle/runtime/serialize.h"

namespace heddle::rt {
namespace {

enum Tag : uint32_t { kOk = 0, kCompileError = 1, kUnavailable = 2, kOtherError = 3 };

bool envFlag(const char* name) {
  std::string v = envOr(name);
  return !v.empty() && v != "0";
}

void writeAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // parent gone or timed out: nothing useful left to do
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void runChild(int fd, const Nvrtc& nvrtc, const std::string& source, const std::string& name,
                           const std::map<std::string, std::string>& headers, const RtcOptions& opts) {
  // A crash must kill the child with its signal: undo handlers inherited from the parent (Python's
  // faulthandler, pytest) and unblock the fatal signals. No core files from deliberate crashes.
  sigset_t fatal;
  sigemptyset(&fatal);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
    ::signal(sig, SIG_DFL);
    sigaddset(&fatal, sig);
  }
  ::pthread_sigmask(SIG_UNBLOCK, &fatal, nullptr);
  struct rlimit noCore{0, 0};
  ::setrlimit(RLIMIT_CORE, &noCore);

  if (envFlag("HEDDLE_RTC_TEST_CRASH")) ::raise(SIGSEGV);  // test hook, see rtc_isolate.h

  ByteWriter w;
  try {
    RtcResult r = nvrtc.compile(source, name, headers, opts);
    w.u32(kOk);
    w.raw(encodeRtcResult(r));
  } catch (const CompileError& e) {
    w.u32(kCompileError);
    w.str(e.what());
  } catch (const RuntimeUnavailable& e) {
    w.u32(kUnavailable);
    w.str(e.what());
  } catch (const std::exception& e) {
    w.u32(kOtherError);
    w.str(e.what());
  }
  writeAll(fd, w.bytes());
  ::close(fd);
  ::_exit(0);
}

int timeoutSeconds() {
  std::string v = envOr("HEDDLE_RTC_ISOLATE_TIMEOUT_S", "600");
  try {
    int s = std::stoi(v);
    return s > 0 ? s : 600;
  } catch (...) { return 600; }
}

// Reads until EOF. Returns false on timeout (the caller kills the child).
bool readAll(int fd, std::string& out, int timeoutS) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutS);
  char buf[1 << 16];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p{fd, POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return false;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // EOF (or an error, which ends the message the same way)
    out.append(buf, static_cast<size_t>(n));
  }
}

// Waits for the child; returns false when its status cannot be known (SIGCHLD ignored: ECHILD).
bool reap(pid_t pid, int& status) {
  for (;;) {
    if (::waitpid(pid, &status, 0) == pid) return true;
    if (errno != EINTR) return false;
  }
}

}  // namespace

bool isolateByDefault() { return envOr("HEDDLE_RTC_ISOLATE") != "0"; }

std::shared_mutex& compilerForkLock() {
  static std::shared_mutex mu;
  return mu;
}

pid_t forkOutsideCompilers() {
  std::unique_lock<std::shared_mutex> noCompilerRunning(compilerForkLock());
  return ::fork();
}

RtcResult compileIsolated(const std::string& source, const std::string& name,
                          const std::map<std::string, std::string>& headers, const RtcOptions& opts) {
  const Nvrtc& nvrtc = Nvrtc::instance();  // load (or fail) in the parent
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail<CompileError>("pipe() failed for isolated compile: ", std::strerror(errno));
  pid_t pid = forkOutsideCompilers();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    fail<CompileError>("fork() failed for isolated compile of ", name, ": ", std::strerror(err));
  }
  if (pid == 0) {
    ::close(fds[0]);
    runChild(fds[1], nvrtc, source, name, headers, opts);
  }
  ::close(fds[1]);
  std::string msg;
  int timeoutS = timeoutSeconds();
  bool finished = readAll(fds[0], msg, timeoutS);
  ::close(fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  bool reaped = reap(pid, status);

  std::string where = name + " for " + opts.arch;
  if (!finished)
    fail<CompileError>("NVRTC did not finish compiling ", where, " within ", timeoutS,
                       " s in the isolated child (HEDDLE_RTC_ISOLATE_TIMEOUT_S); the child was killed");
  if (reaped && WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* sigName = ::strsignal(sig);
    fail<CompileError>("NVRTC/ptxas crashed with signal ", sig, " (", sigName ? sigName : "unknown",
                       ") while compiling ", where,
                       " in an isolated child process (HEDDLE_RTC_ISOLATE); this process is unaffected.",
                       source.find("wgmma") != std::string::npos
                           ? " Known trigger: ptxas segfaults on a wgmma whose descriptor is a compile-time "
                             "constant; compute the descriptor at run time."
                           : " Rerun with HEDDLE_RTC_ISOLATE=0 under a debugger to see where it crashes, and "
                             "report it with HEDDLE_DUMP=cuda output.");
  }
  if (msg.empty())
    fail<CompileError>("the isolated NVRTC child for ", where, " exited (status ",
                       reaped && WIFEXITED(status) ? WEXITSTATUS(status) : -1, ") without a result");
  try {
    ByteReader rd(msg);
    uint32_t tag = rd.u32();
    if (tag == kOk) return decodeRtcResult(msg.substr(4));
    std::string text = rd.str();
    if (tag == kCompileError) throw CompileError(text);
    if (tag == kUnavailable) throw RuntimeUnavailable(text);
    throw HeddleError("isolated compile of " + where + " failed: " + text);
  } catch (const DecodeError& e) {
    fail<CompileError>("malformed result from the isolated NVRTC child for ", where, ": ", e.what());
  }
}

}  // namespace heddle::rt
