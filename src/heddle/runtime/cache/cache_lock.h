// KeyLock: one process compiles a kernel while the others wait for its cache entry.
//
// A per-key lock file <cache dir>/.<key>.lock held with flock(LOCK_EX). KernelCache takes it after a
// disk miss, reads the disk again (the holder before it may have stored the entry), compiles only on a
// second miss, stores the entry, then releases. The lock is released with its holder's process (flock),
// so a crashed compiler never leaves a lock held; the holder unlinks the file before unlocking, and a
// waiter that locked an unlinked file (inode no longer at the path) retries, so lock files do not pile up.
// The wait is bounded: after HEDDLE_COMPILE_LOCK_TIMEOUT seconds (default 600) the waiter compiles the
// kernel itself (KernelCache warns once): a lock never blocks forever, at worst a kernel compiles twice.
#pragma once

#include <string>

namespace heddle::rt {

class KeyLock {
 public:
  KeyLock(const std::string& dir, const std::string& key, double timeoutSeconds);
  ~KeyLock();
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

  bool acquired() const { return fd_ >= 0; }
  bool timedOut() const { return timedOut_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  bool timedOut_ = false;
  std::string path_;
};

// $HEDDLE_COMPILE_LOCK_TIMEOUT in seconds (a number >= 0), else 600.
double compileLockTimeout();

}  // namespace heddle::rt
