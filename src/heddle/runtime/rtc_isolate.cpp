// One compile in heddle-rtc-worker (see rtc_isolate.h): the request/reply encoding, the worker's location,
// and the parent's side: posix_spawn, send, read with a deadline, reap, and the errors.
#include "heddle/runtime/rtc_isolate.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "heddle/ir/errors.h"
#include "heddle/runtime/dynlib.h"
#include "heddle/runtime/serialize.h"

extern char** environ;

namespace heddle::rt {
namespace {

constexpr uint32_t kRequestMagic = 0x31575248;  // "HRW1"
constexpr const char* kWorkerName = "heddle-rtc-worker";

using Clock = std::chrono::steady_clock;

int timeoutSeconds() {
  std::string v = envOr("HEDDLE_RTC_ISOLATE_TIMEOUT_S", "600");
  try {
    int s = std::stoi(v);
    return s > 0 ? s : 600;
  } catch (...) { return 600; }
}

// Milliseconds left before `deadline` (0 when passed).
int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Sends all of `data` before `deadline`. False when the worker stopped reading (it died: its status says
// why) or the deadline passed. MSG_NOSIGNAL: a dead worker is an error here, never a SIGPIPE.
bool sendAll(int fd, const std::string& data, Clock::time_point deadline, bool& timedOut) {
  size_t off = 0;
  while (off < data.size()) {
    struct pollfd p{fd, POLLOUT, 0};
    int pr = ::poll(&p, 1, msLeft(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      timedOut = true;
      return false;
    }
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads until EOF before `deadline`; false on timeout (the caller kills the worker).
bool readAll(int fd, std::string& out, Clock::time_point deadline) {
  char buf[1 << 16];
  for (;;) {
    int left = msLeft(deadline);
    if (left == 0) return false;
    struct pollfd p{fd, POLLIN, 0};
    int pr = ::poll(&p, 1, left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return false;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // EOF (or an error, which ends the message the same way)
    out.append(buf, static_cast<size_t>(n));
  }
}

// Waits for the worker; false when its status cannot be known (SIGCHLD ignored: ECHILD).
bool reap(pid_t pid, int& status) {
  for (;;) {
    if (::waitpid(pid, &status, 0) == pid) return true;
    if (errno != EINTR) return false;
  }
}

// posix_spawn's attributes and file actions, released on every path.
struct Spawn {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  Spawn(int childEnd) {
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, childEnd, 0);  // the dup2 copies lose FD_CLOEXEC
    posix_spawn_file_actions_adddup2(&actions, childEnd, 1);
    posix_spawnattr_init(&attr);
    // A crash must kill the worker with its signal: no signal blocked, and the fatal ones (and SIGPIPE, which
    // Python ignores) at their default action even where this process ignores them.
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGPIPE}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~Spawn() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

struct Fd {
  int fd = -1;
  ~Fd() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

const char* compilerName(IsolatedCompiler c) { return c == IsolatedCompiler::Hiprtc ? "hiprtc" : "NVRTC"; }

}  // namespace

bool isolateByDefault() { return envOr("HEDDLE_RTC_ISOLATE") != "0"; }

std::string encodeWorkerRequest(const WorkerRequest& r) {
  ByteWriter w;
  w.u32(kRequestMagic);
  w.u32(static_cast<uint32_t>(r.compiler));
  w.str(r.libraryPath);
  w.str(r.source);
  w.str(r.name);
  w.u64(r.headers.size());
  for (const auto& [name, text] : r.headers) {
    w.str(name);
    w.str(text);
  }
  const RtcOptions& o = r.options;
  w.str(o.arch);
  w.u64(o.extraOptions.size());
  for (const auto& e : o.extraOptions) w.str(e);
  w.u32(o.lineinfo ? 1 : 0);
  w.u32(static_cast<uint32_t>(o.maxRegisters));
  w.u32(o.wantPtx ? 1 : 0);
  return w.bytes();
}

WorkerRequest decodeWorkerRequest(const std::string& bytes) {
  ByteReader rd(bytes);
  if (rd.u32() != kRequestMagic) throw DecodeError("not a heddle-rtc-worker request (bad magic)");
  WorkerRequest r;
  uint32_t compiler = rd.u32();
  if (compiler > static_cast<uint32_t>(IsolatedCompiler::Hiprtc))
    throw DecodeError("unknown compiler " + std::to_string(compiler) + " in a worker request");
  r.compiler = static_cast<IsolatedCompiler>(compiler);
  r.libraryPath = rd.str();
  r.source = rd.str();
  r.name = rd.str();
  uint64_t headers = rd.u64();
  for (uint64_t i = 0; i < headers; ++i) {
    std::string name = rd.str();
    r.headers[name] = rd.str();
  }
  r.options.arch = rd.str();
  uint64_t extra = rd.u64();
  for (uint64_t i = 0; i < extra; ++i) r.options.extraOptions.push_back(rd.str());
  r.options.lineinfo = rd.u32() != 0;
  r.options.maxRegisters = static_cast<int>(rd.u32());
  r.options.wantPtx = rd.u32() != 0;
  if (rd.remaining() != 0) throw DecodeError("trailing bytes after a worker request");
  return r;
}

std::string workerReply(const std::function<RtcResult()>& compile) {
  ByteWriter w;
  try {
    RtcResult r = compile();
    w.u32(kWorkerOk);
    w.raw(encodeRtcResult(r));
  } catch (const CompileError& e) {
    w.u32(kWorkerCompileError);
    w.str(e.what());
  } catch (const RuntimeUnavailable& e) {
    w.u32(kWorkerUnavailable);
    w.str(e.what());
  } catch (const std::exception& e) {
    w.u32(kWorkerOtherError);
    w.str(e.what());
  }
  return w.bytes();
}

std::string workerPath() {
  std::string env = envOr("HEDDLE_RTC_WORKER");
  std::string path = env;
  if (path.empty()) {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&workerPath), &info) == 0 || !info.dli_fname)
      fail<RuntimeUnavailable>("cannot locate the library holding heddle's runtime (dladdr failed), so not ",
                               kWorkerName, " either; set HEDDLE_RTC_WORKER to its path, or HEDDLE_RTC_ISOLATE=0 ",
                               "to compile in this process");
    std::string lib = info.dli_fname;
    auto slash = lib.find_last_of('/');
    path = (slash == std::string::npos ? std::string(".") : lib.substr(0, slash)) + "/" + kWorkerName;
  }
  if (::access(path.c_str(), X_OK) != 0)
    fail<RuntimeUnavailable>("the compile worker ", path, " is ",
                             ::access(path.c_str(), F_OK) == 0 ? "not executable" : "missing",
                             env.empty() ? " (heddle installs it beside heddle._C: reinstall heddle, or set "
                                           "HEDDLE_RTC_WORKER to its path)"
                                         : " (HEDDLE_RTC_WORKER)",
                             "; HEDDLE_RTC_ISOLATE=0 compiles in this process without crash isolation");
  return path;
}

RtcResult compileIsolated(const WorkerRequest& request, const std::string& crashHint) {
  const std::string program = workerPath();
  const char* compiler = compilerName(request.compiler);
  std::string where = request.name + " for " + request.options.arch;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    fail<CompileError>("socketpair() failed for an isolated compile of ", where, ": ", std::strerror(errno));
  Fd parentEnd{sv[0]}, childEnd{sv[1]};
  pid_t pid = -1;
  {
    Spawn spawn(childEnd.fd);
    std::string arg0 = program;
    char* argv[] = {arg0.data(), nullptr};
    int rc = ::posix_spawn(&pid, program.c_str(), &spawn.actions, &spawn.attr, argv, environ);
    if (rc != 0)
      fail<CompileError>("could not start the compile worker ", program, " for ", where, ": ", std::strerror(rc));
  }
  childEnd.close();

  int timeoutS = timeoutSeconds();
  auto deadline = Clock::now() + std::chrono::seconds(timeoutS);
  bool timedOut = false;
  if (sendAll(parentEnd.fd, encodeWorkerRequest(request), deadline, timedOut)) ::shutdown(parentEnd.fd, SHUT_WR);
  std::string msg;
  bool finished = !timedOut && readAll(parentEnd.fd, msg, deadline);
  parentEnd.close();
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  bool reaped = reap(pid, status);

  if (!finished)
    fail<CompileError>(compiler, " did not finish compiling ", where, " within ", timeoutS,
                       " s in the isolated worker (HEDDLE_RTC_ISOLATE_TIMEOUT_S); the worker was killed");
  if (reaped && WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* sigName = ::strsignal(sig);
    fail<CompileError>(compiler, " crashed with signal ", sig, " (", sigName ? sigName : "unknown",
                       ") while compiling ", where,
                       " in an isolated worker process (HEDDLE_RTC_ISOLATE); this process is unaffected.", crashHint);
  }
  if (msg.empty())
    fail<CompileError>("the isolated ", compiler, " worker for ", where, " exited (status ",
                       reaped && WIFEXITED(status) ? WEXITSTATUS(status) : -1, ") without a result");
  try {
    ByteReader rd(msg);
    uint32_t tag = rd.u32();
    if (tag == kWorkerOk) return decodeRtcResult(msg.substr(4));
    std::string text = rd.str();
    if (tag == kWorkerCompileError) throw CompileError(text);
    if (tag == kWorkerUnavailable) throw RuntimeUnavailable(text);
    throw HeddleError("isolated compile of " + where + " failed: " + text);
  } catch (const DecodeError& e) {
    fail<CompileError>("malformed result from the isolated ", compiler, " worker for ", where, ": ", e.what());
  }
}

}  // namespace heddle::rt
