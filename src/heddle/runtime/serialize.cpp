// RtcResult <-> bytes. Field order is part of the disk format: bump kCacheFormatVersion in
// cache_disk.cpp when it changes.
#include "heddle/runtime/serialize.h"

#include <cstring>

namespace heddle::rt {

void ByteWriter::f64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  u64(bits);
}

double ByteReader::f64() {
  uint64_t bits = u64();
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

uint64_t ByteReader::get(int n) {
  if (remaining() < static_cast<size_t>(n))
    fail<DecodeError>("truncated data: need ", n, " bytes at offset ", pos_, ", have ", remaining());
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
  pos_ += n;
  return v;
}

std::string ByteReader::raw(uint64_t n) {
  if (n > remaining())
    fail<DecodeError>("length ", n, " at offset ", pos_, " exceeds the ", remaining(), " bytes left");
  std::string s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::string encodeRtcResult(const RtcResult& r) {
  ByteWriter w;
  w.str(r.name);
  w.str(r.arch);
  w.str(r.cubin);
  w.str(r.ptx);
  w.str(r.log);
  w.str(r.ptxasReport);
  w.str(r.nvrtcVersion);
  w.f64(r.compileMs);
  return w.bytes();
}

RtcResult decodeRtcResult(const std::string& bytes) {
  ByteReader rd(bytes);
  RtcResult r;
  r.name = rd.str();
  r.arch = rd.str();
  r.cubin = rd.str();
  r.ptx = rd.str();
  r.log = rd.str();
  r.ptxasReport = rd.str();
  r.nvrtcVersion = rd.str();
  r.compileMs = rd.f64();
  if (rd.remaining() != 0) fail<DecodeError>(rd.remaining(), " unexpected trailing bytes");
  r.stats = parsePtxasReport(r.ptxasReport).stats;
  return r;
}

}  // namespace heddle::rt
