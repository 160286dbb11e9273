// ptx_selftest_wgmma.cpp -- the wgmma checks of the PTX selftest (ptx_selftest.cpp has the harness):
// the D fragment figure, the canonical swizzled layouts written from the ISA's table, the ISA's worked
// examples, and descriptor errors.
#include "ptx_selftest.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

// ---- wgmma ---------------------------------------------------------------------------------------
// The ISA's D fragment figure (149), transcribed for a few threads: (thread, i) -> (row, col).
static void test_wgmma_d_table() {
  const char* N = "wgmma_d_layout";
  int f0 = g_fail;
  struct {
    int N, t, i, row, col;
  } lit[] = {
      {64, 0, 0, 0, 0},      {64, 0, 1, 0, 1},        {64, 0, 2, 8, 0},       {64, 0, 3, 8, 1},
      {64, 0, 4, 0, 8},      {64, 0, 5, 0, 9},        {64, 0, 6, 8, 8},       {64, 0, 7, 8, 9},
      {64, 1, 0, 0, 2},      {64, 1, 3, 8, 3},        {64, 4, 0, 1, 0},       {64, 4, 2, 9, 0},
      {64, 5, 1, 1, 3},      {64, 31, 0, 7, 6},       {64, 31, 3, 15, 7},     {64, 31, 31, 15, 63},
      {64, 37, 0, 17, 2},    {64, 37, 2, 25, 2},      {64, 37, 4, 17, 10},    {64, 64, 0, 32, 0},
      {128, 127, 0, 55, 6},  {128, 127, 3, 63, 7},    {128, 96, 62, 56, 120}, {256, 127, 127, 63, 255},
      {256, 0, 124, 0, 248}, {256, 33, 126, 24, 250},
  };
  for (auto& t : lit) {
    int r, c;
    P::wgmma_d_pos(t.N, t.t, t.i, &r, &c);
    CHECK(N, r == t.row && c == t.col, "N=%d thread %d d%d = (%d,%d) want (%d,%d)", t.N, t.t, t.i, r, c, t.row, t.col);
  }
  for (int n : {8, 64, 128, 256}) {
    std::vector<int> cnt(64 * n, 0);
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < n / 2; ++i) {
        int r, c;
        P::wgmma_d_pos(n, t, i, &r, &c);
        if (r >= 0 && r < 64 && c >= 0 && c < n) cnt[r * n + c]++;
      }
    for (int e = 0; e < 64 * n; ++e) CHECK(N, cnt[e] == 1, "N=%d element %d covered %d times", n, e, cnt[e]);
  }
  report(N, f0);
}

static uint64_t make_desc(uint32_t start, uint32_t lbo, uint32_t sbo, int W) {
  uint64_t lt = W == 128 ? 1 : W == 64 ? 2 : W == 32 ? 3 : 0;
  return uint64_t((start & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (lt << 62);
}

struct Operands {
  std::vector<uint8_t> smem;
  std::vector<double> A, B;  // A[m*BK+k], B[n*BK+k] (values)
};

static void run_wgmma_case(const std::string& name, int Nn, bool bf16, bool a_mn, int aW, bool b_mn, int bW) {
  int f0 = g_fail;
  TileFmt fa = make_fmt(a_mn, aW, 64), fb = make_fmt(b_mn, bW, Nn);
  int BK = std::min(fa.BK, fb.BK);
  uint32_t abase = 1024, bbase = abase + tile_bytes(fa);
  uint32_t total = bbase + tile_bytes(fb) + 1024;
  std::vector<uint8_t> smem(total, 0xCD);
  std::vector<double> A(64 * BK), B(size_t(Nn) * BK);
  std::set<uint32_t> a_bytes[8], b_bytes[8];
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < fa.BK; ++k) {
      double v;
      uint16_t h = rand_half(bf16, &v);
      if (k < BK) A[m * BK + k] = v;
      uint32_t p = test_swz(abase + tile_off(fa, m, k), aW);
      std::memcpy(&smem[p], &h, 2);
      if (k < BK) {
        a_bytes[k / 16].insert(p);
        a_bytes[k / 16].insert(p + 1);
      }
    }
  for (int n = 0; n < Nn; ++n)
    for (int k = 0; k < fb.BK; ++k) {
      double v;
      uint16_t h = rand_half(bf16, &v);
      if (k < BK) B[size_t(n) * BK + k] = v;
      uint32_t p = test_swz(bbase + tile_off(fb, n, k), bW);
      std::memcpy(&smem[p], &h, 2);
      if (k < BK) {
        b_bytes[k / 16].insert(p);
        b_bytes[k / 16].insert(p + 1);
      }
    }
  std::vector<float> dstore(128 * 128);
  float* dptr[128];
  for (int t = 0; t < 128; ++t) dptr[t] = &dstore[size_t(t) * 128];
  std::vector<double> D(64 * size_t(Nn), 0.0);
  for (int t = 0; t < 128; ++t)  // initial accumulators (scale-d = 1 on the first step uses them)
    for (int i = 0; i < Nn / 2; ++i) {
      // D layout from the ISA figure: row = 16*warp + lane/4 + 8*((i/2)%2), col = 8*(i/4) + 2*(lane%4) + i%2
      int w = t / 32, l = t % 32, r = 16 * w + l / 4 + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * (l % 4) + i % 2;
      dptr[t][i] = float((urand() - 0.5) * 4.0);
      D[size_t(r) * Nn + c] = dptr[t][i];
    }
  std::vector<double> mag(64 * size_t(Nn), 0.0);
  for (int s = 0; s < BK / 16; ++s) {
    int scale_d = (s == 0) ? int(rnd() & 1) : 1;
    if (scale_d == 0) {
      std::fill(D.begin(), D.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
    }
    uint64_t da = make_desc(kstep_start(fa, abase, s), fa.lbo, fa.sbo, aW);
    uint64_t db = make_desc(kstep_start(fb, bbase, s), fb.lbo, fb.sbo, bW);
    RecAccess ra;
    std::string err = P::wgmma_m64nNk16_ss(Nn, bf16, da, db, scale_d, a_mn, b_mn, smem.data(), total, dptr, &ra);
    CHECK(name.c_str(), err.empty(), "step %d: unexpected error: %s", s, err.c_str());
    if (!err.empty()) break;
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < Nn; ++n)
        for (int k = 16 * s; k < 16 * s + 16; ++k) {
          D[size_t(m) * Nn + n] += A[m * BK + k] * B[size_t(n) * BK + k];
          mag[size_t(m) * Nn + n] += std::fabs(A[m * BK + k] * B[size_t(n) * BK + k]);
        }
    size_t tot;
    auto got = RecAccess::bytes_of(ra.rd, &tot);
    std::set<uint32_t> want = a_bytes[s];
    want.insert(b_bytes[s].begin(), b_bytes[s].end());
    CHECK(name.c_str(), got == want && tot == want.size() && ra.wr.empty(),
          "step %d: reported reads (%zu bytes) differ from the operand bytes (%zu)", s, tot, want.size());
  }
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < Nn / 2; ++i) {
      int w = t / 32, l = t % 32, r = 16 * w + l / 4 + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * (l % 4) + i % 2;
      double ref = D[size_t(r) * Nn + c];
      double tol = 2e-6 * (mag[size_t(r) * Nn + c] + std::fabs(ref) + 2.0);
      CHECK(name.c_str(), std::fabs(dptr[t][i] - ref) <= tol, "thread %d d%d (row %d col %d) = %.9g want %.9g", t, i, r,
            c, dptr[t][i], ref);
    }
  report(name, f0);
}

// A tiny evaluator for the ISA's worked examples, written as CuTe-style (shape):(stride) with two
// hierarchical modes (MN and K), each a list of (size, stride) pairs, colexicographic.
struct Mode {
  int n;
  const int (*ss)[2];
};
static int eval_mode(const Mode& md, int x) {
  int off = 0;
  for (int i = 0; i < md.n; ++i) {
    off += (x % md.ss[i][0]) * md.ss[i][1];
    x /= md.ss[i][0];
  }
  return off;
}
// ISA examples (9.7.15.5.1.2.1.3), bf16, used as the B operand (N = MN extent) with A K-major 128B:
//   MN-major, no swizzle : Swizzle<0,4,3> o ((8,1,2),(8,2)):((1,8,64),(8,128)),  LBO 128*2, SBO 64*2
//   MN-major, 32B        : Swizzle<1,4,3> o ((8,2,2),(8,2)):((1,8,128),(16,256)), LBO 128*2, SBO 256*2
//   MN-major, 64B        : Swizzle<2,4,3> o ((8,4,2),(8,2)):((1,8,256),(32,512)), LBO 256*2, SBO 512*2
static void run_isa_example(const std::string& name, int W, Mode mn, Mode kk, int Nn, uint32_t lbo, uint32_t sbo) {
  int f0 = g_fail;
  const bool bf16 = true;
  TileFmt fa = make_fmt(false, 128, 64);
  uint32_t abase = 1024, bbase = abase + tile_bytes(fa);
  uint32_t total = bbase + 8192;
  std::vector<uint8_t> smem(total, 0);
  std::vector<double> A(64 * 16), B(size_t(Nn) * 16);
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) {
      uint16_t h = rand_half(bf16, &A[m * 16 + k]);
      std::memcpy(&smem[test_swz(abase + tile_off(fa, m, k), 128)], &h, 2);
    }
  std::set<uint32_t> seen;
  for (int n = 0; n < Nn; ++n)
    for (int k = 0; k < 16; ++k) {
      uint16_t h = rand_half(bf16, &B[size_t(n) * 16 + k]);
      uint32_t p = test_swz(bbase + 2u * uint32_t(eval_mode(mn, n) + eval_mode(kk, k)), W);
      CHECK(name.c_str(), seen.insert(p).second, "example layout not injective at (%d,%d)", n, k);
      std::memcpy(&smem[p], &h, 2);
    }
  std::vector<float> dstore(128 * 128, 0.0f);
  float* dptr[128];
  for (int t = 0; t < 128; ++t) dptr[t] = &dstore[size_t(t) * 128];
  std::string err = P::wgmma_m64nNk16_ss(Nn, bf16, make_desc(abase, fa.lbo, fa.sbo, 128), make_desc(bbase, lbo, sbo, W),
                                         0, 0, 1, smem.data(), total, dptr, nullptr);
  CHECK(name.c_str(), err.empty(), "unexpected error: %s", err.c_str());
  for (int t = 0; t < 128 && err.empty(); ++t)
    for (int i = 0; i < Nn / 2; ++i) {
      int w = t / 32, l = t % 32, r = 16 * w + l / 4 + 8 * ((i / 2) % 2), c = 8 * (i / 4) + 2 * (l % 4) + i % 2;
      double ref = 0, mag = 0;
      for (int k = 0; k < 16; ++k) {
        ref += A[r * 16 + k] * B[size_t(c) * 16 + k];
        mag += std::fabs(A[r * 16 + k] * B[size_t(c) * 16 + k]);
      }
      CHECK(name.c_str(), std::fabs(dptr[t][i] - ref) <= 2e-6 * (mag + 1.0), "thread %d d%d = %.9g want %.9g", t, i,
            dptr[t][i], ref);
    }
  report(name, f0);
}

static void test_wgmma_errors() {
  const char* N = "wgmma_errors";
  int f0 = g_fail;
  std::vector<uint8_t> smem(32768, 0);
  std::vector<float> ds(128 * 128);
  float* d[128];
  for (int t = 0; t < 128; ++t) d[t] = &ds[size_t(t) * 128];
  uint64_t good = make_desc(1024, 16, 1024, 128);
  CHECK(N, P::wgmma_m64nNk16_ss(64, true, good, good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "good case rejected");
  CHECK(N, !P::wgmma_m64nNk16_ss(64, true, good | (1ull << 49), good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "base offset != 0 accepted");
  CHECK(N,
        !P::wgmma_m64nNk16_ss(64, true, good, make_desc(30720, 16, 1024, 128), 0, 0, 0, smem.data(), 32768, d, nullptr)
             .empty(),
        "operand past the window accepted");
  CHECK(N,
        !P::wgmma_m64nNk16_ss(64, true, make_desc(1024 + 112, 16, 1024, 128), good, 0, 0, 0, smem.data(), 32768, d,
                              nullptr)
             .empty(),
        "K-major 128B start whose 32-byte K slice crosses the swizzle row accepted");
  CHECK(N,
        !P::wgmma_m64nNk16_ss(64, true, good, make_desc(1024 + 32, 8192, 1024, 128), 0, 0, 1, smem.data(), 32768, d,
                              nullptr)
             .empty(),
        "MN-major 128B start inside a swizzle row accepted");
  CHECK(N, !P::wgmma_m64nNk16_ss(12, true, good, good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "N = 12 accepted");
  RecAccess ra;
  ds[0] = 42.0f;
  CHECK(N,
        !P::wgmma_m64nNk16_ss(64, true, good, make_desc(30720, 16, 1024, 128), 1, 0, 0, smem.data(), 32768, d, &ra)
                .empty() &&
            ra.rd.empty() && ra.wr.empty() && ds[0] == 42.0f,
        "a failing wgmma reported accesses or changed the accumulators");
  report(N, f0);
}

void test_wgmma() {
  test_wgmma_d_table();
  for (int bf = 0; bf < 2; ++bf) {
    bool bf16 = bf == 1;
    const char* ty = bf16 ? "bf16" : "f16";
    for (int Nn : {64, 128, 256}) {
      for (int W : {128, 64, 32})
        run_wgmma_case(std::string("wgmma_") + ty + "_n" + std::to_string(Nn) + "_kmajor_sw" + std::to_string(W), Nn,
                       bf16, false, W, false, W);
      run_wgmma_case(std::string("wgmma_") + ty + "_n" + std::to_string(Nn) + "_mnmajor_sw128", Nn, bf16, true, 128,
                     true, 128);
    }
    // further layouts: no swizzle both majors, MN-major 64B/32B, mixed majors
    run_wgmma_case(std::string("wgmma_") + ty + "_n128_kmajor_none", 128, bf16, false, 0, false, 0);
    run_wgmma_case(std::string("wgmma_") + ty + "_n128_mnmajor_none", 128, bf16, true, 0, true, 0);
    run_wgmma_case(std::string("wgmma_") + ty + "_n128_mnmajor_sw64", 128, bf16, true, 64, true, 64);
    run_wgmma_case(std::string("wgmma_") + ty + "_n64_mnmajor_sw32", 64, bf16, true, 32, true, 32);
    run_wgmma_case(std::string("wgmma_") + ty + "_n96_a_kmajor_sw128_b_mnmajor_sw128", 96, bf16, false, 128, true, 128);
  }
  static const int mn0[][2] = {{8, 1}, {1, 8}, {2, 64}}, k0[][2] = {{8, 8}, {2, 128}};
  static const int mn1[][2] = {{8, 1}, {2, 8}, {2, 128}}, k1[][2] = {{8, 16}, {2, 256}};
  static const int mn2[][2] = {{8, 1}, {4, 8}, {2, 256}}, k2[][2] = {{8, 32}, {2, 512}};
  run_isa_example("wgmma_isa_example_mn_none_bf16", 0, Mode{3, mn0}, Mode{2, k0}, 16, 128 * 2, 64 * 2);
  run_isa_example("wgmma_isa_example_mn_sw32_bf16", 32, Mode{3, mn1}, Mode{2, k1}, 32, 128 * 2, 256 * 2);
  run_isa_example("wgmma_isa_example_mn_sw64_bf16", 64, Mode{3, mn2}, Mode{2, k2}, 64, 256 * 2, 512 * 2);
  test_wgmma_errors();
}
