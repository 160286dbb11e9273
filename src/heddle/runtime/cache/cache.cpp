// Key derivation and the memory/disk/compile lookup order of KernelCache (cache.h).
#include "heddle/runtime/cache/cache.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "heddle/runtime/cache/cache_disk.h"
#include "heddle/runtime/cache/cache_lock.h"
#include "heddle/runtime/cache/remote_cache.h"
#include "heddle/runtime/serialize.h"
#include "heddle/runtime/sha256.h"

#ifndef HEDDLE_VERSION
#define HEDDLE_VERSION "dev"
#endif

namespace heddle::rt {
namespace {

std::mutex gEnvVarsMutex;
std::vector<std::string>& envVarList() {
  static std::vector<std::string> vars = {"HEDDLE_FAST_MATH"};
  return vars;
}

// One line to stderr ("heddle: warning: ..."), as HEDDLE_DUMP and the Python side report, the first
// time each kind of problem happens in this process; the counters in CacheStats keep counting.
enum WarnKind { kWarnCorrupt, kWarnWrite, kWarnUnsafeDir, kWarnBadLimit, kWarnLockTimeout, kWarnKinds };
void warnOnce(WarnKind kind, const std::string& message) {
  static std::atomic<bool> warned[kWarnKinds];
  if (warned[kind].exchange(true)) return;
  std::fprintf(stderr, "heddle: warning: %s (reported once per process)\n", message.c_str());
  std::fflush(stderr);
}

// Whether the program log says nothing beyond the ptxas report: a clean compile's log is the report (and
// NVRTC's stray terminating NUL), so the memory entry keeps one copy of it (programLog reads it back).
bool logIsReport(const RtcResult& r) {
  std::string_view log = r.log;
  while (!log.empty() && log.back() == '\0') log.remove_suffix(1);
  return !r.log.empty() && log == r.ptxasReport;
}

// What the memory map keeps of a result: the cubin and the launch facts (name, arch, the parsed ptxas stats).
// Not the PTX (unless asked to keep it; all of a PTX-only one, compute_XX: its PTX is what it is); the log
// only when it says more than the ptxas report (a warning, a remark: kept whole for whoever reads it); the
// report's text only when asked or when no disk entry holds it (onDisk: reportOnDisk, read back from there).
std::shared_ptr<const RtcResult> forMemory(const std::shared_ptr<const RtcResult>& r, bool onDisk) {
  const bool dropPtx = !r->ptx.empty() && !r->cubin.empty() && !KernelCache::keepPtxInMemory();
  const bool dropLog = logIsReport(*r);
  const bool dropReport = onDisk && !r->ptxasReport.empty() && !KernelCache::keepPtxasInMemory();
  if (!dropPtx && !dropLog && !dropReport) return r;
  auto slim = std::make_shared<RtcResult>(*r);
  if (dropPtx) std::string().swap(slim->ptx);
  if (dropLog) std::string().swap(slim->log);
  if (dropReport) {
    std::string().swap(slim->ptxasReport);
    slim->reportOnDisk = true;
  }
  return slim;
}

// HEDDLE_DUMP (a comma list) names `stage` or all.
bool dumpNames(const char* stage) {
  const char* dump = std::getenv("HEDDLE_DUMP");
  if (!dump) return false;
  std::string d = std::string(",") + dump + ",";
  d.erase(std::remove(d.begin(), d.end(), ' '), d.end());
  return d.find(std::string(",") + stage + ",") != std::string::npos || d.find(",all,") != std::string::npos;
}

bool keepPtxFlag() {
  const char* keep = std::getenv("HEDDLE_KEEP_PTX");
  return keep && *keep && std::string(keep) != "0";
}

}  // namespace

size_t KernelCache::memoryLimit() {
  const char* raw = std::getenv("HEDDLE_MEMORY_CACHE_SIZE");
  if (!raw || !*raw) return kDefaultMemoryLimit;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(raw, &end, 10);
  if (errno || *end || v < 0) {
    warnOnce(kWarnBadLimit, std::string("HEDDLE_MEMORY_CACHE_SIZE='") + raw +
                                "' is not a count of kernels (0 or "
                                "more); using " +
                                std::to_string(kDefaultMemoryLimit));
    return kDefaultMemoryLimit;
  }
  return static_cast<size_t>(v);
}

void KernelCache::remember(const std::string& key, const std::shared_ptr<const RtcResult>& result, bool onDisk) {
  // caller holds mu_
  auto it = memory_.find(key);
  if (it != memory_.end()) {
    lru_.erase(it->second.second);
    memory_.erase(it);
  }
  const size_t limit = memoryLimit();
  while (!lru_.empty() && memory_.size() >= limit) {
    memory_.erase(lru_.back());
    lru_.pop_back();
    ++stats_.evictions;
  }
  if (limit == 0) return;
  lru_.push_front(key);
  memory_.emplace(key, std::make_pair(forMemory(result, onDisk), lru_.begin()));
}

const char* cacheSourceName(CacheSource s) {
  switch (s) {
    case CacheSource::Memory: return "memory";
    case CacheSource::Disk: return "disk";
    case CacheSource::Remote: return "remote";
    case CacheSource::Compiled: return "compiled";
  }
  return "unknown";
}

KernelCache& KernelCache::global() {
  static KernelCache cache;
  return cache;
}

void KernelCache::registerCodeEnvVar(const std::string& name) {
  std::lock_guard<std::mutex> lock(gEnvVarsMutex);
  auto& vars = envVarList();
  if (std::find(vars.begin(), vars.end(), name) == vars.end()) vars.push_back(name);
}

std::vector<std::string> KernelCache::codeEnvVars() {
  std::lock_guard<std::mutex> lock(gEnvVarsMutex);
  return envVarList();
}

std::string headerSetDigest(const std::map<std::string, std::string>& headers) {
  ByteWriter w;
  w.u64(headers.size());
  for (const auto& [name, text] : headers) {
    w.str(name);
    w.str(text);
  }
  return sha256Hex(w.bytes());
}

namespace {

// An XXH64-style pass over `bytes` (four 64-bit lanes, one multiply per 8 bytes) whose 256-bit lane
// state is merged twice, with different lane rotations and seeds, into a 128-bit digest: memory speed
// (about 0.5 us for a 12 KB kernel source, where sha256 takes tens). Only the in-process memory front
// uses it; the cache key (and so every disk, remote and cross-process identity) stays sha256.
std::pair<uint64_t, uint64_t> digest128(std::string_view bytes) {
  constexpr uint64_t P1 = 11400714785074694791ull, P2 = 14029467366897019727ull, P3 = 1609587929392839161ull,
                     P4 = 9650029242287828579ull, P5 = 2870177450012600261ull, kSeed = 0x9e3779b97f4a7c15ull;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  auto round = [&](uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; };
  const char* p = bytes.data();
  const size_t n = bytes.size();
  uint64_t v[4] = {P1 + P2, P2, 0, 0 - P1};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      v[l] = round(v[l], w);
    }
  uint64_t out[2];
  static constexpr int kRot[2][4] = {{1, 7, 12, 18}, {18, 12, 7, 1}};
  for (int s = 0; s < 2; ++s) {
    uint64_t h = s * kSeed;
    for (int l = 0; l < 4; ++l) h += rotl(v[l], kRot[s][l]);
    for (int l = 0; l < 4; ++l) h = (h ^ round(s * kSeed, v[s ? 3 - l : l])) * P1 + P4;
    h += n;
    for (size_t j = i; j < n; ++j) h = rotl(h ^ (uint64_t(uint8_t(p[j])) * P5), 11) * P1;
    h ^= h >> 33, h *= P2, h ^= h >> 29, h *= P3, h ^= h >> 32;
    out[s] = h;
  }
  return {out[0], out[1]};
}

// Everything the key covers, length-prefixed (ByteWriter::str), so no two different inputs encode alike.
// `source` stands for in.source: the source itself for the sha256 key, its digest for the memory front.
std::string keyMaterial(const KeyInputs& in, std::string_view source) {
  ByteWriter w;
  w.str("heddle-kernel-key/1");
  w.str(in.heddleVersion);
  w.str(in.compilerVersion);
  w.str(in.name);
  w.str(source);
  w.str(in.headersDigest.empty() ? headerSetDigest(in.headers) : in.headersDigest);
  std::vector<std::string> options = nvrtcOptionList(in.options);
  w.u64(options.size());
  for (const auto& o : options) w.str(o);
  w.u32(in.options.wantPtx ? 1 : 0);
  std::vector<std::string> vars = KernelCache::codeEnvVars();
  std::sort(vars.begin(), vars.end());  // registration order must not matter
  for (const auto& var : vars) {
    // Unset variables contribute nothing, so registering one does not change existing keys;
    // a variable set to "" still differs from an unset one.
    const char* value = std::getenv(var.c_str());
    if (!value) continue;
    w.str(var);
    w.str(value);
  }
  return w.bytes();
}

}  // namespace

const char* const KeyInputs::kHeddleVersion = HEDDLE_VERSION;

std::string KernelCache::computeKey(const KeyInputs& in) { return sha256Hex(keyMaterial(in, in.source)); }

std::pair<uint64_t, uint64_t> frontDigest(const KeyInputs& in) {
  // the source (the only large field) is hashed where it lies; the rest (a few hundred bytes, with
  // the source's digest and length in the source's place) is encoded as the key encodes it
  const auto [a, b] = digest128(in.source);
  char stand[24];
  std::memcpy(stand, &a, 8);
  std::memcpy(stand + 8, &b, 8);
  const uint64_t n = in.source.size();
  std::memcpy(stand + 16, &n, 8);
  return digest128(keyMaterial(in, std::string_view(stand, sizeof stand)));
}

bool KernelCache::keepPtxInMemory() { return keepPtxFlag() || dumpNames("ptx"); }

bool KernelCache::keepPtxasInMemory() { return dumpNames("ptxas"); }

std::optional<std::string> KernelCache::ptxOf(const std::string& key) const {
  if (!diskEnabled()) return std::nullopt;
  DiskRead hit = DiskStore(diskDir()).read(key);
  if (hit.status != DiskReadStatus::Hit) return std::nullopt;
  return std::move(hit.result.ptx);
}

std::optional<std::string> KernelCache::ptxasReportOf(const std::string& key) const {
  if (!diskEnabled()) return std::nullopt;
  DiskRead hit = DiskStore(diskDir()).read(key);
  if (hit.status != DiskReadStatus::Hit) return std::nullopt;
  return std::move(hit.result.ptxasReport);
}

CachedKernel KernelCache::forLaunch(CachedKernel k) const {
  if (!k.result) return k;
  // the PTX stays: asked for, or none, or nothing but PTX (compute_XX)
  const bool keep = k.result->ptx.empty() || k.result->cubin.empty() || keepPtxInMemory();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(k.key);  // the entry, when it holds the PTX as this result is to (its log maybe not)
    if (it != memory_.end() && it->second.first->ptx.size() == (keep ? k.result->ptx.size() : 0))
      k.result = it->second.first;
  }
  if (keep) return k;
  // not held in memory (use_cache=False, limit 0): no disk entry to read the report back from
  if (!k.result->ptx.empty()) k.result = forMemory(k.result, false);
  k.ptxDropped = !k.result->cubin.empty();
  return k;
}

size_t KernelCache::memoryBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& [key, e] : memory_) n += key.size() + resultBytes(*e.first);
  return n;
}

const std::string& programLog(const RtcResult& r) { return r.log.empty() ? r.ptxasReport : r.log; }

size_t resultBytes(const RtcResult& r) {
  return r.name.size() + r.arch.size() + r.cubin.size() + r.ptx.size() + r.log.size() + r.ptxasReport.size() +
         r.nvrtcVersion.size() + sizeof(RtcResult);
}

bool KernelCache::holds(const CachedKernel& k) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = memory_.find(k.key);
  return it != memory_.end() && it->second.first == k.result;
}

CachedKernel KernelCache::getOrCompile(const KeyInputs& in, const std::function<RtcResult()>& compile) {
  CachedKernel out;
  const auto cheap = frontDigest(in);
  auto memoryHit = [&](std::unordered_map<std::string, MemoryEntry>::iterator it) {  // holds mu_
    ++stats_.memoryHits;
    lru_.splice(lru_.begin(), lru_, it->second.second);  // most recently used
    out.result = it->second.first;
    out.source = CacheSource::Memory;
    out.ptxDropped = in.options.wantPtx && out.result->ptx.empty() && !out.result->cubin.empty();
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto f = front_.find(cheap);
    if (f != front_.end() && inFlight_.count(f->second) == 0) {
      auto it = memory_.find(f->second);
      if (it != memory_.end()) {
        out.key = f->second;
        memoryHit(it);
        return out;
      }
    }
  }
  out.key = computeKey(in);
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return inFlight_.count(out.key) == 0; });
    if (front_.size() > 2 * memory_.size() + 64) front_.clear();
    front_[cheap] = out.key;
    auto it = memory_.find(out.key);
    if (it != memory_.end()) {
      memoryHit(it);
      return out;
    }
    inFlight_.insert(out.key);
  }
  // Whatever happens below, release the waiters on this key.
  struct Release {
    KernelCache* self;
    const std::string& key;
    ~Release() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->inFlight_.erase(key);
      self->done_.notify_all();
    }
  } release{this, out.key};

  bool useDisk = diskEnabled();
  DiskStore store(useDisk ? diskDir() : std::string());
  if (useDisk) {
    std::string unsafe = unsafeCacheDirReason(store.dir());
    if (!unsafe.empty()) {
      useDisk = false;
      warnOnce(kWarnUnsafeDir,
               "not using the kernel cache directory " + store.dir() + ": " + unsafe +
                   "; kernels are cached in memory only. Use a directory of your own (HEDDLE_CACHE_DIR, mode 0700)");
    }
  }
  // firstLook: a rejected entry is counted and warned about once, on the first look only
  auto fromDisk = [&](bool firstLook) -> bool {
    DiskRead hit = store.read(out.key);
    if (hit.status == DiskReadStatus::Corrupt && !firstLook) return false;
    if (hit.status == DiskReadStatus::Corrupt)
      warnOnce(kWarnCorrupt, "kernel cache entry rejected and recompiled: " + hit.problem);
    std::lock_guard<std::mutex> lock(mu_);
    if (hit.status == DiskReadStatus::Hit) {
      ++stats_.diskHits;
      out.result = std::make_shared<const RtcResult>(std::move(hit.result));
      out.source = CacheSource::Disk;
      remember(out.key, out.result, true);
      return true;
    }
    if (hit.status == DiskReadStatus::Corrupt) ++stats_.corrupt;
    return false;
  };
  if (useDisk && fromDisk(true)) return out;
  // A miss: one process per machine compiles it (cache_lock.h). The others wait for its entry.
  std::optional<KeyLock> keyLock;
  if (useDisk) {
    keyLock.emplace(store.dir(), out.key, compileLockTimeout());
    if (keyLock->timedOut())
      warnOnce(kWarnLockTimeout, "waited " + std::to_string(compileLockTimeout()) +
                                     " s for another process "
                                     "compiling the same kernel (" +
                                     keyLock->path() +
                                     "); compiling it here too. "
                                     "HEDDLE_COMPILE_LOCK_TIMEOUT sets the wait in seconds");
    if (keyLock->acquired() && fromDisk(false)) return out;  // the holder before us stored it
  }
  // The fleet's cache (remote_cache.h): a verified entry is kept on disk and in memory like a compiled one.
  RemoteCache& remote = RemoteCache::global();
  const std::string remoteKey = "heddle:kernel:" + out.key;
  if (auto bytes = remote.get(remoteKey)) {
    try {
      auto fetched = std::make_shared<const RtcResult>(decodeEntry(out.key, *bytes));
      std::string ignored;
      const bool onDisk = useDisk && store.write(out.key, *fetched, &ignored);
      std::lock_guard<std::mutex> lock(mu_);
      remember(out.key, fetched, onDisk);
      out.result = fetched;
      out.source = CacheSource::Remote;
      return out;
    } catch (const DecodeError& e) { remote.warnRejected(remoteKey, e.what()); }
  }

  auto result = std::make_shared<const RtcResult>(compile());
  std::string writeError;
  bool stored = !useDisk || store.write(out.key, *result, &writeError);
  if (!stored)
    warnOnce(kWarnWrite, "cannot store a compiled kernel in the disk cache (" + writeError +
                             "); it is kept in memory only. Check HEDDLE_CACHE_DIR or set HEDDLE_DISABLE_DISK_CACHE=1");
  if (remote.enabled()) {
    keyLock.reset();  // the entry is on disk: waiting processes need not wait for the network
    remote.put(remoteKey, encodeEntry(out.key, *result));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.compiles;
  if (!stored) ++stats_.diskWriteErrors;
  remember(out.key, result, useDisk && stored);
  out.result = result;
  out.source = CacheSource::Compiled;
  return out;
}

CacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void KernelCache::resetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = CacheStats{};
}

void KernelCache::clear() {
  std::unordered_map<std::string, MemoryEntry> drop;
  std::list<std::string> dropLru;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(memory_);  // swap, not clear(): the table's buckets are released too
    dropLru.swap(lru_);
    decltype(front_)().swap(front_);
  }
}  // the kernels are freed here, outside the lock

size_t KernelCache::memorySize() const {
  std::lock_guard<std::mutex> lock(mu_);
  return memory_.size();
}

bool KernelCache::diskDirUsable() const {
  std::string dir = diskDir();
  return !dir.empty() && unsafeCacheDirReason(dir).empty();
}

size_t KernelCache::clearDisk() {
  std::string dir = diskDir();
  return dir.empty() ? 0 : DiskStore(dir).clear();
}

std::string KernelCache::diskDir() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dirOverride_.empty()) return dirOverride_;
  }
  return cacheDirFromEnv();
}

void KernelCache::setDiskDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  dirOverride_ = dir;
}

bool KernelCache::diskEnabled() const { return !diskCacheDisabledByEnv() && !diskDir().empty(); }

}  // namespace heddle::rt
