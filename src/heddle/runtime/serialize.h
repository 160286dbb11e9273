// Byte-level encoding of an RtcResult, shared by the on-disk cache entry and the pipe that carries
// an isolated compile's result back to the parent. Little-endian fixed-width integers and
// length-prefixed strings; the reader checks every length against what is left.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "heddle/ir/errors.h"
#include "heddle/runtime/cuda/nvrtc.h"

namespace heddle::rt {

// Thrown by ByteReader on truncated or inconsistent input.
struct DecodeError : HeddleError {
  using HeddleError::HeddleError;
};

class ByteWriter {
 public:
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void f64(double v);
  void str(std::string_view s) {
    u64(s.size());
    buf_ += s;
  }
  void raw(const std::string& s) { buf_ += s; }
  const std::string& bytes() const { return buf_; }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string buf_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string& data) : data_(data) {}
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  double f64();
  std::string str() { return raw(u64()); }
  std::string raw(uint64_t n);
  size_t remaining() const { return data_.size() - pos_; }

 private:
  uint64_t get(int n);
  const std::string& data_;
  size_t pos_ = 0;
};

// The stats are not stored: they are re-parsed from the ptxas report on decode.
std::string encodeRtcResult(const RtcResult& r);
RtcResult decodeRtcResult(const std::string& bytes);  // throws DecodeError

}  // namespace heddle::rt
