// ptx_selftest_tcgen05_mx.cpp -- the block-scaled tcgen05 checks of the PTX selftest (ptx_selftest.cpp has the
// harness): src/heddle/interp/rt/hrt_ptx_tcgen05_mx.h against the PTX ISA (tables 43 / 44, 9.7.16.10.7, 9.7.16.9.2).
// The descriptors are encoded here from the ISA's tables, the scales laid out in the cuBLAS / torch "blocked"
// layout (torch.testing._internal.common_quantized.to_blocked, re-derived here: byte r0*16 + r1*4 + c of a
// 512-byte chunk holds row r1*32 + r0, k-block c), results compared with a double-precision block-scaled GEMM.
#include "heddle/interp/rt/hrt_ptx_tcgen05_mx.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ptx_selftest.h"

namespace {

// Table 43 (kind::mxf8f6f4): SFB id 4-5, A/B type 7-9 / 10-12, N>>3 17-22, UE8M0 1 at 23, M>>7 27-28, SFA id 29-30.
uint32_t idesc_mx(int fa, int fb, int M, int N, int sfa, int sfb) {
  return (uint32_t(sfb) << 4) | (uint32_t(fa) << 7) | (uint32_t(fb) << 10) | (uint32_t(N >> 3) << 17) | (1u << 23) |
         (uint32_t(M >> 7) << 27) | (uint32_t(sfa) << 29);
}

// Table 40 without swizzle: start, LBO, SBO (>> 4), the constant 0b001 at 46-48.
uint64_t sdesc_none(uint32_t start, uint32_t lbo, uint32_t sbo) {
  return uint64_t((start & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 46);
}
uint64_t sdesc_sw128(uint32_t start, uint32_t sbo) { return sdesc_none(start, 16, sbo) | (2ull << 61); }

// D (128 x Nn, f32 in tensor memory at d) against the float64 block-scaled GEMM: A [128, BK], B [Nn, BK], one scale
// per V elements of K (SA [128, BK/V], SB [Nn, BK/V]); tolerance relative to the sum of |products|.
void check_scaled(const std::string& name, const P::Tmem& t, uint32_t d, int Nn, int BK, int V,
                  const std::vector<double>& A, const std::vector<double>& B, const std::vector<double>& SA,
                  const std::vector<double>& SB) {
  const int nb = BK / V;
  for (int i = 0; i < 128; i += 3)
    for (int j = 0; j < Nn; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < BK; ++k) {
        const double p =
            A[size_t(i) * BK + k] * SA[size_t(i) * nb + k / V] * B[size_t(j) * BK + k] * SB[size_t(j) * nb + k / V];
        ref += p;
        mag += std::fabs(p);
      }
      const float got = P::f32_from_bits(t.cell[i][P::tmem_col(d) + uint32_t(j)]);
      CHECK(name, std::fabs(got - ref) <= 1e-5 * (1 + mag), "D[%d][%d] = %g want %g", i, j, got, ref);
    }
}

void test_idesc_mx() {
  const char* N = "tcgen05_idesc_mxf8f6f4";
  int f0 = g_fail;
  P::InstrDescMx d;
  const uint32_t v = idesc_mx(0, 1, 128, 256, 3, 2);
  CHECK(N, v == ((2u << 4) | (1u << 10) | (32u << 17) | (1u << 23) | (1u << 27) | (3u << 29)), "encoding %08x", v);
  std::string e = P::decode_idesc_mx(v, &d);
  CHECK(N, e.empty() && d.fmtA == 0 && d.fmtB == 1 && d.M == 128 && d.N == 256 && d.sfaId == 3 && d.sfbId == 2,
        "decode: %s M=%d N=%d ids %d %d", e.c_str(), d.M, d.N, d.sfaId, d.sfbId);
  struct {
    uint32_t v;
    const char* want;
  } bad[] = {
      {idesc_mx(0, 0, 128, 128, 0, 0) & ~(1u << 23), "UE8M0"},
      {idesc_mx(0, 0, 128, 128, 0, 0) | (1u << 24), "reserved"},
      {idesc_mx(0, 0, 128, 128, 0, 0) | (1u << 4 >> 4), "reserved"},
      {idesc_mx(0, 0, 128, 128, 0, 0) | (1u << 2), "sparsity"},
      {idesc_mx(5, 0, 128, 128, 0, 0), "not modelled"},
      {idesc_mx(0, 2, 128, 128, 0, 0), "not an mxf8f6f4 format"},
      {idesc_mx(0, 0, 128, 128, 0, 0) | (1u << 15), "K-major only"},
      {idesc_mx(0, 0, 256, 128, 0, 0), "M = 256"},
      {idesc_mx(0, 0, 128, 264, 0, 0), "N = 264"},
  };
  for (auto& b : bad) {
    e = P::decode_idesc_mx(b.v, &d);
    CHECK(N, e.find(b.want) != std::string::npos, "descriptor %08x: '%s' lacks '%s'", b.v, e.c_str(), b.want);
  }
  report(N, f0);
}

// One 512-byte blocked chunk at `base`: 32 rows of 16 bytes (SBO 128 between 8-row core matrices).
void test_cp() {
  const char* N = "tcgen05_cp_32x128b_warpx4";
  int f0 = g_fail;
  std::vector<uint8_t> smem(4096, 0);
  const uint32_t base = 1024;
  for (int i = 0; i < 512; ++i) smem[base + uint32_t(i)] = uint8_t(i * 7 + 3);
  auto t = std::make_unique<P::Tmem>();
  uint32_t d = 0;
  std::string e = t->alloc(128, &d);
  RecAccess acc;
  e = P::tcgen05_cp_32x128b_warpx4(*t, P::tmem_addr(0, 64), sdesc_none(base, 0, 128), smem.data(), 4096, &acc);
  CHECK(N, e.empty(), "cp: %s", e.c_str());
  for (int q = 0; q < 4; ++q)
    for (int r = 0; r < 32; ++r)
      for (int w = 0; w < 4; ++w) {
        uint32_t want = 0;
        for (int b = 0; b < 4; ++b) want |= uint32_t(smem[base + uint32_t(r * 16 + w * 4 + b)]) << (8 * b);
        CHECK(N, t->cell[32 * q + r][64 + w] == want, "lane %d col %d: %08x want %08x", 32 * q + r, 64 + w,
              t->cell[32 * q + r][64 + w], want);
      }
  size_t total = 0;
  auto rd = RecAccess::bytes_of(acc.rd, &total);
  CHECK(N, rd.size() == 512 && *rd.begin() == base && *rd.rbegin() == base + 511, "read %zu bytes", rd.size());
  struct {
    std::string e;
    const char* want;
  } bad[] = {
      {P::tcgen05_cp_32x128b_warpx4(*t, P::tmem_addr(32, 64), sdesc_none(base, 0, 128), smem.data(), 4096, nullptr),
       "lane 32"},
      {P::tcgen05_cp_32x128b_warpx4(*t, P::tmem_addr(0, 126), sdesc_none(base, 0, 128), smem.data(), 4096, nullptr),
       "not all allocated"},
      {P::tcgen05_cp_32x128b_warpx4(*t, P::tmem_addr(0, 64), sdesc_sw128(base, 1024), smem.data(), 4096, nullptr),
       "swizzled"},
      {P::tcgen05_cp_32x128b_warpx4(*t, P::tmem_addr(0, 64), sdesc_none(3840, 0, 128), smem.data(), 4096, nullptr),
       "outside"},
  };
  for (auto& b : bad) CHECK(N, b.e.find(b.want) != std::string::npos, "'%s' lacks '%s'", b.e.c_str(), b.want);
  report(N, f0);
}

// D (128 x Nn) = sum over 4 k-blocks of 32 of (A * sA) (B * sB): operands K-major in 128-byte swizzled rows (BK =
// 128), scales in blocked chunks copied by tcgen05.cp, MMA s with scale ids s.
void run_mx_case(const std::string& name, int Nn, int fa, int fb) {
  int f0 = g_fail;
  const int W = 128, BK = 128;
  const P::MiniFloat* fmt[2] = {&P::kE4M3, &P::kE5M2};
  auto off = [&](int mn, int k) { return uint32_t((mn / 8) * 8 * W + (mn % 8) * W + k); };
  const uint32_t abase = 1024, bbase = abase + 128 * W, sfa = bbase + uint32_t(Nn) * W, sfb = sfa + 512;
  const uint32_t total = sfb + 512 * uint32_t(Nn / 128 > 0 ? (Nn + 127) / 128 : 1) + 1024;
  std::vector<uint8_t> smem(total, 0xCD);
  std::vector<double> A(128 * BK), B(size_t(Nn) * BK), SA(128 * 4), SB(size_t(Nn) * 4);
  auto fill = [&](std::vector<double>& X, int rows, int f, uint32_t base) {
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < BK; ++k) {
        const uint32_t code = P::minifloat_encode_satfinite(*fmt[f], 6.0 * urand() - 3.0);
        X[size_t(r) * BK + k] = P::minifloat_decode(*fmt[f], code);
        smem[test_swz(base + off(r, k), W)] = uint8_t(code);
      }
  };
  // blocked chunk q of rows q*128 .. q*128+127: row r1*32 + r0, k-block c at byte r0*16 + r1*4 + c
  auto scales = [&](std::vector<double>& S, int rows, uint32_t base) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < 4; ++c) {
        const uint32_t code = 120 + rnd() % 15;  // 2^-7 .. 2^7
        S[size_t(r) * 4 + c] = std::ldexp(1.0, int(code) - 127);
        const int q = r / 128, r1 = r % 128 / 32, r0 = r % 32;
        smem[base + uint32_t(q * 512 + r0 * 16 + r1 * 4 + c)] = uint8_t(code);
      }
  };
  fill(A, 128, fa, abase);
  fill(B, Nn, fb, bbase);
  scales(SA, 128, sfa);
  scales(SB, Nn, sfb);
  auto t = std::make_unique<P::Tmem>();
  uint32_t d = 0;
  std::string e = t->alloc(512, &d);
  const uint32_t tsa = P::tmem_addr(0, 256), tsb = P::tmem_addr(0, 260);
  if (e.empty()) e = P::tcgen05_cp_32x128b_warpx4(*t, tsa, sdesc_none(sfa, 0, 128), smem.data(), total, nullptr);
  for (int q = 0; q < (Nn + 127) / 128 && e.empty(); ++q)
    e = P::tcgen05_cp_32x128b_warpx4(*t, tsb + 4u * uint32_t(q), sdesc_none(sfb + 512u * uint32_t(q), 0, 128),
                                     smem.data(), total, nullptr);
  for (int s = 0; s < 4 && e.empty(); ++s)
    e = P::tcgen05_mma_mx_ss(*t, d, sdesc_sw128(abase + 32 * s, 8 * W), sdesc_sw128(bbase + 32 * s, 8 * W),
                             idesc_mx(fa, fb, 128, Nn, s, s), tsa, tsb, s > 0, smem.data(), total, nullptr);
  CHECK(name, e.empty(), "mma: %s", e.c_str());
  if (e.empty()) check_scaled(name, *t, d, Nn, BK, 32, A, B, SA, SB);
  report(name, f0);
}

// The scales must be duplicated to all four lane quarters; scale columns and lanes are checked.
void test_mx_errors() {
  const char* N = "tcgen05_mma_mxf8f6f4_errors";
  int f0 = g_fail;
  const uint32_t abase = 1024, bbase = abase + 128 * 128, total = bbase + 128 * 128 + 1024;
  std::vector<uint8_t> smem(total, 0x38);
  auto t = std::make_unique<P::Tmem>();
  uint32_t d = 0;
  t->alloc(256, &d);
  for (auto& lane : t->cell)
    for (int c = 128; c < 136; ++c) lane[c] = 0x7F7F7F7Fu;  // scale 1.0 everywhere
  const uint64_t a = sdesc_sw128(abase, 1024), b = sdesc_sw128(bbase, 1024);
  const uint32_t id = idesc_mx(0, 0, 128, 128, 1, 2);
  std::string e = P::tcgen05_mma_mx_ss(*t, d, a, b, id, P::tmem_addr(0, 128), P::tmem_addr(0, 132), false, smem.data(),
                                       total, nullptr);
  CHECK(N, e.empty(), "clean call: %s", e.c_str());
  t->cell[70][129] ^= 0x0000FF00u;  // row 32*1 + 6 of A, byte 1 (SFA id 1), quarter 2 only
  e = P::tcgen05_mma_mx_ss(*t, d, a, b, id, P::tmem_addr(0, 128), P::tmem_addr(0, 132), false, smem.data(), total,
                           nullptr);
  CHECK(N,
        e.find("scale A of row 38 differs between lane quarters 0 and 2") != std::string::npos &&
            e.find("duplicated") != std::string::npos,
        "'%s'", e.c_str());
  e = P::tcgen05_mma_mx_ss(*t, d, a, b, id, P::tmem_addr(0, 128), P::tmem_addr(32, 132), false, smem.data(), total,
                           nullptr);
  CHECK(N, e.find("scale B address") != std::string::npos, "'%s'", e.c_str());
  e = P::tcgen05_mma_mx_ss(*t, d, a, b, id, P::tmem_addr(0, 128), P::tmem_addr(0, 254), false, smem.data(), total,
                           nullptr);
  CHECK(N, e.find("not all allocated") != std::string::npos, "'%s'", e.c_str());
  report(N, f0);
}

// Table 44 (kind::mxf4nvf4): E2M1 (1) at 7-9 and 10-11, N>>3 17-22, UE4M3 = 0 at 23, M>>7 27-28, SF ids 0 (4X).
uint32_t idesc_nvf4(int M, int N) {
  return (1u << 7) | (1u << 10) | (uint32_t(N >> 3) << 17) | (uint32_t(M >> 7) << 27);
}

void test_idesc_nvf4() {
  const char* N = "tcgen05_idesc_mxf4nvf4";
  int f0 = g_fail;
  P::InstrDescNvf4 d;
  const uint32_t v = idesc_nvf4(128, 128);
  CHECK(N, v == ((1u << 7) | (1u << 10) | (16u << 17) | (1u << 27)), "encoding %08x", v);
  std::string e = P::decode_idesc_nvf4(v, &d);
  CHECK(N, e.empty() && d.M == 128 && d.N == 128, "decode: %s", e.c_str());
  struct {
    uint32_t v;
    const char* want;
  } bad[] = {
      {idesc_nvf4(128, 128) | (1u << 23), "MXFP4"},
      {idesc_nvf4(128, 128) | (1u << 31), "K = 96"},
      {idesc_nvf4(128, 128) | (1u << 12), "reserved"},
      {idesc_nvf4(128, 128) & ~(1u << 7), "E2M1"},
      {idesc_nvf4(128, 128) | (2u << 29), "scale factor IDs"},
      {idesc_nvf4(128, 128) | (1u << 16), "transpose"},
      {idesc_nvf4(256, 128), "M = 256"},
  };
  for (auto& b : bad) {
    e = P::decode_idesc_nvf4(b.v, &d);
    CHECK(N, e.find(b.want) != std::string::npos, "descriptor %08x: '%s' lacks '%s'", b.v, e.c_str(), b.want);
  }
  report(N, f0);
}

uint64_t sdesc_sw64(uint32_t start, uint32_t sbo) { return sdesc_none(start, 16, sbo) | (4ull << 61); }

// rows x 128 random e2m1 codes packed K-major into 64-byte swizzled rows at base (two a byte, even k in the low
// nibble), their values in X [rows][128]: the fp4 kinds' operand (NVFP4, MXFP4).
void fill_e2m1(std::vector<uint8_t>& smem, std::vector<double>& X, int rows, uint32_t base) {
  const int W = 64, BK = 128;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < BK; ++k) {
      const uint32_t code = rnd() % 16;
      X[size_t(r) * BK + k] = P::minifloat_decode(P::kE2M1, code);
      const uint32_t off = uint32_t((r / 8) * 8 * W + (r % 8) * W + k / 2);
      smem[test_swz(base + off, W)] |= uint8_t(code << (4 * (k % 2)));
    }
}

// NVFP4: D (128 x Nn) = sum over 8 k-blocks of 16 of (A * sA) (B * sB), packed e2m1 K-major operands in 64-byte
// swizzled rows (BK = 128 elements = 64 bytes), ue4m3 scales in blocked chunks (one per instruction) copied by
// tcgen05.cp, instruction c reading chunk c's columns.
void run_nvf4_case(const std::string& name, int Nn) {
  int f0 = g_fail;
  const int W = 64, BK = 128;
  const uint32_t abase = 1024, bbase = abase + 128 * W, sfa = bbase + uint32_t(Nn) * W, sfb = sfa + 1024;
  const uint32_t total = sfb + 1024 + 1024;
  std::vector<uint8_t> smem(total, 0);
  std::vector<double> A(128 * BK), B(size_t(Nn) * BK), SA(128 * 8), SB(size_t(Nn) * 8);
  auto fill = [&](std::vector<double>& X, int rows, uint32_t base) { fill_e2m1(smem, X, rows, base); };
  // ue4m3 codes 0x28 .. 0x47 (2^-2 .. 1.875 * 2^1); chunk c holds k-blocks 4c .. 4c+3
  auto scales = [&](std::vector<double>& S, int rows, uint32_t base) {
    for (int r = 0; r < rows; ++r)
      for (int kb = 0; kb < 8; ++kb) {
        const uint32_t code = 0x28 + rnd() % 32;
        S[size_t(r) * 8 + kb] = P::minifloat_decode(P::kE4M3, code);
        smem[base + uint32_t((kb / 4) * 512 + (r % 32) * 16 + (r / 32) * 4 + kb % 4)] = uint8_t(code);
      }
  };
  fill(A, 128, abase);
  fill(B, Nn, bbase);
  scales(SA, 128, sfa);
  scales(SB, Nn, sfb);
  auto t = std::make_unique<P::Tmem>();
  uint32_t d = 0;
  std::string e = t->alloc(256, &d);
  const uint32_t tsa = P::tmem_addr(0, 128), tsb = P::tmem_addr(0, 136);
  for (int c = 0; c < 2 && e.empty(); ++c) {
    e = P::tcgen05_cp_32x128b_warpx4(*t, tsa + 4u * uint32_t(c), sdesc_none(sfa + 512u * uint32_t(c), 0, 128),
                                     smem.data(), total, nullptr);
    if (e.empty())
      e = P::tcgen05_cp_32x128b_warpx4(*t, tsb + 4u * uint32_t(c), sdesc_none(sfb + 512u * uint32_t(c), 0, 128),
                                       smem.data(), total, nullptr);
  }
  for (int c = 0; c < 2 && e.empty(); ++c)
    e = P::tcgen05_mma_nvf4_ss(*t, d, sdesc_sw64(abase + 32 * c, 8 * W), sdesc_sw64(bbase + 32 * c, 8 * W),
                               idesc_nvf4(128, Nn), tsa + 4u * uint32_t(c), tsb + 4u * uint32_t(c), c > 0, smem.data(),
                               total, nullptr);
  CHECK(name, e.empty(), "mma: %s", e.c_str());
  if (e.empty()) check_scaled(name, *t, d, Nn, BK, 16, A, B, SA, SB);
  // a signed scale byte is refused
  t->cell[5][128] |= 0x80u;
  for (int q = 1; q < 4; ++q) t->cell[32 * q + 5][128] |= 0x80u;
  e = P::tcgen05_mma_nvf4_ss(*t, d, sdesc_sw64(abase, 8 * W), sdesc_sw64(bbase, 8 * W), idesc_nvf4(128, Nn), tsa, tsb,
                             false, smem.data(), total, nullptr);
  CHECK(name, e.find("unsigned") != std::string::npos, "signed ue4m3 scale: '%s'", e.c_str());
  report(name, f0);
}

// Table 44 (kind::mxf4): E2M1 (1) at 7-9 and 10-11, N>>3 17-22, UE8M0 = 1 at 23, M>>7 27-28; instruction c of a k
// tile selects the half word 2c (scale factor IDs at 4-5 and 29-30, scale_vec::2X: PTX ISA 9.7.16.10.7.2.2).
uint32_t idesc_mxf4(int M, int N, uint32_t id) { return idesc_nvf4(M, N) | (1u << 23) | (id << 4) | (id << 29); }

void test_idesc_mxf4() {
  const char* N = "tcgen05_idesc_mxf4";
  int f0 = g_fail;
  P::InstrDescNvf4 d;
  std::string e = P::decode_idesc_fp4(idesc_mxf4(128, 256, 2), &d, 2);
  CHECK(N, e.empty() && d.M == 128 && d.N == 256 && d.sfaId == 2 && d.sfbId == 2, "decode: %s", e.c_str());
  struct {
    uint32_t v;
    const char* want;
  } bad[] = {
      {idesc_mxf4(128, 128, 0) & ~(1u << 23), "must be UE8M0"},
      {idesc_mxf4(128, 128, 1), "half word offset, 0 or 2"},
      {idesc_mxf4(128, 128, 0) | (3u << 29), "half word offset, 0 or 2"},
      {idesc_mxf4(128, 128, 0) | (1u << 31), "K = 96"},
      {idesc_mxf4(128, 128, 0) & ~(1u << 10), "E2M1"},
  };
  for (auto& b : bad) {
    e = P::decode_idesc_fp4(b.v, &d, 2);
    CHECK(N, e.find(b.want) != std::string::npos, "descriptor %08x: '%s' lacks '%s'", b.v, e.c_str(), b.want);
  }
  report(N, f0);
}

// MXFP4: D (128 x Nn) = sum over 4 k-blocks of 32 of (A * sA) (B * sB), packed e2m1 operands as the NVFP4 case's,
// ue8m0 scales in one blocked chunk (the k tile's four blocks) copied once by tcgen05.cp; instruction c reads the
// half word 2c (blocks 2c, 2c+1). With both IDs 0 the second instruction takes the first's scales: wrong numbers.
void run_mxf4_case(const std::string& name, int Nn, bool wrong_ids) {
  int f0 = g_fail;
  const int W = 64, BK = 128;
  const uint32_t abase = 1024, bbase = abase + 128 * W, sfa = bbase + uint32_t(Nn) * W, sfb = sfa + 512;
  const uint32_t total = sfb + 1024;
  std::vector<uint8_t> smem(total, 0);
  std::vector<double> A(128 * BK), B(size_t(Nn) * BK), SA(128 * 4), SB(size_t(Nn) * 4);
  auto fill = [&](std::vector<double>& X, int rows, uint32_t base) { fill_e2m1(smem, X, rows, base); };
  auto scales = [&](std::vector<double>& S, int rows, uint32_t base) {  // ue8m0 codes 120 .. 134: 2^-7 .. 2^7
    for (int r = 0; r < rows; ++r)
      for (int kb = 0; kb < 4; ++kb) {
        const uint32_t code = 120 + rnd() % 15;
        S[size_t(r) * 4 + kb] = std::ldexp(1.0, int(code) - 127);
        smem[base + uint32_t((r / 128) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + kb)] = uint8_t(code);
      }
  };
  fill(A, 128, abase);
  fill(B, Nn, bbase);
  scales(SA, 128, sfa);
  scales(SB, Nn, sfb);
  auto t = std::make_unique<P::Tmem>();
  uint32_t d = 0;
  std::string e = t->alloc(512, &d);
  const uint32_t tsa = P::tmem_addr(0, 256), tsb = P::tmem_addr(0, 260);
  if (e.empty()) e = P::tcgen05_cp_32x128b_warpx4(*t, tsa, sdesc_none(sfa, 0, 128), smem.data(), total, nullptr);
  for (int q = 0; q < Nn / 128 && e.empty(); ++q)
    e = P::tcgen05_cp_32x128b_warpx4(*t, tsb + 4u * uint32_t(q), sdesc_none(sfb + 512u * uint32_t(q), 0, 128),
                                     smem.data(), total, nullptr);
  for (int c = 0; c < 2 && e.empty(); ++c)
    e = P::tcgen05_mma_fp4_ss(*t, d, sdesc_sw64(abase + 32 * c, 8 * W), sdesc_sw64(bbase + 32 * c, 8 * W),
                              idesc_mxf4(128, Nn, wrong_ids ? 0u : 2u * uint32_t(c)), tsa, tsb, c > 0, smem.data(),
                              total, nullptr, 2);
  CHECK(name, e.empty(), "mma: %s", e.c_str());
  if (e.empty() && !wrong_ids) check_scaled(name, *t, d, Nn, BK, 32, A, B, SA, SB);
  if (e.empty() && wrong_ids) {  // the second half of K scaled by blocks 0, 1: some entry far off
    double worst = 0;
    for (int i = 0; i < 128; i += 7)
      for (int j = 0; j < Nn; j += 5) {
        double ref = 0;
        for (int k = 0; k < BK; ++k)
          ref +=
              A[size_t(i) * BK + k] * SA[size_t(i) * 4 + k / 32] * B[size_t(j) * BK + k] * SB[size_t(j) * 4 + k / 32];
        worst = std::max(worst, std::fabs(double(P::f32_from_bits(t->cell[i][P::tmem_col(d) + uint32_t(j)])) - ref) /
                                    (std::fabs(ref) + 1.0));
      }
    CHECK(name, worst > 0.1, "scale factor IDs 0 for both instructions went unnoticed (worst %g)", worst);
  }
  report(name, f0);
}

}  // namespace

void test_tcgen05_mx() {
  test_idesc_mx();
  test_cp();
  run_mx_case("tcgen05_mma_mxf8f6f4_e4m3_n128", 128, 0, 0);
  run_mx_case("tcgen05_mma_mxf8f6f4_e5m2_e4m3_n256", 256, 1, 0);
  test_mx_errors();
  test_idesc_nvf4();
  run_nvf4_case("tcgen05_mma_mxf4nvf4_n128", 128);
  run_nvf4_case("tcgen05_mma_mxf4nvf4_n64", 64);
  test_idesc_mxf4();
  run_mxf4_case("tcgen05_mma_mxf4_n128", 128, false);
  run_mxf4_case("tcgen05_mma_mxf4_n256", 256, false);
  run_mxf4_case("tcgen05_mma_mxf4_ids_both_0", 128, true);
}
