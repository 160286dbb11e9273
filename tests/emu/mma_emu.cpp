// Host-emulation harness for the heddle sm_80 matmul runtime (heddle_copy.cuh, heddle_mma_sm80.cuh).
//
// Compiled by g++ -std=c++17 -DHEDDLE_HOST_EMULATION with warp_emu.cpp (see tests/test_device_emulation.py).
//   mma_emu selftest
//       f16/bf16 conversions (every f16 value and a binary32 sweep against the compiler's
//       _Float16 / an exact double reference), SmemTile swizzle (bijection, 16-byte chunks kept
//       contiguous and aligned, ldmatrix phases conflict-free) for many tile shapes, activations.
//   mma_emu expect-error SCENARIO
//       a deliberately wrong use (divergent or non-uniform collective, misaligned ldmatrix,
//       out-of-bounds or oversized cp.async); the emulator must abort with exit code 2.
//   mma_emu run DTYPE ALAYOUT BLAYOUT CFG COPY M N K [SEED]
//       DTYPE f16|bf16, ALAYOUT k|m, BLAYOUT k|n, CFG e.g. 64x64x32_2x2, COPY async8|async4|
//       async2|sync8|sync1. Runs a whole ragged GEMM C = A*B through the device code: every CTA of
//       the grid, a 3-stage cp.async pipeline (2 stages for sync copies), copy_tile_* for every
//       thread, MmaSm80::step for every warp (32 lockstep lanes), results through row_of/col_of,
//       and compares with a double reference. Also checks each stage element is written exactly
//       once per slab with the right value (zero outside the valid box), nothing outside the
//       stages is written, padding (NaN) in global memory never reaches the result, accumulators
//       outside the problem are exactly 0, no bank conflicts, and the expected instruction counts.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "heddle/heddle_math.cuh"
#include "heddle/heddle_mma_sm80.cuh"
#include "warp_emu.h"

using namespace heddle;

static long g_fail = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      if (g_fail < 20) {                                   \
        std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        std::fprintf(stderr, __VA_ARGS__);                 \
        std::fprintf(stderr, "\n");                        \
      }                                                    \
      ++g_fail;                                            \
    }                                                      \
  } while (0)

struct Rng {
  std::uint64_t s;
  std::uint32_t next() {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (std::uint32_t)(s >> 16);
  }
  float uniform() { return (float)(next() & 0xffffff) / 8388608.0f - 1.0f; }  // [-1, 1)
};

static unsigned fbits(float x) { unsigned u; std::memcpy(&u, &x, 4); return u; }
static float bitsf(unsigned u) { float x; std::memcpy(&x, &u, 4); return x; }

// ---- selftest ---------------------------------------------------------------------------------

// Exact RNE to binary16 through double: the value f16(x) must take (inf past 65504 + half ulp).
static double ref_f16_value(float x) {
  double a = std::fabs((double)x);
  if (a == 0) return x;
  int ex;
  std::frexp(a, &ex);                       // a = m * 2^ex, m in [0.5, 1)
  int e = ex - 1 < -14 ? -14 : ex - 1;      // exponent of the binade (subnormals share -14)
  double ulp = std::ldexp(1.0, e - 10);
  double v = std::nearbyint(a / ulp) * ulp;  // default rounding: ties to even
  if (v >= 65536.0) v = INFINITY;
  return x < 0 ? -v : v;
}

#ifdef __FLT16_MAX__
static bool have_compiler_f16() { return true; }
static unsigned short compiler_f16(float x) {
  _Float16 h = (_Float16)x;
  unsigned short b;
  std::memcpy(&b, &h, 2);
  return b;
}
static float compiler_f16_to_float(unsigned short b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return (float)h;
}
#else
static bool have_compiler_f16() { return false; }
static unsigned short compiler_f16(float) { return 0; }
static float compiler_f16_to_float(unsigned short) { return 0; }
#endif

static unsigned short ref_bf16(float x) {  // exact RNE via double, overflow as if unbounded
  unsigned u = fbits(x);
  if (std::isnan(x)) return 0x7fc0;
  if (std::isinf(x)) return (unsigned short)(u >> 16);
  unsigned short lo = (unsigned short)(u >> 16);
  double vlo = (double)bitsf((unsigned)lo << 16);
  int e = (int)((lo >> 7) & 0xff);
  double ulp = std::ldexp(1.0, (e ? e : 1) - 127 - 7);
  double d = std::fabs((double)x - vlo);
  if (d < ulp / 2 || (d == ulp / 2 && !(lo & 1))) return lo;
  return (unsigned short)(lo + 1);
}

static void selftest_conversions() {
  const bool cf16 = have_compiler_f16();
  for (unsigned h = 0; h < 65536; ++h) {
    unsigned short hb = (unsigned short)h;
    float got = to_float(f16{hb});
    bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (cf16) {
      float ref = compiler_f16_to_float(hb);
      CHECK((std::isnan(ref) && std::isnan(got)) || fbits(ref) == fbits(got), "to_float(f16 %04x)", h);
    }
    CHECK(is_nan == std::isnan(got), "to_float(f16 %04x) NaN-ness", h);
    if (!is_nan) CHECK(from_float<f16>(got).bits == hb, "f16 round trip %04x", h);
    CHECK(fbits(to_float(bf16{hb})) == (h << 16), "to_float(bf16 %04x)", h);
  }
  auto one = [cf16](unsigned u) {
    float x = bitsf(u);
    unsigned short g16 = from_float<f16>(x).bits;
    bool nan16 = (g16 & 0x7c00) == 0x7c00 && (g16 & 0x3ff);
    if (std::isnan(x)) {
      CHECK(nan16, "from_float<f16>(NaN %08x) = %04x", u, g16);
    } else {
      double want = ref_f16_value(x), gotv = to_float(f16{g16});
      CHECK(gotv == want && std::signbit(gotv) == std::signbit(want), "from_float<f16>(%08x) = %04x (%.9g), want %.9g", u, g16, gotv, want);
      if (cf16) CHECK(g16 == compiler_f16(x), "from_float<f16>(%08x) = %04x, _Float16 gives %04x", u, g16, compiler_f16(x));
    }
    unsigned short gb = from_float<bf16>(x).bits, rb = ref_bf16(x);
    bool nanb = (gb & 0x7f80) == 0x7f80 && (gb & 0x7f);
    CHECK(std::isnan(x) ? nanb : gb == rb, "from_float<bf16>(%08x): %04x vs %04x", u, gb, rb);
  };
  for (unsigned long long u = 0; u < (1ull << 32); u += 1021) one((unsigned)u);
  // every tie / near-tie around each f16 and bf16 value (and its negation)
  for (unsigned h = 0; h < 65536; ++h) {
    unsigned u = fbits(to_float(f16{(unsigned short)h}));
    for (int d = -2; d <= 2; ++d) one(u + 0x1000 + d), one(u - 0x1000 + d);
    unsigned b = h << 16;
    for (int d = -2; d <= 2; ++d) one(b + 0x8000 + d), one(b + d);
  }
  // subnormal f16 ties: k * 2^-25 for odd k are exact ties between neighbours
  for (int k = 1; k < 4096; k += 2) one(fbits((float)std::ldexp((double)k, -25)));
  CHECK(from_float<f16>(65519.0f).bits == 0x7bff && from_float<f16>(65520.0f).bits == 0x7c00, "f16 overflow");
  CHECK(fbits(from_float<float>(1.25f)) == fbits(1.25f) && to_float(2.5f) == 2.5f, "float identity");
}

template <int ROWS, int COLS, typename T>
static void selftest_tile() {
  using Tile = SmemTile<ROWS, COLS, T>;
  std::vector<int> seen(Tile::kElems, 0);
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) {
      int o = Tile::offset(r, c);
      CHECK(o >= 0 && o < Tile::kElems, "SmemTile<%d,%d> offset(%d,%d)=%d out of range", ROWS, COLS, r, c, o);
      if (o < 0 || o >= Tile::kElems) continue;
      ++seen[o];
      if (c % Tile::kEpc) CHECK(o == Tile::offset(r, c - 1) + 1, "chunk not contiguous at (%d,%d)", r, c);
      else CHECK(o % Tile::kEpc == 0, "chunk not 16-byte aligned at (%d,%d)", r, c);
    }
  for (int o = 0; o < Tile::kElems; ++o) CHECK(seen[o] == 1, "SmemTile<%d,%d>: element %d hit %d times", ROWS, COLS, o, seen[o]);
  // ldmatrix phases: 8 consecutive rows (aligned to 8) at one chunk hit 8 distinct bank groups.
  for (int r0 = 0; r0 + 8 <= ROWS; r0 += 8)
    for (int c = 0; c < COLS; c += Tile::kEpc) {
      unsigned mask = 0;
      for (int i = 0; i < 8; ++i) mask |= 1u << ((Tile::offset(r0 + i, c) * (int)sizeof(T) / 16) % 8);
      CHECK(mask == 0xffu, "SmemTile<%d,%d>: ldmatrix phase rows %d.. chunk %d conflicts", ROWS, COLS, r0, c);
    }
}

static void selftest_math() {
  const float xs[] = {-30.f, -6.f, -2.5f, -1.f, -0.3f, 0.f, 1e-3f, 0.5f, 1.f, 2.f, 7.f, 30.f};
  for (float x : xs) {
    double d = x;
    auto close = [](double got, double ref) { return std::fabs(got - ref) <= 2e-6 * (1 + std::fabs(ref)); };
    CHECK(close(relu(x), d < 0 ? 0 : d), "relu(%g)", x);
    CHECK(close(gelu_erf(x), 0.5 * d * (1 + std::erf(d / std::sqrt(2.0)))), "gelu_erf(%g)", x);
    CHECK(close(gelu_tanh(x), 0.5 * d * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (d + 0.044715 * d * d * d)))), "gelu_tanh(%g)", x);
    CHECK(close(sigmoid(x), 1 / (1 + std::exp(-d))), "sigmoid(%g)", x);
    CHECK(close(silu(x), d / (1 + std::exp(-d))), "silu(%g)", x);
  }
  CHECK(std::isnan(relu(NAN)), "relu(NaN) must be NaN");
  CHECK(silu(-200.f) == 0.f && !std::isnan(silu(-200.f)) && sigmoid(-200.f) == 0.f && sigmoid(200.f) == 1.f, "saturation");
}

static int selftest() {
  selftest_conversions();
  selftest_tile<64, 32, f16>();  selftest_tile<32, 64, f16>();  selftest_tile<128, 32, bf16>();
  selftest_tile<32, 128, f16>(); selftest_tile<256, 64, f16>(); selftest_tile<64, 256, bf16>();
  selftest_tile<128, 64, f16>(); selftest_tile<64, 128, f16>(); selftest_tile<16, 64, f16>();
  selftest_tile<16, 32, f16>();  selftest_tile<32, 16, f16>();  selftest_tile<192, 16, f16>();
  selftest_tile<16, 192, f16>(); selftest_tile<64, 16, f16>();  selftest_tile<16, 256, f16>();
  selftest_tile<8, 64, f16>();   selftest_tile<32, 32, float>(); selftest_tile<64, 8, f16>();
  selftest_math();
  std::printf("%s selftest (failures: %ld)\n", g_fail ? "FAIL" : "PASS", g_fail);
  return g_fail ? 1 : 0;
}

// ---- GEMM through the device code -------------------------------------------------------------

template <typename T> struct TypeInfo;
template <> struct TypeInfo<f16> { static constexpr unsigned short kNaN = 0x7e00; static constexpr const char* name = "f16"; };
template <> struct TypeInfo<bf16> { static constexpr unsigned short kNaN = 0x7fc0; static constexpr const char* name = "bf16"; };

// A row-major storage matrix (rows x cols valid, ld >= cols, padding = NaN), 128-byte aligned.
template <typename T>
struct GMat {
  int rows, cols;
  long long ld;
  T* p;
  GMat(int r, int c, int vec, Rng& rng) : rows(r), cols(c) {
    ld = (c + vec - 1) / vec * vec + vec;  // always some padding
    std::size_t bytes = ((std::size_t)r * ld * sizeof(T) + 127) / 128 * 128;
    p = static_cast<T*>(std::aligned_alloc(128, bytes));
    for (long long i = 0; i < r * ld; ++i) {
      bool pad = i % ld >= c;
      p[i] = pad ? T{TypeInfo<T>::kNaN} : from_float<T>(rng.uniform());
    }
    emu::add_global(p, (std::size_t)r * ld * sizeof(T));
  }
  ~GMat() { std::free(p); }
  unsigned short at(int r, int c) const { return p[r * ld + c].bits; }
};

template <int ROWS, int COLS, typename T>
static void check_stage(const T* stage, const GMat<T>& g, int row0, int col0, const char* what) {
  using Tile = SmemTile<ROWS, COLS, T>;
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) {
      const T* e = stage + Tile::offset(r, c);
      bool in = row0 + r < g.rows && col0 + c < g.cols;
      unsigned short want = in ? g.at(row0 + r, col0 + c) : 0;
      CHECK(e->bits == want, "%s stage (%d,%d) [global (%d,%d)]: %04x, want %04x", what, r, c, row0 + r, col0 + c, e->bits, want);
      unsigned w0 = emu::writes_at(e), w1 = emu::writes_at(reinterpret_cast<const char*>(e) + 1);
      CHECK(w0 == 1 && w1 == 1, "%s stage (%d,%d) written %u times", what, r, c, w0);
    }
  emu::reset_writes(stage, Tile::kBytes);
}

template <int BM, int BN, int BK, int WGM, int WGN, bool AK, bool BKM, typename T, bool ASYNC, int VEC>
static int run_case(int M, int N, int K, std::uint64_t seed, const char* label) {
  using Mma = MmaSm80<BM, BN, BK, WGM, WGN, AK, BKM, T>;
  using TA = typename Mma::TileA;
  using TB = typename Mma::TileB;
  constexpr int THREADS = Mma::kThreads, WARPS = Mma::kWarps, S = ASYNC ? 3 : 2;
  constexpr int RA = AK ? BM : BK, CA = AK ? BK : BM, RB = BKM ? BN : BK, CB = BKM ? BK : BN;
  Rng rng{seed * 0x9e3779b97f4a7c15ull + 1};
  emu::clear_globals();
  emu::reset_stats();
  GMat<T> A(AK ? M : K, AK ? K : M, VEC, rng), B(BKM ? N : K, BKM ? K : N, VEC, rng);
  auto a_at = [&](int m, int k) { return (double)to_float(T{AK ? A.at(m, k) : A.at(k, m)}); };
  auto b_at = [&](int k, int n) { return (double)to_float(T{BKM ? B.at(n, k) : B.at(k, n)}); };

  const std::size_t arena = 128 + S * TA::kBytes + 128 + S * TB::kBytes + 128;
  char* smem = static_cast<char*>(std::aligned_alloc(128, arena));
  std::memset(smem, 0xAB, arena);
  emu::set_shared_arena(smem, arena);
  auto sA = [&](int s) { return reinterpret_cast<T*>(smem + 128 + s * TA::kBytes); };
  auto sB = [&](int s) { return reinterpret_cast<T*>(smem + 256 + S * TA::kBytes + s * TB::kBytes); };

  std::vector<float> C((std::size_t)M * N, 0.f);
  std::vector<int> cw((std::size_t)M * N, 0);
  const int nk = (K + BK - 1) / BK;
  int ctas = 0;
  for (int m0 = 0; m0 < M; m0 += BM)
    for (int n0 = 0; n0 < N; n0 += BN, ++ctas) {
      std::vector<Mma> fr(THREADS);
      for (auto& f : fr) f.zero();
      auto issue = [&](int kt) {  // every thread copies slab kt into stage kt % S
        for (int tid = 0; tid < THREADS; ++tid) {
          emu::set_thread(tid, THREADS);
          if (kt < nk) {
            T* a = sA(kt % S); T* b = sB(kt % S);
            int k0 = kt * BK;
            if constexpr (ASYNC) {
              copy_tile_async<RA, CA, VEC, THREADS>(a, A.p, A.ld, AK ? m0 : k0, AK ? k0 : m0, A.rows, A.cols, tid);
              copy_tile_async<RB, CB, VEC, THREADS>(b, B.p, B.ld, BKM ? n0 : k0, BKM ? k0 : n0, B.rows, B.cols, tid);
            } else {
              copy_tile_sync<RA, CA, VEC, THREADS>(a, A.p, A.ld, AK ? m0 : k0, AK ? k0 : m0, A.rows, A.cols, tid);
              copy_tile_sync<RB, CB, VEC, THREADS>(b, B.p, B.ld, BKM ? n0 : k0, BKM ? k0 : n0, B.rows, B.cols, tid);
            }
          }
          if (ASYNC) cp_async_commit();  // empty groups past the end keep the count uniform
        }
        emu::check_store_conflicts();
      };
      auto barrier = [&] { for (int tid = 0; tid < THREADS; ++tid) { emu::set_thread(tid, THREADS); block_sync(); } };
      if (ASYNC)
        for (int kt = 0; kt < S - 1; ++kt) issue(kt);
      for (int kt = 0; kt < nk; ++kt) {
        if (ASYNC) {
          for (int tid = 0; tid < THREADS; ++tid) { emu::set_thread(tid, THREADS); cp_async_wait<S - 2>(); }
        } else {
          issue(kt);
        }
        barrier();
        const int s = kt % S, k0 = kt * BK;
        check_stage<RA, CA, T>(sA(s), A, AK ? m0 : k0, AK ? k0 : m0, "A");
        check_stage<RB, CB, T>(sB(s), B, BKM ? n0 : k0, BKM ? k0 : n0, "B");
        if (ASYNC) issue(kt + S - 1);  // into stage (kt-1)%S, released by the barrier above
        for (int w = 0; w < WARPS; ++w)
          emu::run_warp([&](int lane) { fr[w * 32 + lane].step(sA(s), sB(s), w, lane); });
        barrier();
      }
      if (ASYNC)
        for (int tid = 0; tid < THREADS; ++tid) { emu::set_thread(tid, THREADS); cp_async_wait<0>(); }
      CHECK(emu::pending_copies() == 0, "cp.async copies never waited for");
      for (int w = 0; w < WARPS; ++w)
        for (int lane = 0; lane < 32; ++lane)
          for (int fm = 0; fm < Mma::FM; ++fm)
            for (int fn = 0; fn < Mma::FN; ++fn)
              for (int r = 0; r < 4; ++r) {
                int row = m0 + Mma::row_of(w, lane, fm, r), col = n0 + Mma::col_of(w, lane, fn, r);
                CHECK(row >= m0 && row < m0 + BM && col >= n0 && col < n0 + BN, "row_of/col_of outside the CTA tile");
                float v = fr[w * 32 + lane].acc[fm][fn][r];
                if (row < M && col < N) { C[(std::size_t)row * N + col] = v; ++cw[(std::size_t)row * N + col]; }
                else CHECK(v == 0.0f, "accumulator outside the problem (%d,%d) = %g, want 0", row, col, v);
              }
    }
  // nothing outside the stages was written (guards), stage bytes were checked per slab
  for (std::size_t i = 0; i < arena; ++i) CHECK(emu::writes_at(smem + i) == 0, "stray shared write at byte %zu", i);

  double max_err = 0, max_rel = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) { double p = a_at(m, k) * b_at(k, n); ref += p; mag += std::fabs(p); }
      double got = C[(std::size_t)m * N + n], err = std::fabs(got - ref);
      CHECK(cw[(std::size_t)m * N + n] == 1, "C(%d,%d) written %d times", m, n, cw[(std::size_t)m * N + n]);
      CHECK(err <= 1e-5 * mag + 1e-6, "C(%d,%d) = %.8g, reference %.8g (|a||b| sum %.4g)", m, n, got, ref, mag);
      max_err = err > max_err ? err : max_err;
      if (mag > 0) max_rel = err / mag > max_rel ? err / mag : max_rel;
    }

  const emu::Stats& st = emu::stats();
  const long per_slab = (long)ctas * nk * WARPS * (BK / 16);
  CHECK(st.mma == per_slab * Mma::FM * Mma::FN, "mma count %ld", st.mma);
  CHECK(st.mma_bf16 == (TypeInfo<T>::kNaN == 0x7fc0 ? st.mma : 0), "mma dtype");
  CHECK(st.ldmatrix == per_slab * (Mma::FM + (Mma::FN + 1) / 2), "ldmatrix count %ld", st.ldmatrix);
  CHECK(st.ldmatrix_x2 == per_slab * (Mma::FN % 2), "ldmatrix.x2 count %ld", st.ldmatrix_x2);
  CHECK(st.ldmatrix_trans == per_slab * ((AK ? 0 : Mma::FM) + (BKM ? 0 : (Mma::FN + 1) / 2)), "ldmatrix.trans count");
  CHECK(st.ldmatrix_conflicts == 0, "%ld ldmatrix bank conflicts", st.ldmatrix_conflicts);
  CHECK(st.store_conflicts == 0, "%ld shared store bank conflicts (16-byte copies)", st.store_conflicts);
  const long chunks = (long)ctas * nk * (RA * CA + RB * CB) / VEC;
  if (ASYNC) CHECK(st.cp_async[VEC * sizeof(T)] == chunks && st.cp_async_cg == (VEC * sizeof(T) == 16 ? chunks : 0), "cp.async count");
  std::printf("%s %s A=%s B=%s cfg=%s copy=%s%d M=%d N=%d K=%d ctas=%d slabs=%d: max_abs_err=%.3g max_rel=%.3g "
              "mma=%ld ldmatrix=%ld (trans %ld, x2 %ld) ldm_conflicts=%ld store_conflicts=%ld cp.async=%ld sync=%ld+%ld zero\n",
              g_fail ? "FAIL" : "PASS", TypeInfo<T>::name, AK ? "k" : "m", BKM ? "k" : "n", label, ASYNC ? "async" : "sync", VEC,
              M, N, K, ctas, nk, max_err, max_rel, st.mma, st.ldmatrix, st.ldmatrix_trans, st.ldmatrix_x2, st.ldmatrix_conflicts,
              st.store_conflicts, st.cp_async[4] + st.cp_async[8] + st.cp_async[16], st.sync_copies, st.zero_fills);
  std::free(smem);
  return g_fail ? 1 : 0;
}

// ---- emulator guard rails: each scenario must make the emulator abort (exit code 2) -------------

static int expect_error(const std::string& kind) {
  alignas(128) static char smem[4096];
  alignas(16) static f16 g[64];
  emu::set_shared_arena(smem, sizeof smem);
  emu::add_global(g, 120);  // the last 8 bytes of g are not part of the "global" buffer
  emu::set_thread(0, 32);
  if (kind == "divergence")  // half the warp skips a collective
    emu::run_warp([&](int lane) {
      unsigned r[4];
      if (lane < 16) detail::ldmatrix<4, false>(r, detail::smem_addr(smem + 16 * lane));
    });
  else if (kind == "nonuniform")  // lanes disagree on .trans
    emu::run_warp([&](int lane) {
      unsigned r[4];
      if (lane == 3) detail::ldmatrix<4, true>(r, detail::smem_addr(smem + 16 * lane));
      else detail::ldmatrix<4, false>(r, detail::smem_addr(smem + 16 * lane));
    });
  else if (kind == "ldmatrix_misaligned")
    emu::run_warp([&](int lane) {
      unsigned r[4];
      detail::ldmatrix<4, false>(r, detail::smem_addr(smem + 16 * lane + 2));
    });
  else if (kind == "cp_async_oob")  // reads 16 bytes starting 8 bytes before the buffer's end
    detail::cp_async<16>(smem, g + 56, 16);
  else if (kind == "cp_async_src_size")
    detail::cp_async<8>(smem, g, 12);
  else if (kind == "copy_tile_oob")  // claims more valid rows than the buffer holds (tid 15: row 15)
    copy_tile_async<16, 8, 8, 32, f16>(reinterpret_cast<f16*>(smem), g, 8, 0, 0, 16, 8, 15);
  else {
    std::fprintf(stderr, "unknown scenario %s\n", kind.c_str());
    return 3;
  }
  std::printf("scenario %s was NOT caught\n", kind.c_str());
  return 0;
}

// ---- dispatch ---------------------------------------------------------------------------------

struct Args { std::string dtype, a, b, cfg, copy; int M, N, K; std::uint64_t seed; };

template <int BM, int BN, int BK, int WGM, int WGN, bool AK, bool BKM, typename T>
static int by_copy(const Args& x) {
  const char* l = x.cfg.c_str();
  if (x.copy == "async8") return run_case<BM, BN, BK, WGM, WGN, AK, BKM, T, true, 8>(x.M, x.N, x.K, x.seed, l);
  if (x.copy == "async4") return run_case<BM, BN, BK, WGM, WGN, AK, BKM, T, true, 4>(x.M, x.N, x.K, x.seed, l);
  if (x.copy == "async2") return run_case<BM, BN, BK, WGM, WGN, AK, BKM, T, true, 2>(x.M, x.N, x.K, x.seed, l);
  if (x.copy == "sync8") return run_case<BM, BN, BK, WGM, WGN, AK, BKM, T, false, 8>(x.M, x.N, x.K, x.seed, l);
  if (x.copy == "sync1") return run_case<BM, BN, BK, WGM, WGN, AK, BKM, T, false, 1>(x.M, x.N, x.K, x.seed, l);
  std::fprintf(stderr, "unknown copy mode %s\n", x.copy.c_str());
  return 3;
}

template <int BM, int BN, int BK, int WGM, int WGN>
static int by_layout(const Args& x) {
  bool f = x.dtype == "f16", ak = x.a == "k", bk = x.b == "k";
  if (!f && x.dtype != "bf16") { std::fprintf(stderr, "unknown dtype\n"); return 3; }
#define HEDDLE_L(AKV, BKV)                                                        \
  if (ak == AKV && bk == BKV)                                                     \
    return f ? by_copy<BM, BN, BK, WGM, WGN, AKV, BKV, f16>(x)                    \
             : by_copy<BM, BN, BK, WGM, WGN, AKV, BKV, bf16>(x);
  HEDDLE_L(true, true) HEDDLE_L(true, false) HEDDLE_L(false, true) HEDDLE_L(false, false)
#undef HEDDLE_L
  return 3;
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "selftest") return selftest();
  if (argc >= 3 && std::string(argv[1]) == "expect-error") return expect_error(argv[2]);
  if (argc < 10 || std::string(argv[1]) != "run") {
    std::fprintf(stderr, "usage: %s selftest | expect-error SCENARIO | run DTYPE k|m k|n CFG COPY M N K [SEED]\n", argv[0]);
    return 3;
  }
  Args x{argv[2], argv[3], argv[4], argv[5], argv[6], std::atoi(argv[7]), std::atoi(argv[8]), std::atoi(argv[9]),
         argc > 10 ? std::strtoull(argv[10], nullptr, 10) : 1};
  if ((x.a != "k" && x.a != "m") || (x.b != "k" && x.b != "n")) { std::fprintf(stderr, "layouts: A k|m, B k|n\n"); return 3; }
  if (x.cfg == "64x64x32_2x2") return by_layout<64, 64, 32, 2, 2>(x);
  if (x.cfg == "128x128x32_2x2") return by_layout<128, 128, 32, 2, 2>(x);
  if (x.cfg == "128x256x64_4x2") return by_layout<128, 256, 64, 4, 2>(x);
  if (x.cfg == "32x192x16_1x8") return by_layout<32, 192, 16, 1, 8>(x);  // FN = 3: ldmatrix.x2 path
  std::fprintf(stderr, "unknown cfg %s\n", x.cfg.c_str());
  return 3;
}
