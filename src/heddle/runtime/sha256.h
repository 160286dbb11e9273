// SHA-256 (FIPS 180-4), small and dependency-free: cache keys and cache-entry checksums.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace heddle::rt {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t len);
  Sha256& update(const std::string& s) { return update(s.data(), s.size()); }
  std::array<uint8_t, 32> digest();  // finalizes; the object must not be updated afterwards
  std::string hexDigest();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  uint8_t buf_[64];
  size_t bufLen_ = 0;
  uint64_t totalLen_ = 0;
};

std::string sha256Hex(const std::string& data);
std::string sha256Raw(const std::string& data);  // the 32 digest bytes

}  // namespace heddle::rt
