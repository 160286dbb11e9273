// RemoteCache: an optional cache shared by a fleet, in a Redis server: HEDDLE_REMOTE_CACHE=redis://host:port.
//
// KernelCache asks it after a local miss (memory, disk; under the per-key lock, cache_lock.h) and
// stores every kernel it compiles there. Values are the disk cache's self-verifying entries
// (cache_disk.h: magic, format, key, payload, sha256), verified before use and stored on disk on a hit;
// a value that fails verification is ignored (the kernel compiles) with one warning. Python stores
// autotune results through get/put under its own key prefix (heddle/tuning/autotune.py).
//
// Plain RESP over TCP (GET, SET), no client library. Every exchange has a deadline
// (HEDDLE_REMOTE_CACHE_TIMEOUT seconds, default 2). The first failure of any kind (refused, reset,
// timeout, a reply that is not RESP, an error reply) prints one warning and turns the remote cache off
// for the rest of the process: heddle keeps working from its local cache. Keys are prefixed
// "heddle:<kind>:". Like the cache directory, the server must be trusted: entries are checksummed,
// not authenticated.
#pragma once

#include <mutex>
#include <optional>
#include <string>

namespace heddle::rt {

class RemoteCache {
 public:
  static RemoteCache& global();

  // The server named by HEDDLE_REMOTE_CACHE, and it has not failed in this process.
  bool enabled();
  // nullopt: a miss, or the remote cache is off (failed now or before).
  std::optional<std::string> get(const std::string& key);
  void put(const std::string& key, const std::string& value);

  // A rejected value (failed verification): one warning per process.
  static void warnRejected(const std::string& key, const std::string& problem);

 private:
  bool connectLocked();
  bool exchangeLocked(const std::string& request, std::string* reply, bool* isNil);
  void failLocked(const std::string& why);

  std::mutex mu_;
  std::string url_;  // the HEDDLE_REMOTE_CACHE the state below belongs to
  int fd_ = -1;
  bool dead_ = false;
};

}  // namespace heddle::rt
