// A minimal RESP client for the remote kernel cache (remote_cache.h).
#include "heddle/runtime/cache/remote_cache.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "heddle/runtime/dynlib.h"

namespace heddle::rt {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadlineIn(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double timeoutSeconds() {
  std::string raw = envOr("HEDDLE_REMOTE_CACHE_TIMEOUT");
  char* end = nullptr;
  double v = raw.empty() ? 0 : std::strtod(raw.c_str(), &end);
  return (!raw.empty() && end && !*end && v > 0) ? v : 2.0;
}

void warnOnce(std::atomic<bool>& flag, const std::string& message) {
  if (flag.exchange(true)) return;
  std::fprintf(stderr, "heddle: warning: %s (reported once per process)\n", message.c_str());
  std::fflush(stderr);
}

// redis://host:port -> host, port; false when the URL is not of that form.
bool parseUrl(const std::string& url, std::string* host, std::string* port) {
  const std::string scheme = "redis://";
  if (url.compare(0, scheme.size(), scheme) != 0) return false;
  std::string rest = url.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) rest = rest.substr(0, slash);
  auto colon = rest.rfind(':');
  *host = colon == std::string::npos ? rest : rest.substr(0, colon);
  *port = colon == std::string::npos ? "6379" : rest.substr(colon + 1);
  return !host->empty() && !port->empty();
}

std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

std::string command(std::initializer_list<std::string> parts) {
  std::string out = "*" + std::to_string(parts.size()) + "\r\n";
  for (const auto& p : parts) out += bulk(p);
  return out;
}

// Waits until fd is ready for `events` or the deadline passes.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, (int)left);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

std::atomic<bool> gWarnedDown{false}, gWarnedRejected{false};

}  // namespace

RemoteCache& RemoteCache::global() {
  static RemoteCache cache;
  return cache;
}

bool RemoteCache::enabled() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string url = envOr("HEDDLE_REMOTE_CACHE");
  if (url != url_) {  // another server (tests switch it): a fresh start
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    dead_ = false;
    url_ = url;
  }
  return !url_.empty() && !dead_;
}

void RemoteCache::failLocked(const std::string& why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  dead_ = true;
  warnOnce(gWarnedDown, "remote cache " + url_ + " " + why + "; working from the local cache for the rest of "
           "this process");
}

void RemoteCache::warnRejected(const std::string& key, const std::string& problem) {
  warnOnce(gWarnedRejected, "remote cache entry " + key + " rejected (" + problem + "); compiling it here");
}

bool RemoteCache::connectLocked() {
  if (fd_ >= 0) return true;
  std::string host, port;
  if (!parseUrl(url_, &host, &port)) {
    failLocked("is not a redis://host:port URL");
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    failLocked(std::string("cannot be resolved: ") + ::gai_strerror(rc));
    return false;
  }
  const auto deadline = deadlineIn(timeoutSeconds());
  std::string why = "refused the connection";
  for (addrinfo* a = found; a && fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    int err = 0;
    socklen_t len = sizeof err;
    if (rc != 0 && errno == EINPROGRESS && waitFor(fd, POLLOUT, deadline) &&
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
      rc = 0;
    if (rc == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd_ = fd;
    } else {
      why = std::string("is unreachable: ") + std::strerror(err ? err : errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (fd_ < 0) failLocked(why);
  return fd_ >= 0;
}

// Sends one command and reads one reply: a bulk string (*reply), nil (*isNil), or a status line.
bool RemoteCache::exchangeLocked(const std::string& request, std::string* reply, bool* isNil) {
  if (!connectLocked()) return false;
  const auto deadline = deadlineIn(timeoutSeconds());
  for (size_t off = 0; off < request.size();) {
    if (!waitFor(fd_, POLLOUT, deadline)) return failLocked("timed out"), false;
    ssize_t n = ::send(fd_, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return failLocked(std::string("dropped the connection: ") + std::strerror(errno)), false;
    off += (size_t)n;
  }
  std::string in;
  auto need = [&](size_t bytes) {  // at least `bytes` read into `in`
    char buf[65536];
    while (in.size() < bytes) {
      if (!waitFor(fd_, POLLIN, deadline)) return false;
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return false;
      in.append(buf, (size_t)n);
    }
    return true;
  };
  size_t eol = std::string::npos;
  while ((eol = in.find("\r\n")) == std::string::npos)
    if (!need(in.size() + 1)) return failLocked("closed the connection or timed out"), false;
  const char type = in[0];
  const std::string line = in.substr(1, eol - 1);
  *isNil = false;
  if (type == '+') return reply->assign(line), true;
  if (type == '$') {
    long long len = std::atoll(line.c_str());
    if (len < 0) return *isNil = true, true;
    if (!need(eol + 2 + (size_t)len + 2)) return failLocked("closed the connection or timed out"), false;
    reply->assign(in, eol + 2, (size_t)len);
    return true;
  }
  failLocked(type == '-' ? "answered an error: " + line : "sent a reply that is not RESP");
  return false;
}

std::optional<std::string> RemoteCache::get(const std::string& key) {
  if (!enabled()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  std::string reply;
  bool nil = false;
  if (!exchangeLocked(command({"GET", key}), &reply, &nil) || nil) return std::nullopt;
  return reply;
}

void RemoteCache::put(const std::string& key, const std::string& value) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::string reply;
  bool nil = false;
  exchangeLocked(command({"SET", key, value}), &reply, &nil);
}

}  // namespace heddle::rt
