// ptx_selftest_wgmma_f8.cpp -- the 8-bit wgmma checks of the PTX selftest (ptx_selftest.cpp has the harness):
// wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3|e5m2}.{e4m3|e5m2} (PTX ISA "wgmma.mma_async"), both
// operands K-major in 128-byte swizzled rows of 128 elements (4 k steps of 32), values decoded from their
// codes as the OFP8 spec defines them (written out here, independently of hrt_fp8.h), and the errors: a
// transposed 8-bit operand (the ISA has no such form), an 8-bit operand beside a 16-bit one.
#include "ptx_selftest.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

// OFP8 value of `code`: e4m3 (bias 7, S.1111.111 NaN, no inf) or e5m2 (bias 15, IEEE-like); codes of NaN
// or inf are never drawn here.
double f8_value(bool e5m2, uint8_t code) {
  const int mb = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int e = (code >> mb) & ((1 << (7 - mb)) - 1), m = code & ((1 << mb) - 1);
  const double mag = e ? std::ldexp(1.0 + m / double(1 << mb), e - bias) : std::ldexp(double(m), 1 - bias - mb);
  return (code & 0x80) ? -mag : mag;
}

uint8_t rand_f8(bool e5m2, double* v) {
  for (;;) {
    uint8_t c = uint8_t(rnd() & 0xFF);
    const int e = (c >> (e5m2 ? 2 : 3)) & (e5m2 ? 31 : 15);
    if (e5m2 ? e == 31 : (c & 0x7F) == 0x7F) continue;  // inf / NaN
    if (e > (e5m2 ? 17 : 9)) continue;                  // keep magnitudes small (<= 8): sums stay exact-ish
    *v = f8_value(e5m2, c);
    return c;
  }
}

uint64_t desc128(uint32_t start) {  // K-major, 128-byte swizzle: SBO = 8 rows x 128 bytes
  return uint64_t((start & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) | (1ull << 62);
}

void run_f8_case(int Nn, bool a5, bool b5) {
  const std::string name = std::string("wgmma_") + (a5 ? "e5m2" : "e4m3") + "_" + (b5 ? "e5m2" : "e4m3") + "_n" +
                           std::to_string(Nn) + "_kmajor_sw128";
  int f0 = g_fail;
  const int BK = 128;  // elements = bytes per row
  const uint32_t abase = 1024, bbase = abase + 64 * 128, total = bbase + uint32_t(Nn) * 128 + 1024;
  std::vector<uint8_t> smem(total, 0xCD);
  std::vector<double> A(64 * BK), B(size_t(Nn) * BK);
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < BK; ++k) smem[test_swz(abase + m * 128 + k, 128)] = rand_f8(a5, &A[m * BK + k]);
  for (int n = 0; n < Nn; ++n)
    for (int k = 0; k < BK; ++k) smem[test_swz(bbase + n * 128 + k, 128)] = rand_f8(b5, &B[size_t(n) * BK + k]);
  std::vector<float> dstore(128 * 128, 0.0f);
  float* dptr[128];
  for (int t = 0; t < 128; ++t) dptr[t] = &dstore[size_t(t) * 128];
  std::vector<double> D(64 * size_t(Nn), 0.0);
  for (int s = 0; s < BK / 32; ++s) {
    RecAccess ra;
    std::string err =
        P::wgmma_ss_typed(Nn, a5 ? P::kWgE5M2 : P::kWgE4M3, b5 ? P::kWgE5M2 : P::kWgE4M3, desc128(abase + 32 * s),
                          desc128(bbase + 32 * s), s == 0 ? 0 : 1, 0, 0, smem.data(), total, dptr, &ra);
    CHECK(name.c_str(), err.empty(), "step %d: unexpected error: %s", s, err.c_str());
    if (!err.empty()) break;
    size_t tot;
    auto got = RecAccess::bytes_of(ra.rd, &tot);
    CHECK(name.c_str(), tot == size_t(64 + Nn) * 32, "step %d read %zu bytes, want %d", s, tot, (64 + Nn) * 32);
    for (int m = 0; m < 64; ++m)  // the bytes of this 32-element k slice of A, after the swizzle
      for (int k = 32 * s; k < 32 * s + 32; ++k)
        CHECK(name.c_str(), got.count(test_swz(abase + m * 128 + k, 128)), "step %d: A(%d,%d) not read", s, m, k);
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < Nn; ++n)
        for (int k = 32 * s; k < 32 * s + 32; ++k) D[size_t(m) * Nn + n] += A[m * BK + k] * B[size_t(n) * BK + k];
  }
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < Nn / 2; ++i) {
      int w = t / 32, l = t % 32, r = 16 * w + l / 4 + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * (l % 4) + i % 2;
      const double ref = D[size_t(r) * Nn + c];
      CHECK(name.c_str(), std::fabs(dptr[t][i] - ref) <= 1e-5 * (std::fabs(ref) + 1.0),
            "thread %d d%d = %.9g want %.9g", t, i, dptr[t][i], ref);
    }
  report(name, f0);
}

void test_wgmma_f8_errors() {
  const char* N = "wgmma_f8_errors";
  int f0 = g_fail;
  std::vector<uint8_t> smem(32768, 0);
  std::vector<float> ds(128 * 128);
  float* d[128];
  for (int t = 0; t < 128; ++t) d[t] = &ds[size_t(t) * 128];
  const uint64_t good = desc128(1024);
  CHECK(N, P::wgmma_ss_typed(64, P::kWgE4M3, P::kWgE5M2, good, good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "good case rejected");
  const std::string ta =
      P::wgmma_ss_typed(64, P::kWgE4M3, P::kWgE4M3, good, good, 0, 1, 0, smem.data(), 32768, d, nullptr);
  CHECK(N, ta.find("K-major") != std::string::npos, "transposed 8-bit A: got '%s'", ta.c_str());
  const std::string tb =
      P::wgmma_ss_typed(64, P::kWgE4M3, P::kWgE4M3, good, good, 0, 0, 1, smem.data(), 32768, d, nullptr);
  CHECK(N, tb.find("operand B") != std::string::npos, "transposed 8-bit B: got '%s'", tb.c_str());
  CHECK(N, !P::wgmma_ss_typed(64, P::kWgE4M3, P::kWgBF16, good, good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "e4m3 x bf16 accepted");
  CHECK(N, !P::wgmma_ss_typed(64, P::kWgF16, P::kWgBF16, good, good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "f16 x bf16 accepted");
  report(N, f0);
}

}  // namespace

void test_wgmma_f8() {
  run_f8_case(64, false, false);
  run_f8_case(128, true, false);
  run_f8_case(256, false, true);
  run_f8_case(64, true, true);
  test_wgmma_f8_errors();
}
