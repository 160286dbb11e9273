// SHA-256 straight from FIPS 180-4 section 6.2; checked against Python's hashlib in tests/runtime/test_cache.py.
#include "heddle/runtime/sha256.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HEDDLE_SHA_NI 1
#endif

namespace heddle::rt {
namespace {

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

#ifdef HEDDLE_SHA_NI
// The SHA extensions' compression of n blocks (Intel SDM vol. 2, SHA256RNDS2 / SHA256MSG1 / SHA256MSG2; the
// operand order as transcribed in faculerena/x86_instructions content/sha256rnds2.md). SHA256RNDS2 does two
// rounds on the state split into (A,B,E,F) and (C,D,G,H), dword 3 first, with W[t]+K[t] of those two rounds in
// the low two dwords of its third operand, and returns the new (A,B,E,F); the old (A,B,E,F) is the new
// (C,D,G,H). Message words are held four to a register, W[4g] in dword 0.
__attribute__((target("sha,ssse3,sse4.1"))) void shaNiBlocks(uint32_t h[8], const uint8_t* p, size_t n) {
  // each 32-bit word of the block is big-endian (FIPS 180-4 section 3.1)
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
  const __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)), 0xB1);      // C D A B
  const __m128i hgfe = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 4)), 0x1B);  // E F G H
  __m128i abef = _mm_alignr_epi8(dcba, hgfe, 8);     // dwords 3..0: A B E F
  __m128i cdgh = _mm_blend_epi16(hgfe, dcba, 0xF0);  // dwords 3..0: C D G H
  for (; n > 0; --n, p += 64) {
    const __m128i abef0 = abef, cdgh0 = cdgh;
    __m128i w[4];
    for (int g = 0; g < 16; ++g) {  // rounds 4g .. 4g+3
      __m128i cur;
      if (g < 4) {
        cur = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), bswap);
      } else {  // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16] (FIPS 180-4 section 6.2.2 step 1)
        cur = _mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]);                          // W[t-16] + s0(W[t-15])
        cur = _mm_add_epi32(cur, _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4));  // + W[t-7]
        cur = _mm_sha256msg2_epu32(cur, w[(g + 3) & 3]);                               // + s1(W[t-2])
      }
      w[g & 3] = cur;
      const __m128i wk = _mm_add_epi32(cur, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);  // rounds 4g, 4g+1: cdgh now holds the new A B E F
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));  // rounds 4g+2, 4g+3
    }
    abef = _mm_add_epi32(abef, abef0);
    cdgh = _mm_add_epi32(cdgh, cdgh0);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);                                   // dwords 0..3: A B E F
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);                                   // dwords 0..3: G H C D
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm_blend_epi16(feba, dchg, 0xF0));   // A B C D
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h + 4), _mm_alignr_epi8(dchg, feba, 8));  // E F G H
}

bool cpuHasShaNi() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool ssse3 = c & (1u << 9), sse41 = c & (1u << 19);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return ssse3 && sse41 && (b & (1u << 29));  // CPUID.(EAX=7,ECX=0):EBX[29]: SHA
}
#else
void shaNiBlocks(uint32_t*, const uint8_t*, size_t) {}
bool cpuHasShaNi() { return false; }
#endif

}  // namespace

bool sha256ShaNiAvailable() {
  static const bool available = cpuHasShaNi();
  return available;
}

Sha256Impl sha256Impl() {
  static const Sha256Impl impl = [] {
    const char* forced = std::getenv("HEDDLE_SHA256");
    if (forced && std::strcmp(forced, "portable") == 0) return Sha256Impl::Portable;
    return sha256ShaNiAvailable() ? Sha256Impl::ShaNi : Sha256Impl::Portable;
  }();
  return impl;
}

const char* sha256ImplName(Sha256Impl impl) { return impl == Sha256Impl::ShaNi ? "sha-ni" : "portable"; }

Sha256::Sha256() : Sha256(sha256Impl()) {}

Sha256::Sha256(Sha256Impl impl)
    : impl_(impl == Sha256Impl::ShaNi && !sha256ShaNiAvailable() ? Sha256Impl::Portable : impl),
      h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::blocks(const uint8_t* p, size_t n) {
  if (impl_ == Sha256Impl::ShaNi) return shaNiBlocks(h_.data(), p, n);
  for (; n > 0; --n, p += 64) block(p);
}

void Sha256::block(const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
}

Sha256& Sha256::update(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  totalLen_ += len;
  while (len > 0) {
    if (bufLen_ == 0 && len >= 64) {
      const size_t n = len / 64;
      blocks(p, n);
      p += 64 * n;
      len -= 64 * n;
      continue;
    }
    size_t take = std::min(len, 64 - bufLen_);
    std::memcpy(buf_ + bufLen_, p, take);
    bufLen_ += take;
    p += take;
    len -= take;
    if (bufLen_ == 64) {
      blocks(buf_, 1);
      bufLen_ = 0;
    }
  }
  return *this;
}

std::array<uint8_t, 32> Sha256::digest() {
  uint64_t bits = totalLen_ * 8;
  uint8_t pad[72] = {0x80};
  size_t padLen = (bufLen_ < 56) ? 56 - bufLen_ : 120 - bufLen_;
  for (int i = 0; i < 8; ++i) pad[padLen + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(pad, padLen + 8);
  std::array<uint8_t, 32> out;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
  return out;
}

std::string Sha256::hexDigest() {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : digest()) {
    s.push_back(hex[b >> 4]);
    s.push_back(hex[b & 15]);
  }
  return s;
}

std::string sha256Hex(const std::string& data) { return Sha256().update(data).hexDigest(); }

std::string sha256Raw(const std::string& data) {
  auto d = Sha256().update(data).digest();
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace heddle::rt
