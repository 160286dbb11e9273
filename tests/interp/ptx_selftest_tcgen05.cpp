// ptx_selftest_tcgen05.cpp -- the tcgen05 checks of the PTX selftest (ptx_selftest.cpp has the harness):
// src/heddle/interp/rt/hrt_ptx_tcgen05.h against the PTX ISA's tcgen05 tables.  Descriptors are encoded
// here from the ISA's tables (9.7.16.4.1 table 40, 9.7.16.4.2 table 42), operands laid out with the
// canonical layouts (ptx_selftest.h), results compared with double-precision GEMMs.
#include "heddle/interp/rt/hrt_ptx_tcgen05.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ptx_selftest.h"

namespace {

// Table 42, .kind::f16, dense.
uint32_t idesc(bool bf16, int M, int N, bool mnA = false, bool mnB = false, bool negA = false, bool negB = false) {
  uint32_t t = bf16 ? 1u : 0u;
  return (1u << 4) | (t << 7) | (t << 10) | (uint32_t(negA) << 13) | (uint32_t(negB) << 14) | (uint32_t(mnA) << 15) |
         (uint32_t(mnB) << 16) | (uint32_t(N >> 3) << 17) | (uint32_t(M >> 4) << 24);
}

// Table 40: start, LBO, SBO (>> 4), the constant 0b001 at 46-48, swizzle at 61-63.
uint64_t sdesc(uint32_t start, uint32_t lbo, uint32_t sbo, int W) {
  uint64_t sw = W == 128 ? 2 : W == 64 ? 4 : W == 32 ? 6 : 0;
  return uint64_t((start & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 46) | (sw << 61);
}

void test_idesc() {
  const char* N = "tcgen05_idesc";
  int f0 = g_fail;
  P::InstrDescF16 d;
  // the table's fields, literally: bf16 A/B (1 at 7 and 10), F32 D (1 at 4), N=256 -> 32 at 17, M=128 -> 8 at 24
  uint32_t v = idesc(true, 128, 256, false, true);
  CHECK(N, v == ((1u << 4) | (1u << 7) | (1u << 10) | (1u << 16) | (32u << 17) | (8u << 24)), "encoding %08x", v);
  std::string e = P::decode_idesc_f16(v, &d);
  CHECK(N, e.empty() && d.bf16 && d.M == 128 && d.N == 256 && !d.mnMajorA && d.mnMajorB && !d.negA,
        "decode: %s M=%d N=%d", e.c_str(), d.M, d.N);
  e = P::decode_idesc_f16(idesc(false, 128, 16, true, false, true, true), &d);
  CHECK(N, e.empty() && !d.bf16 && d.N == 16 && d.mnMajorA && d.negA && d.negB, "f16 N=16: %s", e.c_str());
  struct {
    uint32_t v;
    const char* want;
  } bad[] = {
      {idesc(true, 64, 128), "M = 64"},
      {idesc(true, 128, 24), "N = 24"},
      {idesc(true, 128, 272 - 16) | (1u << 2), "sparsity"},
      {idesc(true, 128, 128) & ~(3u << 4), "D type"},
      {idesc(true, 128, 128) | (1u << 23), "reserved"},
      {idesc(true, 128, 128) | (1u << 30), "tcgen05.mma.ws"},
      {(idesc(false, 128, 128) | (1u << 7)), "must both be F16"},
  };
  for (auto& b : bad) {
    e = P::decode_idesc_f16(b.v, &d);
    CHECK(N, e.find(b.want) != std::string::npos, "descriptor %08x: '%s' lacks '%s'", b.v, e.c_str(), b.want);
  }
  report(N, f0);
}

// Table 42, .kind::f8f6f4, dense: A/B type E4M3 0, E5M2 1 at bits 7-9 / 10-12 (both K-major here).
uint32_t idesc_f8(int fa, int fb, int M, int N) {
  return (1u << 4) | (uint32_t(fa) << 7) | (uint32_t(fb) << 10) | (uint32_t(N >> 3) << 17) | (uint32_t(M >> 4) << 24);
}

void test_idesc_f8() {
  const char* N = "tcgen05_idesc_f8f6f4";
  int f0 = g_fail;
  P::InstrDescF16 d;
  const uint32_t v = idesc_f8(0, 1, 128, 64);
  CHECK(N, v == ((1u << 4) | (1u << 10) | (8u << 17) | (8u << 24)), "encoding %08x", v);
  std::string e = P::decode_idesc(P::TcKind::F8F6F4, v, &d);
  CHECK(N, e.empty() && d.fmtA == 0 && d.fmtB == 1 && d.K() == 32 && d.N == 64 && d.M == 128, "decode: %s fmt %d %d",
        e.c_str(), d.fmtA, d.fmtB);
  // the same bits read as kind::f16 are f16 x bf16: refused there, K = 16
  e = P::decode_idesc(P::TcKind::F16, v, &d);
  CHECK(N, e.find("must both be F16") != std::string::npos, "kind::f16 reading of mixed formats: '%s'", e.c_str());
  struct {
    uint32_t v;
    const char* want;
  } bad[] = {
      {idesc_f8(5, 0, 128, 64), "not modelled"},  // E2M1
      {idesc_f8(0, 3, 128, 64), "not modelled"},  // E2M3
      {idesc_f8(2, 0, 128, 64), "not an f8f6f4 format"},
      {idesc_f8(0, 0, 128, 64) | (1u << 15), "K-major only"},
      {idesc_f8(0, 0, 128, 64) | (1u << 16), "K-major only"},
      {idesc_f8(1, 1, 64, 64), "M = 64"},
  };
  for (auto& b : bad) {
    e = P::decode_idesc(P::TcKind::F8F6F4, b.v, &d);
    CHECK(N, e.find(b.want) != std::string::npos, "descriptor %08x: '%s' lacks '%s'", b.v, e.c_str(), b.want);
  }
  report(N, f0);
}

// kind::f8f6f4: D (128 x Nn) = A (128 x BK) * B (BK x Nn), 8-bit K-major operands in W-byte swizzled rows (BK = W
// elements, 32 per instruction: the descriptor start moves 32 bytes per k-step), formats fa / fb.
void run_mma_f8_case(const std::string& name, int Nn, int fa, int fb, int W) {
  int f0 = g_fail;
  const int BK = W, steps = BK / 32;
  const P::MiniFloat* fmt[2] = {&P::kE4M3, &P::kE5M2};
  auto off = [&](int mn, int k) { return uint32_t((mn / 8) * 8 * W + (mn % 8) * W + k); };
  const uint32_t abase = 1024, bbase = abase + ((128 * W + 1023) & ~1023u);
  const uint32_t total = bbase + ((uint32_t(Nn) * W + 1023) & ~1023u) + 1024;
  std::vector<uint8_t> smem(total, 0xCD);
  std::vector<double> A(128 * BK), B(size_t(Nn) * BK);
  auto fill = [&](std::vector<double>& X, int rows, int f, uint32_t base) {
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < BK; ++k) {
        const uint32_t code = P::minifloat_encode_satfinite(*fmt[f], 6.0 * urand() - 3.0);
        X[size_t(r) * BK + k] = P::minifloat_decode(*fmt[f], code);
        smem[test_swz(base + off(r, k), W)] = uint8_t(code);
      }
  };
  fill(A, 128, fa, abase);
  fill(B, Nn, fb, bbase);
  auto t = std::make_unique<P::Tmem>();
  uint32_t d = 0;
  std::string e = t->alloc(256, &d);
  for (int s = 0; s < steps && e.empty(); ++s)
    e = P::tcgen05_mma_ss(P::TcKind::F8F6F4, *t, d, sdesc(abase + 32 * s, 16, 8 * W, W),
                          sdesc(bbase + 32 * s, 16, 8 * W, W), idesc_f8(fa, fb, 128, Nn), s > 0, smem.data(), total,
                          nullptr);
  CHECK(name, e.empty(), "mma: %s", e.c_str());
  for (int i = 0; i < 128 && e.empty(); i += 7)
    for (int j = 0; j < Nn; ++j) {
      double ref = 0;
      for (int k = 0; k < BK; ++k) ref += A[size_t(i) * BK + k] * B[size_t(j) * BK + k];
      const float got = P::f32_from_bits(t->cell[i][P::tmem_col(d) + uint32_t(j)]);
      CHECK(name, std::fabs(got - ref) <= 1e-4 * (1 + std::fabs(ref)), "D[%d][%d] = %g want %g", i, j, got, ref);
    }
  report(name, f0);
}

void test_sdesc() {
  const char* N = "tcgen05_smem_desc";
  int f0 = g_fail;
  uint64_t wg = 0;
  // same start/LBO/SBO fields; swizzle 2/4/6/0 -> wgmma layout 1/2/3/0 at bits 62-63
  struct {
    int W;
    uint64_t layout;
  } sw[] = {{128, 1}, {64, 2}, {32, 3}, {0, 0}};
  for (auto& s : sw) {
    uint64_t d = sdesc(0x1400, 16, 1024, s.W);
    std::string e = P::tcgen05_desc_as_wgmma(d, &wg);
    P::MatrixDesc md = P::decode_matrix_desc(wg);
    CHECK(N, e.empty() && md.start == 0x1400 && md.lbo == 16 && md.sbo == 1024 && uint64_t(md.layout) == s.layout,
          "W=%d: %s start %x lbo %u sbo %u layout %d", s.W, e.c_str(), md.start, md.lbo, md.sbo, md.layout);
  }
  struct {
    uint64_t d;
    const char* want;
  } bad[] = {
      {sdesc(0, 16, 1024, 128) & ~(1ull << 46), "0b001"},        {sdesc(0, 16, 1024, 128) | (1ull << 52), "absolute"},
      {(sdesc(0, 16, 1024, 0) | (1ull << 61)), "32-byte atoms"}, {(sdesc(0, 16, 1024, 0) | (3ull << 61)), "invalid"},
      {sdesc(0, 16, 1024, 128) | (1ull << 55), "53-60"},
  };
  for (auto& b : bad) {
    std::string e = P::tcgen05_desc_as_wgmma(b.d, &wg);
    CHECK(N, e.find(b.want) != std::string::npos, "descriptor %016llx: '%s' lacks '%s'", (unsigned long long)b.d,
          e.c_str(), b.want);
  }
  report(N, f0);
}

void test_alloc() {
  const char* N = "tcgen05_alloc";
  int f0 = g_fail;
  auto t = std::make_unique<P::Tmem>();
  uint32_t a = 0, b = 0, c = 0;
  CHECK(N, t->alloc(256, &a).empty() && a == 0, "first 256 at %x", a);
  CHECK(N, t->alloc(128, &b).empty() && P::tmem_col(b) == 256 && P::tmem_lane(b) == 0, "128 at %x", b);
  CHECK(N, t->alloc(256, &c).find("no free range") != std::string::npos, "over-allocation accepted");
  CHECK(N, t->allocated_columns() == 384 && t->columns_allocated(256, 128) && !t->columns_allocated(384, 32),
        "columns %d", t->allocated_columns());
  for (int n : {0, 16, 48, 1024})
    CHECK(N, t->alloc(n, &c).find("power of 2") != std::string::npos, "alloc(%d) accepted", n);
  CHECK(N, t->dealloc(b, 64).find("no allocation") != std::string::npos, "dealloc with the wrong count accepted");
  CHECK(N, t->dealloc(a + 32, 256).find("no allocation") != std::string::npos, "dealloc inside accepted");
  CHECK(N, t->dealloc(b, 128).empty() && t->dealloc(a, 256).empty() && t->allocated_columns() == 0, "free");
  CHECK(N, t->dealloc(a, 256).find("no allocation") != std::string::npos, "double dealloc accepted");
  t->relinquished = true;
  CHECK(N, t->alloc(32, &c).find("relinquish") != std::string::npos, "alloc after relinquish accepted");
  report(N, f0);
}

// D (128 x Nn) = sum over k-steps of A (128 x 16) * B (16 x Nn), A and B laid out per fa/fb.
void run_mma_case(const std::string& name, int Nn, bool bf16, bool a_mn, int aW, bool b_mn, int bW, bool neg) {
  int f0 = g_fail;
  TileFmt fa = make_fmt(a_mn, aW, 128), fb = make_fmt(b_mn, bW, Nn);
  const int BK = std::min(fa.BK, fb.BK), steps = BK / 16;
  uint32_t abase = 1024, bbase = abase + tile_bytes(fa), total = bbase + tile_bytes(fb) + 1024;
  std::vector<uint8_t> smem(total, 0xCD);
  std::vector<double> A(128 * BK), B(size_t(Nn) * BK);
  for (int m = 0; m < 128; ++m)
    for (int k = 0; k < fa.BK; ++k) {
      double v;
      uint16_t h = rand_half(bf16, &v);
      if (k < BK) A[m * BK + k] = v;
      std::memcpy(&smem[test_swz(abase + tile_off(fa, m, k), aW)], &h, 2);
    }
  for (int n = 0; n < Nn; ++n)
    for (int k = 0; k < fb.BK; ++k) {
      double v;
      uint16_t h = rand_half(bf16, &v);
      if (k < BK) B[size_t(n) * BK + k] = v;
      std::memcpy(&smem[test_swz(bbase + tile_off(fb, n, k), bW)], &h, 2);
    }
  auto t = std::make_unique<P::Tmem>();
  uint32_t pad = 0, d = 0;
  t->alloc(256, &pad);  // the accumulator does not start at column 0
  std::string e = t->alloc(256, &d);
  for (int s = 0; s < steps && e.empty(); ++s)
    e = P::tcgen05_mma_f16_ss(*t, d, sdesc(kstep_start(fa, abase, s), fa.lbo, fa.sbo, aW),
                              sdesc(kstep_start(fb, bbase, s), fb.lbo, fb.sbo, bW),
                              idesc(bf16, 128, Nn, a_mn, b_mn, neg, false), s > 0, smem.data(), total, nullptr);
  CHECK(name, e.empty(), "mma: %s", e.c_str());
  // read back with tcgen05.ld.32x32b: warp w (of a warpgroup) owns lanes 32*(w%4).., thread t its lane
  static uint32_t out[32][128];
  for (int w = 4; w < 8 && e.empty(); ++w)
    for (int c0 = 0; c0 < Nn; c0 += 16) {
      e = P::tcgen05_ld_32x32b(*t, w, P::tmem_addr(32 * (w % 4), P::tmem_col(d) + c0), 16, out);
      CHECK(name, e.empty(), "ld: %s", e.c_str());
      for (int th = 0; th < 32; ++th)
        for (int r = 0; r < 16; ++r) {
          const int i = 32 * (w % 4) + th, j = c0 + r;
          double ref = 0;
          for (int k = 0; k < BK; ++k) ref += A[i * BK + k] * B[size_t(j) * BK + k];
          if (neg) ref = -ref;
          float got = P::f32_from_bits(out[th][r]);
          CHECK(name, std::fabs(got - ref) <= 1e-3 * (1 + std::fabs(ref)), "D[%d][%d] = %g want %g", i, j, got, ref);
        }
    }
  for (int l = 0; l < 128; ++l)  // the padding allocation is untouched
    CHECK(name, t->cell[l][0] == P::kTmemPoison && t->cell[l][255] == P::kTmemPoison,
          "column outside D written (lane %d)", l);
  report(name, f0);
}

void test_mma_errors() {
  const char* N = "tcgen05_mma_errors";
  int f0 = g_fail;
  auto t = std::make_unique<P::Tmem>();
  std::vector<uint8_t> smem(64 * 1024, 0);
  uint32_t d = 0;
  t->alloc(128, &d);
  const uint64_t a = sdesc(1024, 16, 1024, 128), b = sdesc(1024 + 16384, 16, 1024, 128);
  struct {
    uint32_t addr, id;
    uint64_t a;
    const char* want;
  } bad[] = {
      {d, idesc(true, 128, 256), a, "not all allocated"},
      {P::tmem_addr(32, 0), idesc(true, 128, 128), a, "lanes 0-127"},
      {d, idesc(true, 64, 128), a, "M = 64"},
      {d, idesc(true, 128, 128), (a & ~(7ull << 61)) | (1ull << 61), "32-byte atoms"},
      {d, idesc(true, 128, 128), sdesc(60 * 1024, 16, 1024, 128), "outside the shared window"},
  };
  for (auto& x : bad) {
    std::string e = P::tcgen05_mma_f16_ss(*t, x.addr, x.a, b, x.id, true, smem.data(), uint32_t(smem.size()), nullptr);
    CHECK(N, e.find(x.want) != std::string::npos, "'%s' lacks '%s'", e.c_str(), x.want);
  }
  for (int l = 0; l < 128; ++l) CHECK(N, t->cell[l][0] == P::kTmemPoison, "a failing mma wrote lane %d", l);
  // a first MMA that accumulates reads the undefined contents of a fresh allocation
  std::string acc =
      P::tcgen05_mma_f16_ss(*t, d, a, b, idesc(true, 128, 128), true, smem.data(), uint32_t(smem.size()), nullptr);
  CHECK(N, acc.empty() && std::isnan(P::f32_from_bits(t->cell[7][5])), "accumulating into fresh columns: %s",
        acc.c_str());
  static uint32_t out[32][128];
  std::string e = P::tcgen05_ld_32x32b(*t, 5, P::tmem_addr(0, 0), 4, out);
  CHECK(N, e.find("may access lanes 32-63 only") != std::string::npos, "ld outside the warp's lanes: '%s'", e.c_str());
  e = P::tcgen05_ld_32x32b(*t, 1, P::tmem_addr(32, 120), 16, out);
  CHECK(N, e.find("not all allocated") != std::string::npos, "ld past the allocation: '%s'", e.c_str());
  e = P::tcgen05_ld_32x32b(*t, 1, P::tmem_addr(32, 0), 3, out);
  CHECK(N, e.find(".num") != std::string::npos, "ld .x3: '%s'", e.c_str());
  report(N, f0);
}

}  // namespace

void test_tcgen05() {
  test_idesc();
  test_sdesc();
  test_alloc();
  run_mma_case("tcgen05_mma_bf16_n256_kmajor_sw128", 256, true, false, 128, false, 128, false);
  run_mma_case("tcgen05_mma_f16_n128_kmajor_sw64", 128, false, false, 64, false, 64, false);
  run_mma_case("tcgen05_mma_bf16_n16_kmajor_sw32", 16, true, false, 32, false, 32, false);
  run_mma_case("tcgen05_mma_bf16_n128_a_mnmajor_b_kmajor_sw128", 128, true, true, 128, false, 128, false);
  run_mma_case("tcgen05_mma_f16_n64_mnmajor_none_neg_a", 64, false, true, 0, true, 0, true);
  test_mma_errors();
  test_idesc_f8();
  run_mma_f8_case("tcgen05_mma_f8f6f4_e4m3_n64_sw128", 64, 0, 0, 128);
  run_mma_f8_case("tcgen05_mma_f8f6f4_e5m2_n128_sw64", 128, 1, 1, 64);
  run_mma_f8_case("tcgen05_mma_f8f6f4_e4m3_e5m2_n16_sw32", 16, 0, 1, 32);
}
