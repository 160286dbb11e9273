// SHA-256 (FIPS 180-4), small and dependency-free: cache keys and cache-entry checksums.
//
// Two compression functions give the same digests: the portable one (FIPS 180-4 section 6.2, one block at a
// time) and, on x86-64 CPUs with the SHA extensions (CPUID.(EAX=7,ECX=0):EBX[29], with SSSE3 and SSE4.1),
// SHA256RNDS2 / SHA256MSG1 / SHA256MSG2, about 8x faster (0.1 ms instead of 0.8 ms for a 150 KB cache entry:
// every disk hit checksums its entry). Chosen once per process (sha256Impl()); tests/runtime/test_cache.py
// checks both against hashlib.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace heddle::rt {

enum class Sha256Impl { Portable, ShaNi };
// The compression function this process uses: ShaNi where the CPU has it, unless $HEDDLE_SHA256=portable.
Sha256Impl sha256Impl();
bool sha256ShaNiAvailable();                  // the CPU has the SHA extensions (and this build can use them)
const char* sha256ImplName(Sha256Impl impl);  // "portable", "sha-ni"

class Sha256 {
 public:
  Sha256();
  explicit Sha256(Sha256Impl impl);  // a test's choice (ShaNi only where sha256Impl() could take it)
  Sha256& update(const void* data, size_t len);
  Sha256& update(const std::string& s) { return update(s.data(), s.size()); }
  std::array<uint8_t, 32> digest();  // finalizes; the object must not be updated afterwards
  std::string hexDigest();

 private:
  void blocks(const uint8_t* p, size_t n);  // n whole 64-byte blocks
  void block(const uint8_t* p);             // the portable compression of one block
  Sha256Impl impl_;
  std::array<uint32_t, 8> h_;
  uint8_t buf_[64];
  size_t bufLen_ = 0;
  uint64_t totalLen_ = 0;
};

std::string sha256Hex(const std::string& data);
std::string sha256Raw(const std::string& data);  // the 32 digest bytes

}  // namespace heddle::rt
