// The remote kernel cache's failure policy around its client (remote_cache.h).
#include "heddle/runtime/cache/remote_cache.h"

#include <atomic>
#include <cstdio>

#include "heddle/runtime/dynlib.h"

namespace heddle::rt {
namespace {

void warnOnce(std::atomic<bool>& flag, const std::string& message) {
  if (flag.exchange(true)) return;
  std::fprintf(stderr, "heddle: warning: %s (reported once per process)\n", message.c_str());
  std::fflush(stderr);
}

std::atomic<bool> gWarnedDown{false}, gWarnedRejected{false};

}  // namespace

RemoteCache& RemoteCache::global() {
  static RemoteCache cache;
  return cache;
}

void RemoteCache::setConnector(RemoteConnector connector) {
  std::shared_ptr<RemoteBackend> old;  // dropped outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  connector_ = std::move(connector);
  old.swap(backend_);
  dead_ = false;
}

std::string RemoteCache::redacted(const std::string& url) {
  auto scheme = url.find("://");
  auto at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

std::shared_ptr<RemoteBackend> RemoteCache::backend(std::string* urlOut) {
  const std::string url = envOr("HEDDLE_REMOTE_CACHE");
  RemoteConnector connector;
  {
    std::shared_ptr<RemoteBackend> old;  // dropped outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (url != url_) {  // another server (tests switch it): a fresh start
      old.swap(backend_);
      dead_ = false;
      url_ = url;
    }
    if (url_.empty() || dead_) return nullptr;
    if (urlOut) *urlOut = url_;
    if (backend_) return backend_;
    connector = connector_;
  }
  std::shared_ptr<RemoteBackend> made;
  std::string why = "has no client (the Python bindings register redis-py's)";
  if (connector) {
    try {
      made = connector(url);
    } catch (const RemoteFailure& e) { why = e.what(); }
  }
  if (!made) {
    fail(url, why);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (url_ != url || dead_) return nullptr;
  if (!backend_) backend_ = std::move(made);
  return backend_;
}

void RemoteCache::fail(const std::string& url, const std::string& why) {
  std::shared_ptr<RemoteBackend> old;  // dropped outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (url != url_ || dead_) return;  // the URL changed meanwhile, or another call failed first
    old.swap(backend_);
    dead_ = true;
    ++stats_.failures;
  }
  warnOnce(gWarnedDown, "remote cache " + redacted(url) + " " + why +
                            "; working from the local cache for the "
                            "rest of this process");
}

void RemoteCache::warnRejected(const std::string& key, const std::string& problem) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rejected;
  }
  warnOnce(gWarnedRejected, "remote cache entry " + key + " rejected (" + problem + "); compiling it here");
}

std::optional<std::string> RemoteCache::get(const std::string& key) {
  std::string url;
  auto client = backend(&url);
  if (!client) return std::nullopt;
  try {
    std::optional<std::string> value = client->get(key);
    std::lock_guard<std::mutex> lock(mu_);
    ++(value ? stats_.hits : stats_.misses);
    return value;
  } catch (const RemoteFailure& e) {
    fail(url, e.what());
    return std::nullopt;
  }
}

void RemoteCache::put(const std::string& key, const std::string& value) {
  std::string url;
  auto client = backend(&url);
  if (!client) return;
  try {
    client->put(key, value);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.stores;
  } catch (const RemoteFailure& e) { fail(url, e.what()); }
}

RemoteStats RemoteCache::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace heddle::rt
