// KernelCache: compiled kernels by content key, in memory and on disk (cache_disk.h).
//
// The key is sha256 over everything that can change the compiled code: the source, every header
// (name and text), the program name, the full NVRTC option list (arch, lineinfo, maxrregcount,
// extra options), whether PTX is kept, the heddle version (HEDDLE_VERSION), the NVRTC version, and
// the values of the registered code-changing environment variables (HEDDLE_FAST_MATH pre-registered).
// Isolation (HEDDLE_RTC_ISOLATE) does not change code and is not part of the key.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "heddle/runtime/cuda/nvrtc.h"

namespace heddle::rt {

enum class CacheSource { Memory, Disk, Remote, Compiled };
const char* cacheSourceName(CacheSource s);  // "memory", "disk", "remote", "compiled"

struct KeyInputs {
  // The source is read, never copied: it stays the caller's (the request's) for the lookup and the compile.
  std::string_view source;
  std::string name;
  std::map<std::string, std::string> headers;
  RtcOptions options;
  std::string compilerVersion;  // e.g. the NVRTC version
  // When set, stands for `headers` in the key (a digest computed once per process for the
  // embedded device headers, so a cache hit does not re-hash ~100 KB of header text).
  std::string headersDigest;
  // The heddle build the key is for (a test names another one to see the key move).
  std::string_view heddleVersion = kHeddleVersion;
  static const char* const kHeddleVersion;
};

// The memory front's 128-bit digest of everything computeKey covers (the same fields, the source
// through its own digest): what a memory hit pays instead of sha256. See KernelCache::front_.
std::pair<uint64_t, uint64_t> frontDigest(const KeyInputs& in);

// Bytes a result holds (cubin, PTX, logs, names and the struct itself): memoryBytes() counts each entry so.
size_t resultBytes(const RtcResult& r);

// The program log of a result: its log, or its ptxas report where the memory cache dropped a log that was
// nothing more (a clean compile's: no front-end warning; the disk entry keeps the log as NVRTC wrote it).
// Empty for a memory entry whose report is on disk (r.reportOnDisk: KernelCache::ptxasReportOf).
const std::string& programLog(const RtcResult& r);

// sha256 over every (name, text) of a header set, length-prefixed.
std::string headerSetDigest(const std::map<std::string, std::string>& headers);

struct CachedKernel {
  std::shared_ptr<const RtcResult> result;
  CacheSource source = CacheSource::Compiled;
  std::string key;
  // A memory hit's result holds no PTX (the memory cache keeps the cubin and launch facts only,
  // keepPtxInMemory()): KernelCache::ptxOf(key) reads it back from the disk entry.
  bool ptxDropped = false;
};

struct CacheStats {
  uint64_t memoryHits = 0;
  uint64_t diskHits = 0;
  uint64_t compiles = 0;
  uint64_t corrupt = 0;          // disk entries that failed verification (and were removed)
  uint64_t diskWriteErrors = 0;  // entries that could not be stored (the cache still works)
  uint64_t evictions = 0;        // kernels dropped from memory by the LRU bound
};

class KernelCache {
 public:
  static KernelCache& global();

  // Environment variables whose values change generated code; they enter every key.
  static void registerCodeEnvVar(const std::string& name);
  static std::vector<std::string> codeEnvVars();
  static std::string computeKey(const KeyInputs& in);
  // PTX stays in memory entries only when asked: HEDDLE_KEEP_PTX=1, or HEDDLE_DUMP naming ptx / all.
  static bool keepPtxInMemory();
  // The ptxas report's text stays in memory entries when asked (HEDDLE_DUMP naming ptxas / all) or when the
  // entry is not on disk; otherwise the entry keeps its parsed stats only (HEDDLE_KEEP_PTX is the PTX's alone).
  static bool keepPtxasInMemory();
  // The PTX of the kernel stored under `key`, read from its disk entry; nullopt when it is not
  // there (disk cache off, entry removed or corrupt).
  std::optional<std::string> ptxOf(const std::string& key) const;
  // The same for its ptxas report (what a memory entry with reportOnDisk left there).
  std::optional<std::string> ptxasReportOf(const std::string& key) const;
  // `k` as a kernel kept for launching holds it (Kernel.build): the memory cache's own result for k.key
  // when it has one (the cubin and launch facts, shared with the cache, not a second copy), else a copy
  // without the PTX; ptxDropped is set when the PTX went (ptxOf reads it back from the disk entry).
  // When keepPtxInMemory(), or the result has no PTX or nothing but PTX (compute_XX): the memory cache's own
  // result if it holds the same PTX, else unchanged.
  CachedKernel forLaunch(CachedKernel k) const;
  // Whether k's result is the memory cache's own entry for k.key (held once, counted by memoryBytes()).
  bool holds(const CachedKernel& k) const;
  // Bytes the memory cache holds for its kernels' results (cubin, PTX, logs, names; not the table).
  size_t memoryBytes() const;

  // Memory, then disk, then compile(); stores what it compiled in both. Concurrent calls for the
  // same key wait for the first instead of compiling twice. Exceptions from compile() propagate.
  CachedKernel getOrCompile(const KeyInputs& in, const std::function<RtcResult()>& compile);

  CacheStats stats() const;
  void resetStats();
  void clear();               // the memory map only (its kernels and its table are freed)
  size_t memorySize() const;  // kernels held in memory now
  // The memory bound: $HEDDLE_MEMORY_CACHE_SIZE kernels (read at each store; 0 keeps none), else
  // kDefaultMemoryLimit. The least recently used kernel is dropped first (a later lookup finds it on disk).
  static constexpr size_t kDefaultMemoryLimit = 1024;
  static size_t memoryLimit();
  size_t clearDisk();  // entries in the current disk directory; returns files removed

  // The disk directory: the override from setDiskDir, else cacheDirFromEnv() read at each call.
  std::string diskDir() const;
  void setDiskDir(const std::string& dir);  // "" restores the environment lookup
  // Disk store in use: not disabled by $HEDDLE_DISABLE_DISK_CACHE and a directory is known.
  bool diskEnabled() const;
  // The directory may be used: not owned by another user, not group/other-writable without the
  // sticky bit (unsafeCacheDirReason); otherwise lookups warn once and stay in memory.
  bool diskDirUsable() const;

 private:
  using MemoryEntry = std::pair<std::shared_ptr<const RtcResult>, std::list<std::string>::iterator>;
  // holds mu_; onDisk: the disk entry holds `result` (its report's text may then stay there)
  void remember(const std::string& key, const std::shared_ptr<const RtcResult>& result, bool onDisk);

  mutable std::mutex mu_;
  std::condition_variable done_;
  std::list<std::string> lru_;  // keys, most recently used first
  std::unordered_map<std::string, MemoryEntry> memory_;
  // The memory lookup's front: a 128-bit non-cryptographic digest of the key material -> the key,
  // so a memory hit does not pay sha256 over the source (frontDigest). A digest whose
  // key left memory_ falls through to the full lookup; the table is dropped when it outgrows memory_.
  struct Digest128Hash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& d) const { return size_t(d.first ^ (d.second * 31)); }
  };
  std::unordered_map<std::pair<uint64_t, uint64_t>, std::string, Digest128Hash> front_;
  std::set<std::string> inFlight_;
  CacheStats stats_;
  std::string dirOverride_;
};

}  // namespace heddle::rt
