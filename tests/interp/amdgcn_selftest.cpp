// amdgcn_selftest.cpp -- checks the AMD data semantics of the interpreter's runtime (src/heddle/interp/rt/
// hrt_amdgcn.h) on the host, without heddle: entries of the published register-layout tables of
// v_mfma_f32_16x16x16_f16 (AMD matrix instruction calculator, CDNA3) and of the GFX12 wave32
// v_wmma_f32_16x16x16_f16 (RDNA4 ISA, "WMMA" VGPR layout figures), that each layout is a bijection,
// the arithmetic D = A*B + C against a float64 product, the buffer-resource decode and raw-buffer range
// rule, and the s_waitcnt field decode. Prints "ok <name>" per check, "FAIL <name>: ..." otherwise.
#include "heddle/interp/rt/hrt_amdgcn.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <string>

namespace A = heddle_rt::amdgcn;
namespace P = heddle_rt::ptx;

static int g_fail = 0;

static bool check(const std::string& name, bool cond, const std::string& msg) {
  if (!cond) {
    std::printf("FAIL %s: %s\n", name.c_str(), msg.c_str());
    ++g_fail;
  }
  return cond;
}

static void report(const std::string& name, int before) {
  if (g_fail == before) std::printf("ok %s\n", name.c_str());
}

static uint32_t g_state = 12345;
static uint32_t rnd() { return g_state = g_state * 1664525u + 1013904223u; }

// (matrix entry, lane, VGPR, bit range) as the tables print them; VGPR = item / 2 for 16-bit operands
struct Entry {
  int row, col, lane, vgpr, lo;
};

template <class F>
static void table(const char* name, F slot, const Entry* es, int n, bool half) {
  const int before = g_fail;
  for (int i = 0; i < n; ++i) {
    const Entry& e = es[i];
    A::Slot s = slot(e.row, e.col);
    const int vgpr = half ? s.item / 2 : s.item, lo = half ? 16 * (s.item % 2) : 0;
    char b[200];
    std::snprintf(b, sizeof b, "[%d][%d]: lane %d v%d[%d] (want lane %d v%d[%d])", e.row, e.col, s.lane, vgpr, lo,
                  e.lane, e.vgpr, e.lo);
    check(name, s.lane == e.lane && vgpr == e.vgpr && lo == e.lo, b);
  }
  report(name, before);
}

template <class F>
static void bijection(const char* name, F slot, int lanes, int items) {
  const int before = g_fail;
  std::set<std::pair<int, int>> seen;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      A::Slot s = slot(r, c);
      check(name, s.lane >= 0 && s.lane < lanes && s.item >= 0 && s.item < items, "slot out of range");
      check(name, seen.insert({s.lane, s.item}).second, "two entries share a slot");
    }
  check(name, (int)seen.size() == lanes * items, "the layout does not fill every slot");
  report(name, before);
}

static uint16_t rand_half(bool bf16, double* v) {
  const int m = (int)(rnd() % 64) - 32;  // exact in both formats: m / 16
  const float x = m / 16.0f;
  *v = x;
  return bf16 ? P::f32_to_bf16_rn(x) : P::f32_to_f16_rn(x);
}

template <int LANES, int ITEMS, class Run, class SA, class SB, class SD>
static void arithmetic(const char* name, bool bf16, Run run, SA sa, SB sb, SD sd) {
  const int before = g_fail;
  uint16_t a[LANES][ITEMS], b[LANES][ITEMS];
  float c[LANES][ITEMS], d[LANES][ITEMS];
  double Am[16][16], Bm[16][16], Cm[16][16];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) {
      A::Slot s = sa(i, k);
      a[s.lane][s.item] = rand_half(bf16, &Am[i][k]);
      A::Slot t = sb(i, k);  // B[i][k] as (k-index i, column k)
      b[t.lane][t.item] = rand_half(bf16, &Bm[i][k]);
      A::Slot u = sd(i, k);
      Cm[i][k] = (int)(rnd() % 17) - 8;
      c[u.lane][u.item] = (float)Cm[i][k];
    }
  run(bf16, a, b, c, d);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double want = Cm[i][j];
      for (int k = 0; k < 16; ++k) want += Am[i][k] * Bm[k][j];
      A::Slot s = sd(i, j);
      char m[160];
      std::snprintf(m, sizeof m, "D[%d][%d] = %g, want %g", i, j, d[s.lane][s.item], want);
      check(name, std::fabs(d[s.lane][s.item] - want) < 1e-6, m);
    }
  report(name, before);
}

int main() {
  // v_mfma_f32_16x16x16_f16, CDNA3 (calculator --register-layout): A[i][k] in lane i + 16*floor(k/4),
  // v[floor((k%4)/2)] bits [16*(k%2)+15 : 16*(k%2)]; D[i][j] in lane j + 16*floor(i/4), v[i%4]
  static const Entry mfma_a[] = {{0, 0, 0, 0, 0},    {0, 1, 0, 0, 16},   {0, 2, 0, 1, 0},  {0, 5, 16, 0, 16},
                                 {3, 15, 51, 1, 16}, {15, 10, 47, 1, 0}, {9, 7, 25, 1, 16}};
  static const Entry mfma_b[] = {{0, 0, 0, 0, 0}, {4, 0, 16, 0, 0}, {13, 2, 50, 0, 16}, {7, 15, 31, 1, 16}};
  static const Entry mfma_d[] = {
      {0, 0, 0, 0, 0}, {5, 3, 19, 1, 0}, {15, 15, 63, 3, 0}, {12, 7, 55, 0, 0}, {3, 9, 9, 3, 0}};
  table("mfma16_a_table", A::mfma16_a, mfma_a, sizeof mfma_a / sizeof *mfma_a, true);
  table("mfma16_b_table", A::mfma16_b, mfma_b, sizeof mfma_b / sizeof *mfma_b, true);
  table("mfma16_d_table", A::mfma16_d, mfma_d, sizeof mfma_d / sizeof *mfma_d, false);
  // v_wmma_f32_16x16x16_f16, GFX12 wave32: lanes 0-15 hold K 0-3 (v0, v1) and 8-11 (v2, v3) of row
  // M = lane, lanes 16-31 K 4-7 and 12-15; D: lanes 0-15 rows 0-7 (v0..v7), lanes 16-31 rows 8-15
  static const Entry wmma_a[] = {{0, 0, 0, 0, 0},    {2, 5, 18, 0, 16}, {7, 9, 7, 2, 16},
                                 {15, 14, 31, 3, 0}, {4, 3, 4, 1, 16},  {11, 12, 27, 2, 0}};
  static const Entry wmma_b[] = {{0, 0, 0, 0, 0}, {6, 1, 17, 1, 0}, {11, 14, 14, 3, 16}};
  static const Entry wmma_d[] = {{0, 0, 0, 0, 0}, {9, 4, 20, 1, 0}, {7, 15, 15, 7, 0}, {15, 0, 16, 7, 0}};
  table("wmma16_a_table", A::wmma16_a, wmma_a, sizeof wmma_a / sizeof *wmma_a, true);
  table("wmma16_b_table", A::wmma16_b, wmma_b, sizeof wmma_b / sizeof *wmma_b, true);
  table("wmma16_d_table", A::wmma16_d, wmma_d, sizeof wmma_d / sizeof *wmma_d, false);

  bijection("mfma16_layouts_bijective_a", A::mfma16_a, 64, 4);
  bijection("mfma16_layouts_bijective_b", A::mfma16_b, 64, 4);
  bijection("mfma16_layouts_bijective_d", A::mfma16_d, 64, 4);
  bijection("wmma16_layouts_bijective_a", A::wmma16_a, 32, 8);
  bijection("wmma16_layouts_bijective_b", A::wmma16_b, 32, 8);
  bijection("wmma16_layouts_bijective_d", A::wmma16_d, 32, 8);

  for (bool bf16 : {false, true}) {
    arithmetic<64, 4>(bf16 ? "mfma16_bf16" : "mfma16_f16", bf16, A::mfma_f32_16x16x16, A::mfma16_a, A::mfma16_b,
                      A::mfma16_d);
    arithmetic<32, 8>(bf16 ? "wmma16_bf16" : "wmma16_f16", bf16, A::wmma_f32_16x16x16_w32, A::wmma16_a, A::wmma16_b,
                      A::wmma16_d);
  }

  {  // V#: base 0x0000_7f12_3456_7890, stride 0, num_records 0x80000000, dword3 32-bit data format
    const int before = g_fail;
    const int32_t r[4] = {(int32_t)0x34567890u, 0x7f12, (int32_t)0x80000000u, 0x00020000};
    A::BufferRsrc b = A::decode_rsrc(r);
    check("buffer_rsrc", b.base == 0x7f1234567890ull && b.stride == 0 && b.num_records == 0x80000000u, "decode");
    const int32_t r2[4] = {0, (int32_t)(0x0010u << 16 | 0x1u), 256, 0};
    A::BufferRsrc b2 = A::decode_rsrc(r2);
    check("buffer_rsrc", b2.base == 0x100000000ull && b2.stride == 16, "stride field");
    uint64_t a = 0;
    check("buffer_rsrc", A::raw_buffer_address(b2, 252, 0, 0, 4, &a) && a == 0x100000000ull + 252,
          "last dword in range");
    check("buffer_rsrc", !A::raw_buffer_address(b2, 256, 0, 0, 4, &a), "offset == num_records reads zero");
    check("buffer_rsrc", !A::raw_buffer_address(b, 0x80000000u, 0, 0, 4, &a),
          "heddle's out-of-range offset reads zero");
    report("buffer_rsrc", before);
  }
  {  // s_waitcnt simm16 (GFX9): vmcnt 16 with expcnt 7 and lgkmcnt 15 (no wait) is 0x4f70; vmcnt 63 0xcf7f
    const int before = g_fail;
    check("waitcnt_fields",
          A::waitcnt_vmcnt(0x4f70) == 16 && A::waitcnt_lgkmcnt(0x4f70) == 15 && A::waitcnt_expcnt(0x4f70) == 7,
          "0x4f70");
    check("waitcnt_fields",
          A::waitcnt_vmcnt(0xcf7f) == 63 && A::waitcnt_vmcnt(0x0f70) == 0 && A::waitcnt_vmcnt(0x0f7f) == 15,
          "vmcnt high bits");
    report("waitcnt_fields", before);
  }
  return g_fail ? 1 : 0;
}
