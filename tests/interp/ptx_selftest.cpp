// ptx_selftest.cpp -- checks heddle/interp/rt/hrt_ptx.h against the PTX ISA / CUDA documents.
//
// Every expectation below is written from the documents themselves (literal tables transcribed from
// the ISA figures and formulas, the canonical-layout table of the wgmma section, the CUDA guide's TMA
// swizzle index relation), never by calling the header's own layout helpers, so that a wrong formula
// in the header fails here.  Prints "ok <name>" per passing check and "FAIL <name>: ..." otherwise;
// exit status 0 iff every check passed.
#include "heddle/interp/rt/hrt_ptx.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace P = heddle_rt::ptx;

static int g_fail = 0;
static std::string g_first;

static void fail(const std::string& name, const std::string& msg) {
  if (g_first.empty()) g_first = name;
  ++g_fail;
  std::printf("FAIL %s: %s\n", name.c_str(), msg.c_str());
}
static bool report(const std::string& name, int errors_before) {
  if (g_fail == errors_before) {
    std::printf("ok %s\n", name.c_str());
    return true;
  }
  std::printf("FAIL %s: %d failed check(s)\n", name.c_str(), g_fail - errors_before);
  return false;
}
static std::map<std::string, int> g_printed;  // at most 8 detail lines per check group
#define CHECK(name, cond, ...)                                          \
  do {                                                                  \
    if (!(cond)) {                                                      \
      char _b[512];                                                     \
      std::snprintf(_b, sizeof _b, __VA_ARGS__);                        \
      if (g_printed[name]++ < 8) fail(name, _b); else ++g_fail;         \
    }                                                                   \
  } while (0)

// ---- deterministic RNG ----------------------------------------------------------------------------
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return uint32_t(g_rng >> 11);
}
static double urand() { return (rnd() & 0xFFFFFF) / double(0x1000000); }  // [0,1)

// ---- test-side numbers (from IEEE 754 definitions, independent of the header) -------------------
static double ref_f16(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0)
    v = std::ldexp(double(m), -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(double(1024 + m), e - 25);
  return s ? -v : v;
}
static double ref_bf16(uint16_t h) {
  int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
  double v;
  if (e == 0)
    v = std::ldexp(double(m), -133);
  else if (e == 255)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(double(128 + m), e - 134);
  return s ? -v : v;
}
// Nearest binary16 to x by search over the (monotonic) table of non-negative finite encodings.
static uint16_t ref_to_f16(float xf) {
  double x = xf;
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (a >= 65520.0) return sign | 0x7C00;  // >= max + half ulp (65504 + 16) rounds to inf
  int lo = 0, hi = 0x7BFF;                  // largest encoding with value <= a
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (ref_f16(uint16_t(mid)) <= a) lo = mid; else hi = mid - 1;
  }
  if (lo == 0x7BFF) return sign | 0x7BFF;
  double d0 = a - ref_f16(uint16_t(lo)), d1 = ref_f16(uint16_t(lo + 1)) - a;
  int pick = d0 < d1 ? lo : d1 < d0 ? lo + 1 : ((lo & 1) ? lo + 1 : lo);
  return uint16_t(sign | pick);
}
static uint16_t ref_to_bf16(float xf) {
  uint32_t u;
  std::memcpy(&u, &xf, 4);
  uint16_t t = uint16_t(u >> 16);  // truncation candidate (same sign)
  double a = std::fabs(double(xf));
  double v0 = std::fabs(ref_bf16(t)), v1 = std::fabs(ref_bf16(uint16_t(t + 1)));  // t+1 may be inf
  if ((t & 0x7FFF) == 0x7F7F) v1 = std::ldexp(1.0, 128);  // next step past max finite is 2^128 (inf)
  double d0 = a - v0, d1 = v1 - a;
  if (d0 < d1) return t;
  if (d1 < d0) return uint16_t(t + 1);
  return (t & 1) ? uint16_t(t + 1) : t;
}

static void test_numbers() {
  const char* N = "numbers";
  int f0 = g_fail;
  for (uint32_t h = 0; h < 65536; ++h) {
    double r = ref_f16(uint16_t(h));
    float got = P::f16_to_f32(uint16_t(h));
    if (std::isnan(r)) {
      CHECK(N, std::isnan(got), "f16_to_f32(%04x) not NaN", h);
      uint16_t back = P::f32_to_f16_rn(got);
      CHECK(N, (back & 0x7C00) == 0x7C00 && (back & 0x200) && (back & 0x8000) == (h & 0x8000),
            "f16 NaN %04x -> %04x not a quiet NaN of same sign", h, back);
    } else {
      CHECK(N, double(got) == r, "f16_to_f32(%04x) = %.9g, want %.9g", h, got, r);
      CHECK(N, P::f32_to_f16_rn(got) == h, "f16 round trip %04x -> %04x", h, P::f32_to_f16_rn(got));
    }
    double rb = ref_bf16(uint16_t(h));
    float gb = P::bf16_to_f32(uint16_t(h));
    if (std::isnan(rb)) {
      CHECK(N, std::isnan(gb), "bf16_to_f32(%04x) not NaN", h);
      uint16_t back = P::f32_to_bf16_rn(gb);
      CHECK(N, (back & 0x7F80) == 0x7F80 && (back & 0x40) && (back & 0x8000) == (h & 0x8000),
            "bf16 NaN %04x -> %04x not a quiet NaN of same sign", h, back);
    } else {
      CHECK(N, double(gb) == rb, "bf16_to_f32(%04x) = %.9g, want %.9g", h, gb, rb);
      CHECK(N, P::f32_to_bf16_rn(gb) == h, "bf16 round trip %04x", h);
    }
  }
  // literal spot values (IEEE 754)
  struct { float x; uint16_t h, b; } lit[] = {
      {1.0f, 0x3C00, 0x3F80},       {-2.0f, 0xC000, 0xC000},          {65504.0f, 0x7BFF, 0x4780},
      {65520.0f, 0x7C00, 0x4780},   {65519.99f, 0x7BFF, 0x4780},     {std::ldexp(1.0f, -24), 0x0001, 0x3380},
      {std::ldexp(1.0f, -25), 0x0000, 0x3300}, {std::ldexp(1.5f, -25), 0x0001, 0x3340},
      {1.00390625f, 0x3C04, 0x3F80}, {1.01171875f, 0x3C0C, 0x3F82},  {-0.0f, 0x8000, 0x8000},
      {3.4028235e38f, 0x7C00, 0x7F80}, {INFINITY, 0x7C00, 0x7F80}, {-INFINITY, 0xFC00, 0xFF80},
  };
  for (auto& t : lit) {
    CHECK(N, P::f32_to_f16_rn(t.x) == t.h, "f32_to_f16_rn(%.9g) = %04x want %04x", t.x, P::f32_to_f16_rn(t.x), t.h);
    CHECK(N, P::f32_to_bf16_rn(t.x) == t.b, "f32_to_bf16_rn(%.9g) = %04x want %04x", t.x, P::f32_to_bf16_rn(t.x), t.b);
  }
  // random floats over a wide exponent range, plus exact ties
  for (int i = 0; i < 300000; ++i) {
    uint32_t u = rnd() ^ (rnd() << 21);
    int mode = i % 3;
    if (mode == 0) u = (u & 0x807FFFFFu) | (uint32_t(103 + rnd() % 40) << 23);  // f16 range incl. subnormals
    if (mode == 1) u = (u & ~0x1FFFu) | 0x1000u;                               // f16 tie bit pattern
    if ((u & 0x7F800000u) == 0x7F800000u) continue;
    float x;
    std::memcpy(&x, &u, 4);
    CHECK(N, P::f32_to_f16_rn(x) == ref_to_f16(x), "f32_to_f16_rn(%a) = %04x want %04x", x, P::f32_to_f16_rn(x),
          ref_to_f16(x));
    uint32_t ub = mode == 1 ? ((u & ~0xFFFFu) | 0x8000u) : u;
    float xb;
    std::memcpy(&xb, &ub, 4);
    if ((ub & 0x7F800000u) == 0x7F800000u) continue;
    CHECK(N, P::f32_to_bf16_rn(xb) == ref_to_bf16(xb), "f32_to_bf16_rn(%a) = %04x want %04x", xb,
          P::f32_to_bf16_rn(xb), ref_to_bf16(xb));
  }
  float qn = std::nanf("");
  CHECK(N, (P::f32_to_f16_rn(qn) & 0x7E00) == 0x7E00, "f16 NaN");
  uint32_t snan_bits = 0x7F800001u;  // signalling NaN with a payload only in the low bits
  float snan;
  std::memcpy(&snan, &snan_bits, 4);
  CHECK(N, (P::f32_to_f16_rn(snan) & 0x7E00) == 0x7E00, "sNaN -> f16 must be quiet NaN, got %04x", P::f32_to_f16_rn(snan));
  CHECK(N, (P::f32_to_bf16_rn(snan) & 0x7FC0) == 0x7FC0, "sNaN -> bf16 must be quiet NaN, got %04x", P::f32_to_bf16_rn(snan));
  report(N, f0);
}

// ---- mma.m16n8k16 fragment tables, transcribed from the ISA figures (9.7.14.5.8) ------------------
static const int kLanes[5] = {0, 1, 4, 5, 31};
static const int kA[5][8][2] = {
    {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}},                  // lane 0
    {{0, 2}, {0, 3}, {8, 2}, {8, 3}, {0, 10}, {0, 11}, {8, 10}, {8, 11}},              // lane 1
    {{1, 0}, {1, 1}, {9, 0}, {9, 1}, {1, 8}, {1, 9}, {9, 8}, {9, 9}},                  // lane 4
    {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}},              // lane 5
    {{7, 6}, {7, 7}, {15, 6}, {15, 7}, {7, 14}, {7, 15}, {15, 14}, {15, 15}},          // lane 31
};
static const int kB[5][4][2] = {  // (k, n)
    {{0, 0}, {1, 0}, {8, 0}, {9, 0}},
    {{2, 0}, {3, 0}, {10, 0}, {11, 0}},
    {{0, 1}, {1, 1}, {8, 1}, {9, 1}},
    {{2, 1}, {3, 1}, {10, 1}, {11, 1}},
    {{6, 7}, {7, 7}, {14, 7}, {15, 7}},
};
static const int kC[5][4][2] = {  // (row, col)
    {{0, 0}, {0, 1}, {8, 0}, {8, 1}},
    {{0, 2}, {0, 3}, {8, 2}, {8, 3}},
    {{1, 0}, {1, 1}, {9, 0}, {9, 1}},
    {{1, 2}, {1, 3}, {9, 2}, {9, 3}},
    {{7, 6}, {7, 7}, {15, 6}, {15, 7}},
};

static void test_mma_tables() {
  const char* N = "mma_m16n8k16_tables";
  int f0 = g_fail;
  for (int li = 0; li < 5; ++li) {
    int l = kLanes[li], r, c;
    for (int i = 0; i < 8; ++i) {
      P::mma_m16n8k16_a_pos(l, i, &r, &c);
      CHECK(N, r == kA[li][i][0] && c == kA[li][i][1], "A lane %d a%d = (%d,%d) want (%d,%d)", l, i, r, c,
            kA[li][i][0], kA[li][i][1]);
    }
    for (int i = 0; i < 4; ++i) {
      P::mma_m16n8k16_b_pos(l, i, &r, &c);
      CHECK(N, r == kB[li][i][0] && c == kB[li][i][1], "B lane %d b%d = (%d,%d) want (%d,%d)", l, i, r, c,
            kB[li][i][0], kB[li][i][1]);
      P::mma_m16n8k16_c_pos(l, i, &r, &c);
      CHECK(N, r == kC[li][i][0] && c == kC[li][i][1], "C lane %d c%d = (%d,%d) want (%d,%d)", l, i, r, c,
            kC[li][i][0], kC[li][i][1]);
    }
  }
  // each table covers its matrix exactly once
  int ca[16][16] = {}, cb[16][8] = {}, cc[16][8] = {};
  for (int l = 0; l < 32; ++l) {
    int r, c;
    for (int i = 0; i < 8; ++i) { P::mma_m16n8k16_a_pos(l, i, &r, &c); if (r >= 0 && r < 16 && c >= 0 && c < 16) ca[r][c]++; }
    for (int i = 0; i < 4; ++i) { P::mma_m16n8k16_b_pos(l, i, &r, &c); if (r >= 0 && r < 16 && c >= 0 && c < 8) cb[r][c]++; }
    for (int i = 0; i < 4; ++i) { P::mma_m16n8k16_c_pos(l, i, &r, &c); if (r >= 0 && r < 16 && c >= 0 && c < 8) cc[r][c]++; }
  }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      CHECK(N, ca[r][c] == 1, "A element (%d,%d) covered %d times", r, c, ca[r][c]);
      if (c < 8) CHECK(N, cb[r][c] == 1 && cc[r][c] == 1, "B/C element (%d,%d) covered %d/%d times", r, c, cb[r][c], cc[r][c]);
    }
  report(N, f0);
}

static uint16_t rand_half(bool bf16, double* val) {
  float x = float((urand() * 2.0 - 1.0) * 2.0);
  uint16_t h = bf16 ? P::f32_to_bf16_rn(x) : P::f32_to_f16_rn(x);
  *val = bf16 ? ref_bf16(h) : ref_f16(h);
  return h;
}

static void test_mma(bool bf16) {
  std::string N = bf16 ? "mma_m16n8k16_bf16" : "mma_m16n8k16_f16";
  int f0 = g_fail;
  for (int trial = 0; trial < 20; ++trial) {
    uint16_t Ah[16][16], Bh[16][8];
    double A[16][16], B[16][8], C[16][8];
    for (int r = 0; r < 16; ++r) for (int k = 0; k < 16; ++k) Ah[r][k] = rand_half(bf16, &A[r][k]);
    for (int k = 0; k < 16; ++k) for (int n = 0; n < 8; ++n) Bh[k][n] = rand_half(bf16, &B[k][n]);
    uint32_t a[32][4], b[32][2];
    float d[32][4];
    // fragments built from the literal ISA formulas (groupID/threadID_in_group), not the header tables
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      for (int reg = 0; reg < 4; ++reg) {
        int row = g + ((reg & 1) ? 8 : 0), col = 2 * t + ((reg & 2) ? 8 : 0);
        a[l][reg] = uint32_t(Ah[row][col]) | (uint32_t(Ah[row][col + 1]) << 16);
      }
      for (int reg = 0; reg < 2; ++reg) {
        int k = 2 * t + 8 * reg;
        b[l][reg] = uint32_t(Bh[k][g]) | (uint32_t(Bh[k + 1][g]) << 16);
      }
      for (int i = 0; i < 4; ++i) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        C[row][col] = trial == 0 ? 0.0 : (urand() - 0.5) * 8.0;
        d[l][i] = float(C[row][col]);
        C[row][col] = double(d[l][i]);
      }
    }
    P::mma_m16n8k16(bf16, a, b, d);
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      for (int i = 0; i < 4; ++i) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        double ref = C[row][col], mag = std::fabs(C[row][col]);
        for (int k = 0; k < 16; ++k) { ref += A[row][k] * B[k][col]; mag += std::fabs(A[row][k] * B[k][col]); }
        CHECK(N.c_str(), std::fabs(double(d[l][i]) - ref) <= 1e-6 * mag + 1e-7, "trial %d lane %d d%d = %.9g want %.9g",
              trial, l, i, d[l][i], ref);
      }
    }
  }
  report(N, f0);
}

// ---- ldmatrix ------------------------------------------------------------------------------------
struct RecAccess : P::Access {
  std::vector<std::pair<uint32_t, uint32_t>> rd, wr;
  void read(uint32_t off, uint32_t bytes) override { rd.push_back({off, bytes}); }
  void write(uint32_t off, uint32_t bytes) override { wr.push_back({off, bytes}); }
  static std::set<uint32_t> bytes_of(const std::vector<std::pair<uint32_t, uint32_t>>& v, size_t* total) {
    std::set<uint32_t> s;
    *total = 0;
    for (auto& p : v) { for (uint32_t i = 0; i < p.second; ++i) s.insert(p.first + i); *total += p.second; }
    return s;
  }
};

static void test_ldmatrix() {
  for (int num : {1, 2, 4}) {
    for (int trans = 0; trans < 2; ++trans) {
      std::string N = "ldmatrix_x" + std::to_string(num) + (trans ? "_trans" : "");
      int f0 = g_fail;
      std::vector<uint8_t> smem(4096, 0);
      uint32_t row_off[32];
      std::set<uint32_t> used;
      for (int l = 0; l < 32; ++l) {  // scattered, distinct, 16-byte aligned rows
        uint32_t o;
        do { o = (rnd() % 255) * 16; } while (used.count(o));
        used.insert(o);
        row_off[l] = o;
      }
      // element (matrix m, row r, col c) holds id 1000*m + 10*r + c (as b16)
      for (int m = 0; m < 4; ++m)
        for (int r = 0; r < 8; ++r)
          for (int c = 0; c < 8; ++c) {
            uint16_t v = uint16_t(1000 * m + 10 * r + c);
            std::memcpy(&smem[row_off[m * 8 + r] + 2 * c], &v, 2);
          }
      uint32_t out[32][4];
      std::memset(out, 0xEE, sizeof out);
      RecAccess ra;
      std::string err = P::ldmatrix(num, trans, smem.data(), 4096, row_off, out, &ra);
      CHECK(N.c_str(), err.empty(), "unexpected error: %s", err.c_str());
      for (int l = 0; l < 32; ++l)
        for (int m = 0; m < num; ++m) {
          // ISA: lane l holds (row l/4, cols 2*(l%4), 2*(l%4)+1); .trans: of the transposed matrix
          int r = l / 4, c = 2 * (l % 4);
          uint16_t want_lo = trans ? uint16_t(1000 * m + 10 * c + r) : uint16_t(1000 * m + 10 * r + c);
          uint16_t want_hi = trans ? uint16_t(1000 * m + 10 * (c + 1) + r) : uint16_t(1000 * m + 10 * r + c + 1);
          uint32_t want = uint32_t(want_lo) | (uint32_t(want_hi) << 16);
          CHECK(N.c_str(), out[l][m] == want, "lane %d reg %d = %08x want %08x", l, m, out[l][m], want);
        }
      size_t tot;
      auto got = RecAccess::bytes_of(ra.rd, &tot);
      std::set<uint32_t> want;
      for (int l = 0; l < 8 * num; ++l) for (int i = 0; i < 16; ++i) want.insert(row_off[l] + i);
      CHECK(N.c_str(), got == want && tot == want.size() && ra.wr.empty(), "reported reads differ (%zu vs %zu bytes)",
            tot, want.size());
      // errors: misaligned and out-of-window row addresses
      uint32_t bad[32];
      std::memcpy(bad, row_off, sizeof bad);
      bad[8 * num - 1] += 8;
      CHECK(N.c_str(), !P::ldmatrix(num, trans, smem.data(), 4096, bad, out, nullptr).empty(), "misaligned row accepted");
      std::memcpy(bad, row_off, sizeof bad);
      bad[0] = 4096 - 8 + 8;  // 16-aligned but past the window
      CHECK(N.c_str(), !P::ldmatrix(num, trans, smem.data(), 4096, bad, out, nullptr).empty(), "out-of-window row accepted");
      report(N, f0);
    }
  }
}

// ---- wgmma ---------------------------------------------------------------------------------------
// The ISA's D fragment figure (149), transcribed for a few threads: (thread, i) -> (row, col).
static void test_wgmma_d_table() {
  const char* N = "wgmma_d_layout";
  int f0 = g_fail;
  struct { int N, t, i, row, col; } lit[] = {
      {64, 0, 0, 0, 0},     {64, 0, 1, 0, 1},     {64, 0, 2, 8, 0},     {64, 0, 3, 8, 1},     {64, 0, 4, 0, 8},
      {64, 0, 5, 0, 9},     {64, 0, 6, 8, 8},     {64, 0, 7, 8, 9},     {64, 1, 0, 0, 2},     {64, 1, 3, 8, 3},
      {64, 4, 0, 1, 0},     {64, 4, 2, 9, 0},     {64, 5, 1, 1, 3},     {64, 31, 0, 7, 6},    {64, 31, 3, 15, 7},
      {64, 31, 31, 15, 63}, {64, 37, 0, 17, 2},   {64, 37, 2, 25, 2},   {64, 37, 4, 17, 10},  {64, 64, 0, 32, 0},
      {128, 127, 0, 55, 6}, {128, 127, 3, 63, 7}, {128, 96, 62, 56, 120}, {256, 127, 127, 63, 255},
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

// Test-side canonical layouts (PTX ISA 9.7.15.5.1.2.1.3), for 16-bit elements, T = 8:
//   K-major  none: ((8,m),(T,2k)):((1T,SBO),(1,LBO))        K-major  W: ((8,m),(T,2k)):((W/16*T,SBO),(1,T))
//   MN-major none: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))     MN-major W: ((T,W/16,m),(8,k)):((1,T,LBO),(W/16*T,SBO))
// A tile stored for several k-steps: K-major tiles are BK wide (BK = W/2 elements for swizzled, 32 for
// none), MN-major tiles are BK deep.  Returns the byte offset (relative to the 1024-aligned tile base)
// of element (mn, k), before swizzling, and the LBO/SBO that describe it.
struct TileFmt {
  bool mn_major;
  int W;    // 0, 32, 64, 128
  int MN;   // rows of the operand (64 for A, N for B)
  int BK;   // K extent stored
  uint32_t lbo, sbo;
};
static TileFmt make_fmt(bool mn_major, int W, int MN) {
  TileFmt f{mn_major, W, MN, 0, 0, 0};
  if (!mn_major) {
    if (W) { f.BK = W / 2; f.sbo = uint32_t(8 * W); f.lbo = 16; /* unused, "assumed 1" */ }
    else { f.BK = 32; f.lbo = 128; f.sbo = uint32_t(128 * (32 / 8)); }  // core matrices: K-adjacent contiguous
  } else {
    f.BK = 32;
    if (W) { f.sbo = uint32_t(8 * W); f.lbo = uint32_t(W * f.BK); }      // 8-row K groups contiguous, atoms along MN
    else { f.lbo = 128; f.sbo = uint32_t(128 * (f.BK / 8)); }            // K groups contiguous, MN groups spaced SBO
  }
  return f;
}
static uint32_t tile_off(const TileFmt& f, int mn, int k) {
  const int e = 2;
  if (!f.mn_major) {
    if (f.W) return uint32_t((mn / 8) * f.sbo + (mn % 8) * f.W + k * e);
    return uint32_t((mn / 8) * f.sbo + (k / 8) * f.lbo + (mn % 8) * 16 + (k % 8) * e);
  }
  if (f.W) {
    int atom = f.W / e;  // MN elements per swizzle row
    return uint32_t((mn / atom) * f.lbo + (k / 8) * f.sbo + (k % 8) * f.W + (mn % atom) * e);
  }
  return uint32_t((mn / 8) * f.sbo + (k / 8) * f.lbo + (k % 8) * 16 + (mn % 8) * e);
}
static uint32_t tile_bytes(const TileFmt& f) {
  uint32_t mx = 0;
  for (int mn = 0; mn < f.MN; ++mn) for (int k = 0; k < f.BK; ++k) mx = std::max(mx, tile_off(f, mn, k) + 2);
  return (mx + 1023) & ~1023u;
}
// Swizzle written from the CUDA guide's index relation: y = addr/128 (128-byte row), x = 16-byte chunk,
// x' = x ^ (y % R) with R = W/16.
static uint32_t test_swz(uint32_t a, int W) {
  if (!W) return a;
  uint32_t y = a / 128, x = (a % 128) / 16;
  uint32_t x2 = x ^ (y % uint32_t(W / 16));
  return y * 128 + x2 * 16 + a % 16;
}
// Descriptor start for k-step s (16 elements each).
static uint32_t kstep_start(const TileFmt& f, uint32_t base, int s) {
  if (!f.mn_major) return f.W ? base + uint32_t(32 * s) : base + uint32_t(2 * s) * f.lbo;
  // two 8-row K groups per k-step: spaced SBO when swizzled, LBO without swizzle
  return base + uint32_t(2 * s) * (f.W ? f.sbo : f.lbo);
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
      if (k < BK) { a_bytes[k / 16].insert(p); a_bytes[k / 16].insert(p + 1); }
    }
  for (int n = 0; n < Nn; ++n)
    for (int k = 0; k < fb.BK; ++k) {
      double v;
      uint16_t h = rand_half(bf16, &v);
      if (k < BK) B[size_t(n) * BK + k] = v;
      uint32_t p = test_swz(bbase + tile_off(fb, n, k), bW);
      std::memcpy(&smem[p], &h, 2);
      if (k < BK) { b_bytes[k / 16].insert(p); b_bytes[k / 16].insert(p + 1); }
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
    if (scale_d == 0) { std::fill(D.begin(), D.end(), 0.0); std::fill(mag.begin(), mag.end(), 0.0); }
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
      double tol = 2e-6 * (mag[size_t(r) * Nn + c] + std::fabs(ref) + 2.0) ;
      CHECK(name.c_str(), std::fabs(dptr[t][i] - ref) <= tol, "thread %d d%d (row %d col %d) = %.9g want %.9g", t, i, r,
            c, dptr[t][i], ref);
    }
  report(name, f0);
}

// A tiny evaluator for the ISA's worked examples, written as CuTe-style (shape):(stride) with two
// hierarchical modes (MN and K), each a list of (size, stride) pairs, colexicographic.
struct Mode { int n; const int (*ss)[2]; };
static int eval_mode(const Mode& md, int x) {
  int off = 0;
  for (int i = 0; i < md.n; ++i) { off += (x % md.ss[i][0]) * md.ss[i][1]; x /= md.ss[i][0]; }
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
      for (int k = 0; k < 16; ++k) { ref += A[r * 16 + k] * B[size_t(c) * 16 + k]; mag += std::fabs(A[r * 16 + k] * B[size_t(c) * 16 + k]); }
      CHECK(name.c_str(), std::fabs(dptr[t][i] - ref) <= 2e-6 * (mag + 1.0), "thread %d d%d = %.9g want %.9g", t, i, dptr[t][i], ref);
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
  CHECK(N, P::wgmma_m64nNk16_ss(64, true, good, good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(), "good case rejected");
  CHECK(N, !P::wgmma_m64nNk16_ss(64, true, good | (1ull << 49), good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "base offset != 0 accepted");
  CHECK(N, !P::wgmma_m64nNk16_ss(64, true, good, make_desc(30720, 16, 1024, 128), 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "operand past the window accepted");
  CHECK(N, !P::wgmma_m64nNk16_ss(64, true, make_desc(1024 + 112, 16, 1024, 128), good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(),
        "K-major 128B start whose 32-byte K slice crosses the swizzle row accepted");
  CHECK(N, !P::wgmma_m64nNk16_ss(64, true, good, make_desc(1024 + 32, 8192, 1024, 128), 0, 0, 1, smem.data(), 32768, d, nullptr).empty(),
        "MN-major 128B start inside a swizzle row accepted");
  CHECK(N, !P::wgmma_m64nNk16_ss(12, true, good, good, 0, 0, 0, smem.data(), 32768, d, nullptr).empty(), "N = 12 accepted");
  RecAccess ra;
  ds[0] = 42.0f;
  CHECK(N, !P::wgmma_m64nNk16_ss(64, true, good, make_desc(30720, 16, 1024, 128), 1, 0, 0, smem.data(), 32768, d, &ra).empty() &&
               ra.rd.empty() && ra.wr.empty() && ds[0] == 42.0f,
        "a failing wgmma reported accesses or changed the accumulators");
  report(N, f0);
}

static void test_wgmma() {
  test_wgmma_d_table();
  for (int bf = 0; bf < 2; ++bf) {
    bool bf16 = bf == 1;
    const char* ty = bf16 ? "bf16" : "f16";
    for (int Nn : {64, 128, 256}) {
      for (int W : {128, 64, 32})
        run_wgmma_case(std::string("wgmma_") + ty + "_n" + std::to_string(Nn) + "_kmajor_sw" + std::to_string(W), Nn, bf16,
                       false, W, false, W);
      run_wgmma_case(std::string("wgmma_") + ty + "_n" + std::to_string(Nn) + "_mnmajor_sw128", Nn, bf16, true, 128, true, 128);
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

// ---- TMA -----------------------------------------------------------------------------------------
static void test_tma_encode() {
  const char* N = "tma_encode_rejects";
  int f0 = g_fail;
  alignas(64) static uint8_t gbuf[1 << 16];
  uint64_t base = (uint64_t(uintptr_t(gbuf)) + 127) & ~uint64_t(127);
  P::TensorMap tm;
  uint64_t dims[3] = {100, 70, 3}, strides[2] = {208, 208 * 70};
  uint32_t box[3] = {64, 24, 1}, es[3] = {1, 1, 1};
  auto enc = [&](int dt, uint64_t b, int rank, const uint64_t* st, const uint32_t* bx, const uint32_t* e, int il, int sw,
                 int oob) { return P::encode_tensor_map(&tm, dt, b, rank, dims, st, bx, e, il, sw, 0, oob); };
  std::string e;
  CHECK(N, (e = enc(9, base, 2, strides, box, es, 0, 3, 0)).empty(), "valid map rejected: %s", e.c_str());
  CHECK(N, (e = enc(9, base + 8, 2, strides, box, es, 0, 3, 0)).find("globalAddress") != std::string::npos,
        "misaligned base: got '%s'", e.c_str());
  uint64_t bad_st[2] = {200, 208 * 70};  // 200 % 16 = 8
  CHECK(N, (e = enc(9, base, 2, bad_st, box, es, 0, 3, 0)).find("globalStrides") != std::string::npos,
        "stride not multiple of 16: got '%s'", e.c_str());
  uint64_t huge_st[2] = {uint64_t(1) << 40, 0};
  CHECK(N, (e = enc(9, base, 2, huge_st, box, es, 0, 3, 0)).find("globalStrides") != std::string::npos,
        "stride >= 2^40: got '%s'", e.c_str());
  uint32_t big_box[3] = {64, 257, 1};
  CHECK(N, (e = enc(9, base, 2, strides, big_box, es, 0, 0, 0)).find("boxDim") != std::string::npos,
        "box > 256: got '%s'", e.c_str());
  uint32_t wide_box[3] = {128, 8, 1};  // 256 bytes inner with a 128B swizzle
  CHECK(N, (e = enc(9, base, 2, strides, wide_box, es, 0, 3, 0)).find("swizzle") != std::string::npos,
        "inner box over the swizzle span: got '%s'", e.c_str());
  uint32_t box64[3] = {64, 8, 1};  // 128 bytes inner with a 64B swizzle
  CHECK(N, !enc(9, base, 2, strides, box64, es, 0, 2, 0).empty(), "128-byte inner box with 64B swizzle accepted");
  CHECK(N, enc(9, base, 2, strides, box64, es, 0, 0, 0).empty(), "256-byte inner box with no swizzle rejected");
  uint32_t odd_box[3] = {4, 8, 1};  // 8 bytes inner
  CHECK(N, (e = enc(9, base, 2, strides, odd_box, es, 0, 0, 0)).find("boxDim") != std::string::npos,
        "inner box bytes not a multiple of 16: got '%s'", e.c_str());
  uint32_t bad_es[3] = {1, 9, 1};
  CHECK(N, (e = enc(9, base, 2, strides, box, bad_es, 0, 3, 0)).find("elementStrides") != std::string::npos,
        "element stride 9: got '%s'", e.c_str());
  CHECK(N, !enc(9, base, 0, strides, box, es, 0, 3, 0).empty(), "rank 0 accepted");
  CHECK(N, !enc(9, base, 6, strides, box, es, 0, 3, 0).empty(), "rank 6 accepted");
  CHECK(N, !enc(0, base, 2, strides, box, es, 0, 0, 1).empty(), "NaN OOB fill on UINT8 accepted");
  CHECK(N, !enc(9, base, 3, strides, box, es, 2, 3, 0).empty(), "INTERLEAVE_32B with SWIZZLE_128B accepted");
  CHECK(N, !enc(9, base, 2, strides, box, es, 1, 0, 0).empty(), "interleave with rank 2 accepted");
  CHECK(N, !enc(99, base, 2, strides, box, es, 0, 0, 0).empty(), "unknown data type accepted");
  report(N, f0);
}

// Global test tensor: bf16 ids, value(x, y, z) = 1 + (x + 100*y + 7000*z) % 65000 (never 0).
static uint16_t tval(int64_t x, int64_t y, int64_t z) { return uint16_t(1 + (x + 100 * y + 7000 * z) % 65000); }

struct TmaCase {
  int dims[3];  // inner first
  int rank;
  int sw;       // CUtensorMapSwizzle
  uint32_t box[3];
  uint32_t es[3];
};

static void tma_load_case(const std::string& name, const TmaCase& tc, std::vector<std::array<int, 3>> coords_list) {
  int f0 = g_fail;
  const int esz = 2;
  uint64_t dims[3] = {uint64_t(tc.dims[0]), uint64_t(tc.dims[1]), uint64_t(tc.dims[2])};
  uint64_t row_bytes = ((uint64_t(tc.dims[0]) * esz + 15) / 16) * 16 + 16;  // padded rows
  uint64_t strides[2] = {row_bytes, row_bytes * dims[1]};
  std::vector<uint8_t> gmem(size_t(row_bytes * dims[1] * dims[2]) + 256);
  uint8_t* g = reinterpret_cast<uint8_t*>((uintptr_t(gmem.data()) + 127) & ~uintptr_t(127));
  for (int z = 0; z < tc.dims[2]; ++z)
    for (int y = 0; y < tc.dims[1]; ++y)
      for (int x = 0; x < tc.dims[0]; ++x) {
        uint16_t v = tval(x, y, z);
        std::memcpy(g + z * strides[1] + y * strides[0] + x * esz, &v, 2);
      }
  P::TensorMap tm;
  std::string err = P::encode_tensor_map(&tm, 9, uint64_t(uintptr_t(g)), tc.rank, dims, strides, tc.box, tc.es, 0, tc.sw, 0, 0);
  CHECK(name.c_str(), err.empty(), "encode failed: %s", err.c_str());
  if (!err.empty()) return;
  int W = tc.sw == 1 ? 32 : tc.sw == 2 ? 64 : tc.sw == 3 ? 128 : 0;
  uint32_t n[3];
  for (int i = 0; i < 3; ++i) n[i] = i < tc.rank ? (i == 0 ? tc.box[0] : (tc.box[i] + tc.es[i] - 1) / tc.es[i]) : 1;
  uint32_t inner = n[0] * esz;
  // shared image per the CUDA guide: rows of the box one after another, each occupying the full swizzle
  // span when swizzled ("ensure that the shared memory is allocated to accommodate the full swizzle width")
  uint32_t pitch = W ? uint32_t(W) : inner;
  uint32_t rows = n[1] * n[2];
  for (auto& c3 : coords_list) {
    const uint32_t dst = 2048, SM = 65536;
    std::vector<uint8_t> smem(SM, 0xAB);
    int32_t coords[3] = {c3[0], c3[1], c3[2]};
    uint32_t tx = 0;
    RecAccess ra;
    err = P::tma_load(tm, coords, smem.data(), SM, dst, &tx, &ra);
    CHECK(name.c_str(), err.empty(), "load at (%d,%d,%d) failed: %s", c3[0], c3[1], c3[2], err.c_str());
    if (!err.empty()) continue;
    CHECK(name.c_str(), tx == rows * inner, "transaction bytes %u want %u", tx, rows * inner);
    std::set<uint32_t> touched;
    int bad = 0;
    for (uint32_t z = 0; z < n[2]; ++z)
      for (uint32_t y = 0; y < n[1]; ++y)
        for (uint32_t x = 0; x < n[0]; ++x) {
          int64_t gx = c3[0] + int64_t(x), gy = c3[1] + int64_t(y) * tc.es[1], gz = c3[2] + int64_t(z) * tc.es[2];
          bool in = gx >= 0 && gx < tc.dims[0] && gy >= 0 && gy < tc.dims[1] && gz >= 0 && gz < tc.dims[2];
          uint16_t want = in ? tval(gx, gy, gz) : 0;
          uint32_t p = test_swz(dst + (z * n[1] + y) * pitch + x * esz, W);
          uint16_t got;
          std::memcpy(&got, &smem[p], 2);
          touched.insert(p);
          touched.insert(p + 1);
          if (got != want && bad++ < 5)
            CHECK(name.c_str(), false, "coords (%d,%d,%d) box (%u,%u,%u) = %04x want %04x%s", c3[0], c3[1], c3[2], x, y, z,
                  got, want, in ? "" : " (OOB zero fill)");
        }
    for (uint32_t i = 0; i < SM; ++i)
      if (!touched.count(i) && smem[i] != 0xAB) {
        CHECK(name.c_str(), false, "byte %u outside the box image was written", i);
        break;
      }
    size_t tot;
    auto rep = RecAccess::bytes_of(ra.wr, &tot);
    CHECK(name.c_str(), rep == touched && tot == touched.size() && ra.rd.empty(), "reported writes differ from the image");
  }
  // misaligned destination
  int32_t c0[3] = {0, 0, 0};
  std::vector<uint8_t> smem(65536);
  uint32_t tx;
  CHECK(name.c_str(), !P::tma_load(tm, c0, smem.data(), 65536, 2048 + 64, &tx, nullptr).empty(), "64-byte aligned destination accepted");
  CHECK(name.c_str(), !P::tma_load(tm, c0, smem.data(), 2048, 2048, &tx, nullptr).empty(), "destination past the window accepted");
  report(name, f0);
}

static void tma_store_case(const std::string& name, int sw, std::array<int, 2> c2) {
  int f0 = g_fail;
  const int esz = 2, X = 100, Y = 70;
  uint64_t dims[2] = {X, Y}, strides[1] = {208};
  int W = sw == 1 ? 32 : sw == 2 ? 64 : sw == 3 ? 128 : 0;
  uint32_t box[2] = {uint32_t(W ? W / 2 : 40), 24}, es[2] = {1, 1};
  std::vector<uint8_t> gmem(208 * Y + 256);
  uint8_t* g = reinterpret_cast<uint8_t*>((uintptr_t(gmem.data()) + 127) & ~uintptr_t(127));
  std::memset(g, 0x5A, 208 * Y);
  P::TensorMap tm;
  std::string err = P::encode_tensor_map(&tm, 6, uint64_t(uintptr_t(g)), 2, dims, strides, box, es, 0, sw, 0, 0);
  CHECK(name.c_str(), err.empty(), "encode failed: %s", err.c_str());
  const uint32_t src = 4096, SM = 32768;
  std::vector<uint8_t> smem(SM, 0);
  uint32_t pitch = W ? uint32_t(W) : box[0] * esz;
  for (uint32_t y = 0; y < box[1]; ++y)
    for (uint32_t x = 0; x < box[0]; ++x) {
      uint16_t v = uint16_t(0x1000 + y * 256 + x);
      std::memcpy(&smem[test_swz(src + y * pitch + x * esz, W)], &v, 2);
    }
  int32_t coords[2] = {c2[0], c2[1]};
  RecAccess ra;
  err = P::tma_store(tm, coords, smem.data(), SM, src, &ra);
  CHECK(name.c_str(), err.empty(), "store failed: %s", err.c_str());
  int bad = 0;
  for (int y = 0; y < Y; ++y)
    for (int b = 0; b < 208; ++b) {
      int x = b / 2;
      int64_t bx = x - c2[0], by = y - c2[1];
      bool in_box = b < X * esz && bx >= 0 && bx < int64_t(box[0]) && by >= 0 && by < int64_t(box[1]);
      uint8_t want = 0x5A;
      if (in_box) {
        uint16_t v = uint16_t(0x1000 + by * 256 + bx);
        want = uint8_t(v >> (8 * (b & 1)));
      }
      uint8_t got = g[y * 208 + b];
      if (got != want && bad++ < 5)
        CHECK(name.c_str(), false, "global (x=%d y=%d byte %d) = %02x want %02x", x, y, b & 1, got, want);
    }
  size_t tot;
  auto rep = RecAccess::bytes_of(ra.rd, &tot);
  CHECK(name.c_str(), rep.size() == size_t(box[0]) * box[1] * esz && tot == rep.size() && ra.wr.empty(),
        "reported reads: %zu bytes, want %u", rep.size(), box[0] * box[1] * esz);
  report(name, f0);
}

static void test_tma() {
  test_tma_encode();
  // 2-D, bf16, 100 x 70, each swizzle mode, interior and partial (negative / past-the-end) boxes
  std::vector<std::array<int, 3>> cl = {{0, 0, 0}, {40, 10, 0}, {-8, -5, 0}, {90, 60, 0}, {-3, 66, 0}, {99, -23, 0}};
  tma_load_case("tma_load_swizzle_none", TmaCase{{100, 70, 1}, 2, 0, {48, 24, 1}, {1, 1, 1}}, cl);
  tma_load_case("tma_load_swizzle_32B", TmaCase{{100, 70, 1}, 2, 1, {16, 24, 1}, {1, 1, 1}}, cl);
  tma_load_case("tma_load_swizzle_64B", TmaCase{{100, 70, 1}, 2, 2, {32, 24, 1}, {1, 1, 1}}, cl);
  tma_load_case("tma_load_swizzle_128B", TmaCase{{100, 70, 1}, 2, 3, {64, 24, 1}, {1, 1, 1}}, cl);
  // inner box narrower than the swizzle span (rows padded to the span)
  tma_load_case("tma_load_swizzle_128B_narrow_inner", TmaCase{{100, 70, 1}, 2, 3, {32, 16, 1}, {1, 1, 1}}, cl);
  // 3-D (batched): box spills past dims 1 and 2
  tma_load_case("tma_load_3d_batched_128B", TmaCase{{64, 20, 3}, 3, 3, {64, 8, 2}, {1, 1, 1}},
                {{0, 0, 0}, {0, 16, 2}, {0, -4, -1}, {0, 8, 1}});
  // element strides along dimension 1
  tma_load_case("tma_load_element_stride", TmaCase{{100, 70, 1}, 2, 0, {16, 9, 1}, {1, 2, 1}}, {{0, 0, 0}, {8, 64, 0}});
  tma_store_case("tma_store_swizzle_none", 0, {{70, 55}});
  tma_store_case("tma_store_swizzle_32B", 1, {{-5, -3}});
  tma_store_case("tma_store_swizzle_64B", 2, {{80, 10}});
  tma_store_case("tma_store_swizzle_128B", 3, {{50, 60}});
  tma_store_case("tma_store_swizzle_128B_interior", 3, {{8, 8}});
}

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  test_numbers();
  test_mma_tables();
  test_mma(false);
  test_mma(true);
  test_ldmatrix();
  test_wgmma();
  test_tma();
  if (g_fail) {
    std::printf("FAILED: %d check(s); first failing group: %s\n", g_fail, g_first.c_str());
    return 1;
  }
  std::printf("ALL OK\n");
  return 0;
}
