// Host-emulation harness for the AMD matmul runtime (heddle_hip_copy.cuh, heddle_hip_mma.cuh).
//
// Compiled by g++ -std=c++17 -DHEDDLE_HOST_EMULATION with amd_emu.cpp (tests/test_amd_emulation.py).
//   amd_mma_emu selftest
//       the emulator's layout tables against entries read off AMD's matrix instruction calculator
//       (v_mfma_f32_16x16x16f16 on CDNA2/CDNA3, v_wmma_f32_16x16x16_f16 on RDNA4, wave32), and
//       one MFMA and one WMMA against a plain matrix product.
//   amd_mma_emu expect-error SCENARIO
//       a wrong use the emulator must refuse (exit 2): nonuniform_m0, divergence, dma_oob.
//   amd_mma_emu run WAVE DTYPE ALAYOUT BLAYOUT CFG COPY M N K [SEED]
//       WAVE 64 (MFMA) | 32 (WMMA); DTYPE f16|bf16; ALAYOUT k|m; BLAYOUT k|n; CFG e.g. 64x64x32_2x2;
//       COPY async (LDS DMA, wave64 only) | sync8 | sync1. Runs a whole ragged GEMM through
//       the device code: every CTA, per k-slab copy_tile_* for every thread, wait_vmcnt<0>, MmaAmd::step
//       for every wavefront in lockstep, results through row_of / col_of against a double reference.
//       Checks: every LDS element of a stage written exactly once per slab (zero outside the valid
//       box), every output element owned by exactly one (lane, fm, fn, r), accumulators outside the
//       problem exactly 0, nothing lands before its wait, and the DMA / MMA instruction counts.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "amd_emu.h"
#include "heddle/heddle_hip_mma.cuh"

using namespace heddle;
namespace E = heddle::emu_amd;

static long g_fail = 0;
#define CHECK(cond, ...)                                                 \
  do {                                                                   \
    if (!(cond)) {                                                       \
      if (g_fail < 20) {                                                 \
        std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
        std::fprintf(stderr, __VA_ARGS__);                               \
        std::fprintf(stderr, "\n");                                      \
      }                                                                  \
      ++g_fail;                                                          \
    }                                                                    \
  } while (0)

struct Rng {
  std::uint64_t s;
  std::uint32_t next() {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (std::uint32_t)(s >> 16);
  }
};

template <typename T> unsigned short bitsOf(float x) { return from_float<T>(x).bits; }
template <typename T> float valueOf(unsigned short b) { T t; t.bits = b; return to_float(t); }

// ---- selftest ---------------------------------------------------------------------------------

static int selftest() {
  // (matrix, row, col) -> (lane, element/register), read off the calculator's register layouts
  struct G { char m; int row, col, lane, e; };
  const G mfma[] = {{'A', 0, 4, 16, 0}, {'A', 3, 5, 19, 1}, {'A', 15, 15, 63, 3}, {'A', 7, 10, 39, 2},
                    {'B', 3, 0, 0, 3}, {'B', 4, 0, 16, 0}, {'B', 9, 12, 44, 1}, {'D', 4, 0, 16, 0},
                    {'D', 1, 5, 5, 1}, {'D', 15, 15, 63, 3}, {'D', 10, 3, 35, 2}};
  const G wmma[] = {{'A', 0, 4, 16, 0}, {'A', 0, 8, 0, 4}, {'A', 9, 13, 25, 5}, {'A', 2, 11, 2, 7},
                    {'B', 8, 0, 0, 4}, {'B', 7, 0, 16, 3}, {'B', 1, 0, 0, 1}, {'D', 8, 0, 16, 0},
                    {'D', 7, 3, 3, 7}, {'D', 9, 1, 17, 1}};
  for (int w = 0; w < 2; ++w) {
    for (const G& g : w == 0 ? std::vector<G>(std::begin(mfma), std::end(mfma)) : std::vector<G>(std::begin(wmma), std::end(wmma))) {
      int r, c;
      if (g.m == 'A') (w ? E::wmma_a : E::mfma_a)(g.lane, g.e, r, c);
      else if (g.m == 'B') (w ? E::wmma_b : E::mfma_b)(g.lane, g.e, r, c);
      else (w ? E::wmma_d : E::mfma_d)(g.lane, g.e, r, c);
      CHECK(r == g.row && c == g.col, "%s %c: lane %d element %d is (%d, %d), the calculator says (%d, %d)",
            w ? "wmma" : "mfma", g.m, g.lane, g.e, r, c, g.row, g.col);
    }
  }
  // one instruction each against a plain product
  for (int wave : {64, 32}) {
    Rng rng{99};
    float A[16][16], B[16][16];
    for (auto& row : A) for (float& x : row) x = (float)((int)(rng.next() % 9) - 4);
    for (auto& row : B) for (float& x : row) x = (float)((int)(rng.next() % 9) - 4);
    const int elems = wave == 64 ? 4 : 8;
    std::vector<std::vector<unsigned short>> a(wave, std::vector<unsigned short>(8)), b = a;
    std::vector<std::vector<float>> d(wave, std::vector<float>(8, 0.0f));
    for (int l = 0; l < wave; ++l)
      for (int e = 0; e < elems; ++e) {
        int i, k, j;
        (wave == 64 ? E::mfma_a : E::wmma_a)(l, e, i, k);
        a[l][e] = bitsOf<f16>(A[i][k]);
        (wave == 64 ? E::mfma_b : E::wmma_b)(l, e, k, j);
        b[l][e] = bitsOf<f16>(B[k][j]);
      }
    E::run_wave(wave, [&](int l) {
      if (wave == 64) E::mfma16(d[l].data(), a[l].data(), b[l].data(), false);
      else E::wmma16(d[l].data(), a[l].data(), b[l].data(), false);
    });
    for (int l = 0; l < wave; ++l)
      for (int e = 0; e < elems; ++e) {
        int i, j;
        (wave == 64 ? E::mfma_d : E::wmma_d)(l, e, i, j);
        float want = 0;
        for (int k = 0; k < 16; ++k) want += A[i][k] * B[k][j];
        CHECK(d[l][e] == want, "wave%d D[%d][%d] = %g, want %g", wave, i, j, d[l][e], want);
      }
  }
  if (g_fail) return 1;
  std::printf("PASS selftest\n");
  return 0;
}

// ---- expect-error -------------------------------------------------------------------------------

static int expectError(const std::string& s) {
  alignas(128) static char lds[65536];
  alignas(16) static float g[4096];
  E::set_shared_arena(lds, sizeof lds);
  E::add_global(g, sizeof g);
  if (s == "nonuniform_m0") {  // two lanes of wave 0 disagree on M0 for one instruction
    E::set_thread(0, 64);
    heddle::emu_amd::lds_dma_dword(lds, g, 0, 0);
    E::set_thread(1, 64);
    heddle::emu_amd::lds_dma_dword(lds + 256, g + 1, 1, 0);
  } else if (s == "divergence") {  // lane 3 skips the MFMA
    unsigned short a[8] = {}, b[8] = {};
    float d[64][8] = {};
    E::run_wave(64, [&](int l) {
      if (l != 3) E::mfma16(d[l], a, b, false);
    });
  } else if (s == "dma_oob") {  // a DMA source outside every buffer
    E::set_thread(0, 64);
    heddle::emu_amd::lds_dma_dword(lds, g + 4096, 0, 0);
  }
  std::printf("no error for %s\n", s.c_str());
  return 0;
}

// ---- run ----------------------------------------------------------------------------------------

enum class Copy { Async, Sync8, Sync1 };

template <int WAVE, typename T, bool AK, bool BKM, int BM, int BN, int BK, int WGM, int WGN, Copy C>
static int gemm(int M, int N, int K, std::uint64_t seed) {
  using Mma = MmaAmd<BM, BN, BK, WGM, WGN, AK, BKM, T, WAVE>;
  constexpr int TH = Mma::kThreads, VEC = C == Copy::Async ? 2 : C == Copy::Sync8 ? 8 : 1;
  constexpr int RA = AK ? BM : BK, CA = AK ? BK : BM, RB = BKM ? BN : BK, CB = BKM ? BK : BN;
  // global operands in storage order with padded leading dimensions (multiples of 8 elements)
  const int rowsA = AK ? M : K, colsA = AK ? K : M, rowsB = BKM ? N : K, colsB = BKM ? K : N;
  const int lda = (colsA + 7) / 8 * 8, ldb = (colsB + 7) / 8 * 8;
  std::vector<unsigned short> A((size_t)rowsA * lda), B((size_t)rowsB * ldb);
  Rng rng{seed * 7919 + 1};
  auto fill = [&](std::vector<unsigned short>& v, int rows, int cols, int ld) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < ld; ++c)
        v[(size_t)r * ld + c] = c < cols ? bitsOf<T>((float)((int)(rng.next() % 17) - 8) / 8.0f)
                                         : bitsOf<T>(NAN);  // padding must never reach the result
  };
  fill(A, rowsA, colsA, lda);
  fill(B, rowsB, colsB, ldb);
  auto a = [&](int m, int k) { return valueOf<T>(AK ? A[(size_t)m * lda + k] : A[(size_t)k * lda + m]); };
  auto b = [&](int k, int n) { return valueOf<T>(BKM ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n]); };
  E::clear_globals();
  E::add_global(A.data(), A.size() * 2);
  E::add_global(B.data(), B.size() * 2);
  alignas(128) static char lds[65536];
  constexpr int kStageA = Mma::kStageElemsA * 2, kStageB = Mma::kStageElemsB * 2;
  static_assert(kStageA + kStageB <= 65536, "stage does not fit the LDS arena");
  E::set_shared_arena(lds, kStageA + kStageB);
  T* sA = reinterpret_cast<T*>(lds);
  T* sB = reinterpret_cast<T*>(lds + kStageA);
  const T* gA = reinterpret_cast<const T*>(A.data());
  const T* gB = reinterpret_cast<const T*>(B.data());
  std::vector<int> owned((size_t)M * N, 0);
  const int nk = (K + BK - 1) / BK;
  long mmaBefore = E::stats().mfma + E::stats().wmma;
  for (int by = 0; by * BM < M; ++by)
    for (int bx = 0; bx * BN < N; ++bx) {
      const int m0 = by * BM, n0 = bx * BN;
      std::vector<Mma> mma(TH);
      for (auto& x : mma) x.zero();
      for (int kt = 0; kt < nk; ++kt) {
        const int k0 = kt * BK;
        std::memset(lds, 0x7f, kStageA + kStageB);  // stale bytes: must all be overwritten
        E::reset_writes();
        for (int op = 0; op < 2; ++op) {  // one copy call (A, then B) across all threads
          E::new_copy_phase();             // its unrolled rounds are the DMA instructions
          for (int tid = 0; tid < TH; ++tid) {
            E::set_thread(tid, TH);
            if constexpr (C == Copy::Async) {
              if (op == 0) copy_tile_async<RA, CA, VEC, TH>(sA, gA, lda, AK ? m0 : k0, AK ? k0 : m0, rowsA, colsA, tid);
              else copy_tile_async<RB, CB, VEC, TH>(sB, gB, ldb, BKM ? n0 : k0, BKM ? k0 : n0, rowsB, colsB, tid);
            } else {
              if (op == 0) copy_tile_sync<RA, CA, VEC, TH>(sA, gA, lda, AK ? m0 : k0, AK ? k0 : m0, rowsA, colsA, tid);
              else copy_tile_sync<RB, CB, VEC, TH>(sB, gB, ldb, BKM ? n0 : k0, BKM ? k0 : n0, rowsB, colsB, tid);
            }
          }
        }
        if constexpr (C == Copy::Async) {  // nothing may have landed before the waits
          for (int i = 0; i < kStageA + kStageB; ++i) CHECK(E::dma_writes_at(lds + i) == 0, "byte %d landed before its wait", i);
          for (int tid = 0; tid < TH; ++tid) {
            E::set_thread(tid, TH);
            wait_vmcnt<0>();
          }
        }
        CHECK(E::pending() == 0, "%ld DMA ops still in flight", E::pending());
        for (int i = 0; i < kStageA + kStageB; ++i)
          CHECK(E::writes_at(lds + i) == 1, "LDS byte %d written %u times in slab %d", i, E::writes_at(lds + i), kt);
        for (int m = 0; m < BM; ++m)  // the stage holds the box, zero outside the valid part
          for (int k = 0; k < BK; ++k) {
            float want = m0 + m < M && k0 + k < K ? a(m0 + m, k0 + k) : 0.0f;
            float got = to_float(sA[AK ? Mma::TileA::offset(m, k) : Mma::TileA::offset(k, m)]);
            CHECK(got == want, "sA (%d, %d) of slab %d is %g, want %g", m, k, kt, got, want);
          }
        for (int tw = 0; tw < Mma::kWarps; ++tw)
          E::run_wave(WAVE, [&](int lane) { mma[tw * WAVE + lane].step(sA, sB, tw, lane); });
      }
      for (int tid = 0; tid < TH; ++tid) {
        const int w = tid / WAVE, lane = tid % WAVE;
        for (int fm = 0; fm < Mma::FM; ++fm)
          for (int fn = 0; fn < Mma::FN; ++fn)
            for (int r = 0; r < 4; ++r) {
              const int row = m0 + Mma::row_of(w, lane, fm, r), col = n0 + Mma::col_of(w, lane, fn, r);
              const float got = mma[tid].acc[fm][fn][r];
              CHECK(row < m0 + BM && col < n0 + BN, "acc[%d][%d][%d] of thread %d maps outside the CTA tile", fm, fn, r, tid);
              if (row >= M || col >= N) {
                CHECK(got == 0.0f, "accumulator outside the problem (%d, %d) is %g", row, col, got);
                continue;
              }
              owned[(size_t)row * N + col]++;
              double want = 0;
              for (int k = 0; k < K; ++k) want += (double)a(row, k) * b(k, col);
              CHECK(std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want)), "D(%d, %d) = %g, want %g", row, col, got, want);
            }
      }
    }
  for (size_t i = 0; i < owned.size(); ++i) CHECK(owned[i] == 1, "output element %zu owned %d times", i, owned[i]);
  const long tiles = (long)((M + BM - 1) / BM) * ((N + BN - 1) / BN) * nk * Mma::kWarps * (BK / 16) * Mma::TM * Mma::TN;
  CHECK(E::stats().mfma + E::stats().wmma - mmaBefore == tiles, "%ld MMA instructions, expected %ld",
        E::stats().mfma + E::stats().wmma - mmaBefore, tiles);
  if (g_fail) return 1;
  std::printf("PASS wave%d %dx%dx%d (dma %ld, zero %ld, sync %ld)\n", WAVE, M, N, K, E::stats().dma,
              E::stats().dma_zero, E::stats().sync_copies);
  return 0;
}

template <int WAVE, typename T, bool AK, bool BKM, Copy C>
static int byConfig(const std::string& cfg, int M, int N, int K, std::uint64_t seed) {
  if (cfg == "64x64x32_2x2") return gemm<WAVE, T, AK, BKM, 64, 64, 32, 2, 2, C>(M, N, K, seed);
  if (cfg == "128x128x32_2x2") return gemm<WAVE, T, AK, BKM, 128, 128, 32, 2, 2, C>(M, N, K, seed);
  if (cfg == "32x64x64_2x1") return gemm<WAVE, T, AK, BKM, 32, 64, 64, 2, 1, C>(M, N, K, seed);
  std::fprintf(stderr, "unknown config %s\n", cfg.c_str());
  return 3;
}

template <int WAVE, typename T, bool AK, bool BKM>
static int byCopy(const std::string& copy, const std::string& cfg, int M, int N, int K, std::uint64_t seed) {
  if (copy == "async") {
    if constexpr (WAVE == 64) return byConfig<WAVE, T, AK, BKM, Copy::Async>(cfg, M, N, K, seed);
    std::fprintf(stderr, "LDS DMA exists on wave64 CDNA only\n");
    return 3;
  }
  if (copy == "sync8") return byConfig<WAVE, T, AK, BKM, Copy::Sync8>(cfg, M, N, K, seed);
  if (copy == "sync1") return byConfig<WAVE, T, AK, BKM, Copy::Sync1>(cfg, M, N, K, seed);
  std::fprintf(stderr, "unknown copy %s\n", copy.c_str());
  return 3;
}

template <int WAVE, typename T>
static int byLayout(bool ak, bool bk, const std::string& copy, const std::string& cfg, int M, int N, int K,
                    std::uint64_t seed) {
  if (ak && bk) return byCopy<WAVE, T, true, true>(copy, cfg, M, N, K, seed);
  if (ak) return byCopy<WAVE, T, true, false>(copy, cfg, M, N, K, seed);
  if (bk) return byCopy<WAVE, T, false, true>(copy, cfg, M, N, K, seed);
  return byCopy<WAVE, T, false, false>(copy, cfg, M, N, K, seed);
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "selftest") return selftest();
  if (mode == "expect-error" && argc > 2) return expectError(argv[2]);
  if (mode == "run" && argc >= 11) {
    int wave = std::atoi(argv[2]);
    std::string dt = argv[3], cfg = argv[6], copy = argv[7];
    bool ak = std::string(argv[4]) == "k", bk = std::string(argv[5]) == "k";
    int M = std::atoi(argv[8]), N = std::atoi(argv[9]), K = std::atoi(argv[10]);
    std::uint64_t seed = argc > 11 ? std::strtoull(argv[11], nullptr, 10) : 1;
    if (wave == 64 && dt == "f16") return byLayout<64, f16>(ak, bk, copy, cfg, M, N, K, seed);
    if (wave == 64 && dt == "bf16") return byLayout<64, bf16>(ak, bk, copy, cfg, M, N, K, seed);
    if (wave == 32 && dt == "f16") return byLayout<32, f16>(ak, bk, copy, cfg, M, N, K, seed);
    if (wave == 32 && dt == "bf16") return byLayout<32, bf16>(ak, bk, copy, cfg, M, N, K, seed);
  }
  std::fprintf(stderr, "usage: amd_mma_emu selftest | expect-error SCENARIO | run WAVE DTYPE A B CFG COPY M N K [SEED]\n");
  return 3;
}
