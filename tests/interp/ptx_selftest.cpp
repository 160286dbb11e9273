// ptx_selftest.cpp -- checks heddle/interp/rt/hrt_ptx.h against the PTX ISA / CUDA documents.
//
// Every expectation below is written from the documents themselves (literal tables transcribed from
// the ISA figures and formulas, the canonical-layout table of the wgmma section, the CUDA guide's TMA
// swizzle index relation), never by calling the header's own layout helpers, so that a wrong formula
// in the header fails here.  Prints "ok <name>" per passing check and "FAIL <name>: ..." otherwise;
// exit status 0 iff every check passed.
#include "ptx_selftest.h"

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

int g_fail = 0;
std::string g_first;

void fail(const std::string& name, const std::string& msg) {
  if (g_first.empty()) g_first = name;
  ++g_fail;
  std::printf("FAIL %s: %s\n", name.c_str(), msg.c_str());
}
bool report(const std::string& name, int errors_before) {
  if (g_fail == errors_before) {
    std::printf("ok %s\n", name.c_str());
    return true;
  }
  std::printf("FAIL %s: %d failed check(s)\n", name.c_str(), g_fail - errors_before);
  return false;
}
std::map<std::string, int> g_printed;  // at most 8 detail lines per check group

// ---- deterministic RNG ----------------------------------------------------------------------------
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
uint32_t rnd() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return uint32_t(g_rng >> 11);
}
double urand() { return (rnd() & 0xFFFFFF) / double(0x1000000); }  // [0,1)

// ---- test-side numbers (from IEEE 754 definitions, independent of the header) -------------------
// A 16-bit IEEE-style value with EBITS exponent bits (f16: 5, bf16: 8) and 15 - EBITS mantissa bits.
static double ref_half(uint16_t h, int ebits) {
  const int mbits = 15 - ebits, emax = (1 << ebits) - 1, bias = emax / 2;
  int s = h >> 15, e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
  double v;
  if (e == 0) v = std::ldexp(double(m), 1 - bias - mbits);
  else if (e == emax) v = m ? NAN : INFINITY;
  else v = std::ldexp(double((1 << mbits) + m), e - bias - mbits);
  return s ? -v : v;
}
static double ref_f16(uint16_t h) { return ref_half(h, 5); }
static double ref_bf16(uint16_t h) { return ref_half(h, 8); }
// Nearest binary16 to x by search over the (monotonic) table of non-negative finite encodings.
static uint16_t ref_to_f16(float xf) {
  double x = xf;
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (a >= 65520.0) return sign | 0x7C00;  // >= max + half ulp (65504 + 16) rounds to inf
  int lo = 0, hi = 0x7BFF;                 // largest encoding with value <= a
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (ref_f16(uint16_t(mid)) <= a) lo = mid;
    else hi = mid - 1;
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

// Every 16-bit pattern of one format: decode against the reference, round trip finite values, NaNs
// come back quiet with their sign. expMask / quietBit: the format's exponent field and quiet bit.
static void check_half_format(const char* N, const char* fmt, double (*ref)(uint16_t), float (*to_f32)(uint16_t),
                              uint16_t (*from_f32)(float), uint16_t expMask, uint16_t quietBit) {
  for (uint32_t h = 0; h < 65536; ++h) {
    double r = ref(uint16_t(h));
    float got = to_f32(uint16_t(h));
    if (std::isnan(r)) {
      CHECK(N, std::isnan(got), "%s_to_f32(%04x) not NaN", fmt, h);
      uint16_t back = from_f32(got);
      CHECK(N, (back & expMask) == expMask && (back & quietBit) && (back & 0x8000) == (h & 0x8000),
            "%s NaN %04x -> %04x not a quiet NaN of same sign", fmt, h, back);
    } else {
      CHECK(N, double(got) == r, "%s_to_f32(%04x) = %.9g, want %.9g", fmt, h, got, r);
      CHECK(N, from_f32(got) == h, "%s round trip %04x -> %04x", fmt, h, from_f32(got));
    }
  }
}

static void test_numbers() {
  const char* N = "numbers";
  int f0 = g_fail;
  check_half_format(N, "f16", ref_f16, P::f16_to_f32, P::f32_to_f16_rn, 0x7C00, 0x200);
  check_half_format(N, "bf16", ref_bf16, P::bf16_to_f32, P::f32_to_bf16_rn, 0x7F80, 0x40);
  // literal spot values (IEEE 754)
  struct {
    float x;
    uint16_t h, b;
  } lit[] = {
      {1.0f, 0x3C00, 0x3F80},
      {-2.0f, 0xC000, 0xC000},
      {65504.0f, 0x7BFF, 0x4780},
      {65520.0f, 0x7C00, 0x4780},
      {65519.99f, 0x7BFF, 0x4780},
      {std::ldexp(1.0f, -24), 0x0001, 0x3380},
      {std::ldexp(1.0f, -25), 0x0000, 0x3300},
      {std::ldexp(1.5f, -25), 0x0001, 0x3340},
      {1.00390625f, 0x3C04, 0x3F80},
      {1.01171875f, 0x3C0C, 0x3F82},
      {-0.0f, 0x8000, 0x8000},
      {3.4028235e38f, 0x7C00, 0x7F80},
      {INFINITY, 0x7C00, 0x7F80},
      {-INFINITY, 0xFC00, 0xFF80},
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
    if (mode == 1) u = (u & ~0x1FFFu) | 0x1000u;                                // f16 tie bit pattern
    if ((u & 0x7F800000u) == 0x7F800000u) continue;
    float x;
    std::memcpy(&x, &u, 4);
    CHECK(N, P::f32_to_f16_rn(x) == ref_to_f16(x), "f32_to_f16_rn(%a) = %04x want %04x", x, P::f32_to_f16_rn(x),
          ref_to_f16(x));
    uint32_t ub = mode == 1 ? ((u & ~0xFFFFu) | 0x8000u) : u;
    float xb;
    std::memcpy(&xb, &ub, 4);
    if ((ub & 0x7F800000u) == 0x7F800000u) continue;
    CHECK(N, P::f32_to_bf16_rn(xb) == ref_to_bf16(xb), "f32_to_bf16_rn(%a) = %04x want %04x", xb, P::f32_to_bf16_rn(xb),
          ref_to_bf16(xb));
  }
  float qn = std::nanf("");
  CHECK(N, (P::f32_to_f16_rn(qn) & 0x7E00) == 0x7E00, "f16 NaN");
  uint32_t snan_bits = 0x7F800001u;  // signalling NaN with a payload only in the low bits
  float snan;
  std::memcpy(&snan, &snan_bits, 4);
  CHECK(N, (P::f32_to_f16_rn(snan) & 0x7E00) == 0x7E00, "sNaN -> f16 must be quiet NaN, got %04x",
        P::f32_to_f16_rn(snan));
  CHECK(N, (P::f32_to_bf16_rn(snan) & 0x7FC0) == 0x7FC0, "sNaN -> bf16 must be quiet NaN, got %04x",
        P::f32_to_bf16_rn(snan));
  report(N, f0);
}

// ---- mma.m16n8k16 fragment tables, transcribed from the ISA figures (9.7.14.5.8) ------------------
static const int kLanes[5] = {0, 1, 4, 5, 31};
static const int kA[5][8][2] = {
    {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}},          // lane 0
    {{0, 2}, {0, 3}, {8, 2}, {8, 3}, {0, 10}, {0, 11}, {8, 10}, {8, 11}},      // lane 1
    {{1, 0}, {1, 1}, {9, 0}, {9, 1}, {1, 8}, {1, 9}, {9, 8}, {9, 9}},          // lane 4
    {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}},      // lane 5
    {{7, 6}, {7, 7}, {15, 6}, {15, 7}, {7, 14}, {7, 15}, {15, 14}, {15, 15}},  // lane 31
};
static const int kB[5][4][2] = {
    // (k, n)
    {{0, 0}, {1, 0}, {8, 0}, {9, 0}},   {{2, 0}, {3, 0}, {10, 0}, {11, 0}}, {{0, 1}, {1, 1}, {8, 1}, {9, 1}},
    {{2, 1}, {3, 1}, {10, 1}, {11, 1}}, {{6, 7}, {7, 7}, {14, 7}, {15, 7}},
};
static const int kC[5][4][2] = {
    // (row, col)
    {{0, 0}, {0, 1}, {8, 0}, {8, 1}}, {{0, 2}, {0, 3}, {8, 2}, {8, 3}},   {{1, 0}, {1, 1}, {9, 0}, {9, 1}},
    {{1, 2}, {1, 3}, {9, 2}, {9, 3}}, {{7, 6}, {7, 7}, {15, 6}, {15, 7}},
};

static void test_mma_tables() {
  const char* N = "mma_m16n8k16_tables";
  int f0 = g_fail;
  for (int li = 0; li < 5; ++li) {
    int l = kLanes[li], r, c;
    for (int i = 0; i < 8; ++i) {
      P::mma_m16n8k16_a_pos(l, i, &r, &c);
      CHECK(N, r == kA[li][i][0] && c == kA[li][i][1], "A lane %d a%d = (%d,%d) want (%d,%d)", l, i, r, c, kA[li][i][0],
            kA[li][i][1]);
    }
    for (int i = 0; i < 4; ++i) {
      P::mma_m16n8k16_b_pos(l, i, &r, &c);
      CHECK(N, r == kB[li][i][0] && c == kB[li][i][1], "B lane %d b%d = (%d,%d) want (%d,%d)", l, i, r, c, kB[li][i][0],
            kB[li][i][1]);
      P::mma_m16n8k16_c_pos(l, i, &r, &c);
      CHECK(N, r == kC[li][i][0] && c == kC[li][i][1], "C lane %d c%d = (%d,%d) want (%d,%d)", l, i, r, c, kC[li][i][0],
            kC[li][i][1]);
    }
  }
  // each table covers its matrix exactly once
  int ca[16][16] = {}, cb[16][8] = {}, cc[16][8] = {};
  for (int l = 0; l < 32; ++l) {
    int r, c;
    for (int i = 0; i < 8; ++i) {
      P::mma_m16n8k16_a_pos(l, i, &r, &c);
      if (r >= 0 && r < 16 && c >= 0 && c < 16) ca[r][c]++;
    }
    for (int i = 0; i < 4; ++i) {
      P::mma_m16n8k16_b_pos(l, i, &r, &c);
      if (r >= 0 && r < 16 && c >= 0 && c < 8) cb[r][c]++;
    }
    for (int i = 0; i < 4; ++i) {
      P::mma_m16n8k16_c_pos(l, i, &r, &c);
      if (r >= 0 && r < 16 && c >= 0 && c < 8) cc[r][c]++;
    }
  }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      CHECK(N, ca[r][c] == 1, "A element (%d,%d) covered %d times", r, c, ca[r][c]);
      if (c < 8)
        CHECK(N, cb[r][c] == 1 && cc[r][c] == 1, "B/C element (%d,%d) covered %d/%d times", r, c, cb[r][c], cc[r][c]);
    }
  report(N, f0);
}

uint16_t rand_half(bool bf16, double* val) {
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
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k) Ah[r][k] = rand_half(bf16, &A[r][k]);
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 8; ++n) Bh[k][n] = rand_half(bf16, &B[k][n]);
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
        for (int k = 0; k < 16; ++k) {
          ref += A[row][k] * B[k][col];
          mag += std::fabs(A[row][k] * B[k][col]);
        }
        CHECK(N.c_str(), std::fabs(double(d[l][i]) - ref) <= 1e-6 * mag + 1e-7, "trial %d lane %d d%d = %.9g want %.9g",
              trial, l, i, d[l][i], ref);
      }
    }
  }
  report(N, f0);
}

// ---- ldmatrix ------------------------------------------------------------------------------------
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
      for (int l = 0; l < 8 * num; ++l)
        for (int i = 0; i < 16; ++i) want.insert(row_off[l] + i);
      CHECK(N.c_str(), got == want && tot == want.size() && ra.wr.empty(), "reported reads differ (%zu vs %zu bytes)",
            tot, want.size());
      // errors: misaligned and out-of-window row addresses
      uint32_t bad[32];
      std::memcpy(bad, row_off, sizeof bad);
      bad[8 * num - 1] += 8;
      CHECK(N.c_str(), !P::ldmatrix(num, trans, smem.data(), 4096, bad, out, nullptr).empty(),
            "misaligned row accepted");
      std::memcpy(bad, row_off, sizeof bad);
      bad[0] = 4096 - 8 + 8;  // 16-aligned but past the window
      CHECK(N.c_str(), !P::ldmatrix(num, trans, smem.data(), 4096, bad, out, nullptr).empty(),
            "out-of-window row accepted");
      report(N, f0);
    }
  }
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
  test_wgmma_f8();
  test_tma();
  test_tcgen05();
  test_tcgen05_mx();
  if (g_fail) {
    std::printf("FAILED: %d check(s); first failing group: %s\n", g_fail, g_first.c_str());
    return 1;
  }
  std::printf("ALL OK\n");
  return 0;
}
