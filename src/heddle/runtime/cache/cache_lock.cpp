// Per-key compile lock files in the cache directory (cache_lock.h).
#include "heddle/runtime/cache/cache_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "heddle/ir/errors.h"
#include "heddle/runtime/cache/cache_disk.h"
#include "heddle/runtime/dynlib.h"

namespace heddle::rt {

double compileLockTimeout() {
  std::string raw = envOr("HEDDLE_COMPILE_LOCK_TIMEOUT");
  if (raw.empty()) return 600.0;
  char* end = nullptr;
  double v = std::strtod(raw.c_str(), &end);
  return (end && !*end && v >= 0) ? v : 600.0;
}

KeyLock::KeyLock(const std::string& dir, const std::string& key, double timeoutSeconds) {
  path_ = dir + "/." + key + ".lock";
  try {
    ensureDirectory(dir);
  } catch (const HeddleError&) {
    return;  // not acquired: the caller compiles without the lock (the entry write reports the problem)
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSeconds);
  auto pause = std::chrono::milliseconds(2);
  while (true) {
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      struct stat held{}, now{};
      if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
          held.st_dev == now.st_dev) {
        fd_ = fd;
        return;
      }
      ::close(fd);  // the previous holder unlinked this file: lock the one at the path now
      continue;
    }
    const int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK || Clock::now() >= deadline) {
      timedOut_ = err == EWOULDBLOCK;
      return;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

KeyLock::~KeyLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // before unlocking: a waiter that locks this inode sees it gone and retries
  ::close(fd_);             // releases the flock
}

}  // namespace heddle::rt
