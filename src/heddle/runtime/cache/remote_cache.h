// RemoteCache: an optional cache shared by a fleet, in a Redis server: HEDDLE_REMOTE_CACHE=redis://host:port
// (or rediss:// for TLS, user:password@ for AUTH, /db for the database number).
//
// KernelCache asks it after a local miss (memory, disk; under the per-key lock, cache_lock.h) and
// stores every kernel it compiles there. Values are the disk cache's self-verifying entries
// (cache_disk.h: magic, format, key, payload, sha256), verified before use and stored on disk on a hit;
// a value that fails verification is ignored (the kernel compiles) with one warning. Python stores
// autotune results through get/put under its own key prefix (heddle/tuning/autotune.py).
//
// The client is a RemoteBackend (get, put) built for the URL by the connector registered with
// setConnector: the Python bindings register redis-py's (python/heddle/core/remote_cache.py), which
// gives every exchange a deadline (HEDDLE_REMOTE_CACHE_TIMEOUT seconds, default 2). The first failure of
// any kind (no client, refused, reset, timeout, an error reply) prints one warning and turns the remote
// cache off for the rest of the process: heddle keeps working from its local cache. Keys are prefixed
// "heddle:<kind>:". Like the cache directory, the server must be trusted: entries are checksummed,
// not authenticated.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

namespace heddle::rt {

// A backend's failure; what() completes "remote cache <url> ..." (e.g. "timed out").
struct RemoteFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One server's client. Both calls may block up to the backend's deadline and throw RemoteFailure.
class RemoteBackend {
 public:
  virtual ~RemoteBackend() = default;
  virtual std::optional<std::string> get(const std::string& key) = 0;  // nullopt: a miss
  virtual void put(const std::string& key, const std::string& value) = 0;
};

// What the remote cache did in this process (runtime.remote_stats()).
struct RemoteStats {
  uint64_t hits = 0;      // values found (before their verification)
  uint64_t misses = 0;    // keys the server does not hold
  uint64_t stores = 0;    // values stored
  uint64_t failures = 0;  // clients that failed (each turned the remote cache off for its URL)
  uint64_t rejected = 0;  // values that failed verification (warnRejected)
};

// Builds the client for a URL (without talking to the server yet); throws RemoteFailure.
using RemoteConnector = std::function<std::shared_ptr<RemoteBackend>(const std::string& url)>;

class RemoteCache {
 public:
  static RemoteCache& global();

  void setConnector(RemoteConnector connector);
  // The server named by HEDDLE_REMOTE_CACHE has a client, and it has not failed in this process.
  bool enabled() { return backend() != nullptr; }
  // nullopt: a miss, or the remote cache is off (failed now or before).
  std::optional<std::string> get(const std::string& key);
  void put(const std::string& key, const std::string& value);

  // A rejected value (failed verification): counted, one warning per process.
  void warnRejected(const std::string& key, const std::string& problem);
  RemoteStats stats();
  // The URL as warnings print it: a password in it is replaced by "***".
  static std::string redacted(const std::string& url);

 private:
  // The client for the current HEDDLE_REMOTE_CACHE (built on first use), or null when off. The backend
  // runs outside mu_: it may take the Python lock, which a caller of enabled() may hold.
  std::shared_ptr<RemoteBackend> backend(std::string* url = nullptr);
  void fail(const std::string& url, const std::string& why);

  std::mutex mu_;
  RemoteConnector connector_;
  std::string url_;  // the HEDDLE_REMOTE_CACHE the state below belongs to
  std::shared_ptr<RemoteBackend> backend_;
  bool dead_ = false;
  RemoteStats stats_;
};

}  // namespace heddle::rt
