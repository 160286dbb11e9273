// Host emulation of the heddle Hopper device runtime (heddle_sm90.cuh), compiled by g++ -std=c++17
// -DHEDDLE_HOST_EMULATION (tests/test_hopper_device.py). The emulated primitives follow the PTX ISA
// and do not use the header's layout code:
//   TMA load/store   a box of the tensor map (dims, byte strides, box, swizzle) at the given
//                    coordinates; elements outside the tensor are zero-filled (load) / skipped
//                    (store). The box is laid out densely (innermost first) from the shared
//                    destination and every byte address a is moved to a ^ (((a >> 7) & (SW/16-1))
//                    << 4) for swizzle SW -- the 16-byte chunks permuted within each 2^(log2 SW +
//                    3)-byte block, on shared-window address bits. Checks: destination 128-byte
//                    aligned, box row a multiple of 16 bytes and at most the swizzle span, box dims
//                    <= 256. complete_tx subtracts the box bytes from the mbarrier's phase.
//   mbarrier         count / pending arrivals / transaction count / phase; try_wait.parity(P)
//                    must find phase P complete (the harness runs producer before consumer, so a
//                    wait that would block is an error here).
//   wgmma            m64nNk16, f32 += T x T from shared memory through the two 64-bit matrix
//                    descriptors (start, LBO, SBO, swizzle mode; base offset must be 0), decoded
//                    as the ISA's canonical layouts in 16-byte units with W = SW/16:
//                      K-major  (mn, k) -> (mn%8)*W + (mn/8)*SBO + k/8     (+ (k%8) elements)
//                      MN-major (mn, k) -> (mn/8)%W + ((mn/8)/W)*LBO + (k%8)*W + (k/8)*SBO
//                                                                           (+ (mn%8) elements)
//                    then the same address swizzle. The calling thread t (of 128 in its
//                    warpgroup) receives d[4j + r] = D[16*(t/32) + (t%32)/4 + 8*(r/2)]
//                    [8j + 2*(t%4) + r%2] (the ISA's D fragment). Every thread of a warpgroup must
//                    issue the same descriptors in the same order (checked).
//
//   sm90_emu selftest                        TmaTile offsets vs emulated TMA boxes, descriptors
//   sm90_emu run DT AL BL CFG M N K SEED     a ragged GEMM through TMA + MmaSm90 + TMA store
//       DT f16|bf16, AL k|m (A K- or M-contiguous), BL k|n, CFG in configs() below
//   sm90_emu expect-error SCENARIO           misuse the emulator must refuse (exit code 2)
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "heddle/heddle_sm90.cuh"

using namespace heddle;

namespace heddle {
namespace emu {

[[noreturn]] static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "EMULATION ERROR: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::fflush(stdout);
  std::exit(2);
}

struct Mbar {
  int count = 0, pending = 0;
  long long tx = 0;
  long phase = 0;
};

// Host view of a tensor map (the harness writes it into TmaDesc::opaque).
struct EmuMap {
  int rank, esize, swizzle;
  int box[3];
  long long dim[3], stride[3];  // stride in bytes; stride[0] = esize
  char* base;
};
static_assert(sizeof(EmuMap) <= sizeof(TmaDesc), "EmuMap must fit in a TmaDesc");

struct State {
  char* smem = nullptr;
  std::size_t bytes = 0;
  int tid = 0;
  std::map<const void*, Mbar> bars;
  std::map<std::string, long> syncs;
  long tma_loads = 0, tma_stores = 0, wgmmas = 0;
  // uniformity: per warpgroup, the sequence of (desc_a, desc_b, n) issued by its first thread
  std::map<int, std::vector<unsigned long long>> wg_log;
  std::map<int, std::size_t> thread_pos;
};
static State& S() {
  static State s;
  return s;
}

unsigned smem_offset(const void* p) {
  const char* c = static_cast<const char*>(p);
  if (c < S().smem || c >= S().smem + S().bytes) die("address %p is not in the shared window", p);
  return (unsigned)(c - S().smem);
}

static unsigned swz(unsigned a, int sw) { return sw ? a ^ (((a >> 7) & (unsigned)(sw / 16 - 1)) << 4) : a; }

static Mbar& bar_of(unsigned long long* b) {
  smem_offset(b);
  if (((std::uintptr_t)b) % 8) die("mbarrier %p is not 8-byte aligned", (void*)b);
  auto it = S().bars.find(b);
  if (it == S().bars.end()) die("mbarrier at shared offset %u used before mbarrier.init", smem_offset(b));
  return it->second;
}

static void maybe_complete(Mbar& m) {
  if (m.pending == 0 && m.tx == 0) {
    m.phase++;
    m.pending = m.count;
  }
}

void mbar_init(unsigned long long* bar, int count) {
  smem_offset(bar);
  if (count < 1) die("mbarrier.init with count %d", count);
  S().bars[bar] = Mbar{count, count, 0, 0};
}
void mbar_arrive(unsigned long long* bar) {
  Mbar& m = bar_of(bar);
  if (m.pending <= 0) die("mbarrier arrive with no pending arrivals");
  m.pending--;
  maybe_complete(m);
}
void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  Mbar& m = bar_of(bar);
  m.tx += bytes;
  mbar_arrive(bar);
}
void mbar_wait(unsigned long long* bar, int parity) {
  Mbar& m = bar_of(bar);
  // phase P complete <=> the current (incomplete) phase has the other parity
  if ((m.phase & 1) == (parity & 1))
    die("try_wait.parity(%d) on a barrier whose current phase %ld has not completed (pending %d arrivals, tx %lld)",
        parity, m.phase, m.pending, m.tx);
}

static const EmuMap& map_of(const TmaDesc* d) { return *reinterpret_cast<const EmuMap*>(d); }

template <typename F>
static void for_box(const EmuMap& mp, int rank, const int* c, F f) {
  if (rank != mp.rank) die("TMA instruction of rank %d on a tensor map of rank %d", rank, mp.rank);
  if (mp.box[0] * mp.esize % 16) die("TMA box row of %d bytes is not a multiple of 16", mp.box[0] * mp.esize);
  if (mp.swizzle && mp.box[0] * mp.esize > mp.swizzle)
    die("TMA box row of %d bytes exceeds the %d-byte swizzle span", mp.box[0] * mp.esize, mp.swizzle);
  for (int d = 0; d < rank; ++d)
    if (mp.box[d] < 1 || mp.box[d] > 256) die("TMA box dimension %d is %d (1..256)", d, mp.box[d]);
  const int b1 = rank > 1 ? mp.box[1] : 1, b2 = rank > 2 ? mp.box[2] : 1;
  for (int i2 = 0; i2 < b2; ++i2)
    for (int i1 = 0; i1 < b1; ++i1)
      for (int i0 = 0; i0 < mp.box[0]; ++i0) {
        long long g[3] = {c[0] + (long long)i0, c[1] + (long long)i1, rank > 2 ? c[2] + (long long)i2 : 0};
        bool in = true;
        for (int d = 0; d < rank; ++d) in &= g[d] >= 0 && g[d] < mp.dim[d];
        long long lin = ((long long)i2 * b1 + i1) * mp.box[0] + i0;
        f(in, mp.base + g[0] * mp.esize + g[1] * mp.stride[1] + g[2] * mp.stride[2], (unsigned)(lin * mp.esize));
      }
}

void tma_load(void* dst, const TmaDesc* map, int rank, const int* coords, unsigned long long* bar) {
  const EmuMap& mp = map_of(map);
  unsigned off = smem_offset(dst);
  if (off % 128) die("TMA destination at shared offset %u is not 128-byte aligned", off);
  long long bytes = 0;
  for_box(mp, rank, coords, [&](bool in, const char* src, unsigned lin) {
    unsigned a = swz(off + lin, mp.swizzle);
    if (a + mp.esize > S().bytes) die("TMA writes past the shared window");
    if (in) std::memcpy(S().smem + a, src, mp.esize);
    else std::memset(S().smem + a, 0, mp.esize);
    bytes += mp.esize;
  });
  Mbar& m = bar_of(bar);
  m.tx -= bytes;  // complete_tx: the whole box, out-of-bounds parts included
  maybe_complete(m);
  S().tma_loads++;
}

void tma_store(const TmaDesc* map, int rank, const int* coords, const void* src) {
  const EmuMap& mp = map_of(map);
  unsigned off = smem_offset(src);
  if (off % 128) die("TMA store source at shared offset %u is not 128-byte aligned", off);
  for_box(mp, rank, coords, [&](bool in, const char* g, unsigned lin) {
    if (in) std::memcpy(const_cast<char*>(g), S().smem + swz(off + lin, mp.swizzle), mp.esize);
  });
  S().tma_stores++;
}

static float load16(unsigned a, bool bf) {
  unsigned short h;
  std::memcpy(&h, S().smem + a, 2);
  return bf ? to_float(bf16{h}) : to_float(f16{h});
}

// Byte address of element (mn, k) of a 16-bit operand described by `desc` (see the header).
static unsigned operand_addr(unsigned long long desc, int trans, int mn, int k) {
  unsigned start = (unsigned)(desc & 0x3FFF) << 4, lbo = (unsigned)((desc >> 16) & 0x3FFF) << 4,
           sbo = (unsigned)((desc >> 32) & 0x3FFF) << 4;
  int base = (int)((desc >> 49) & 7), layout = (int)(desc >> 62);
  if (base) die("descriptor base offset %d: heddle tiles start on pattern boundaries (0)", base);
  if (layout == 0) die("descriptor without swizzle: heddle uses swizzled layouts only");
  int sw = layout == 1 ? 128 : (layout == 2 ? 64 : 32), W = sw / 16;
  unsigned unit;
  if (!trans) unit = (unsigned)((mn % 8) * W + (mn / 8) * (sbo / 16) + k / 8);
  else unit = (unsigned)(((mn / 8) % W) + ((mn / 8) / W) * (lbo / 16) + (k % 8) * W + (k / 8) * (sbo / 16));
  unsigned a = start + unit * 16 + (unsigned)((trans ? mn % 8 : k % 8) * 2);
  a = swz(a, sw);
  if (a + 2 > S().bytes) die("wgmma operand element (%d, %d) at %u is outside the shared window", mn, k, a);
  return a;
}

void wgmma(float* d, int n, unsigned long long da, unsigned long long db, int ta, int tb, bool bf, int scale_d) {
  const int t = S().tid % 128, wg = S().tid / 128;
  auto& log = S().wg_log[wg];
  std::size_t& pos = S().thread_pos[S().tid];
  const unsigned long long rec[3] = {da, db, (unsigned long long)(n | ta << 16 | tb << 17 | scale_d << 18)};
  for (int i = 0; i < 3; ++i) {
    if (pos + i < log.size()) {
      if (log[pos + i] != rec[i]) die("wgmma of thread %d differs from its warpgroup's (non-uniform descriptors)", S().tid);
    } else {
      log.push_back(rec[i]);
    }
  }
  pos += 3;
  const int w = t / 32, l = t % 32;
  for (int j = 0; j < n / 8; ++j)
    for (int r = 0; r < 4; ++r) {
      int row = 16 * w + l / 4 + 8 * (r / 2), col = 8 * j + 2 * (l % 4) + r % 2;
      double s = 0;
      for (int k = 0; k < 16; ++k)
        s += (double)load16(operand_addr(da, ta, row, k), bf) * load16(operand_addr(db, tb, col, k), bf);
      float& acc = d[4 * j + r];
      acc = (float)((scale_d ? (double)acc : 0.0) + s);
    }
  S().wgmmas++;
}

void sm90_sync(const char* what) { S().syncs[what]++; }

}  // namespace emu
}  // namespace heddle

// ---- harness ------------------------------------------------------------------------------------

static long g_fail = 0;
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      if (g_fail < 20) {                                          \
        std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        std::fprintf(stderr, __VA_ARGS__);                        \
        std::fprintf(stderr, "\n");                               \
      }                                                           \
      ++g_fail;                                                   \
    }                                                             \
  } while (0)

struct Rng {
  std::uint64_t s;
  std::uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return (std::uint32_t)(s >> 16);
  }
  float uniform() { return (float)(next() & 0xffffff) / 8388608.0f - 1.0f; }
};

static char* g_arena = nullptr;
static void arena(std::size_t bytes) {
  std::free(g_arena);
  g_arena = static_cast<char*>(std::aligned_alloc(1024, (bytes + 1023) / 1024 * 1024));
  std::memset(g_arena, 0xCD, bytes);
  emu::S().smem = g_arena;
  emu::S().bytes = bytes;
  emu::S().bars.clear();
}

// A tensor map as the host encodes it: a row-major [batch][rows][cols] matrix (cols contiguous),
// box {box_cols, box_rows[, 1]}, swizzle in bytes.
static TmaDesc make_map(void* base, int esize, long long rows, long long cols, long long ld, int box_cols,
                        int box_rows, int swizzle, long long batch = 0, long long batch_stride = 0) {
  TmaDesc d{};
  emu::EmuMap m{};
  m.rank = batch ? 3 : 2;
  m.esize = esize;
  m.swizzle = swizzle;
  m.box[0] = box_cols;
  m.box[1] = box_rows;
  m.box[2] = 1;
  m.dim[0] = cols;
  m.dim[1] = rows;
  m.dim[2] = batch ? batch : 1;
  m.stride[0] = esize;
  m.stride[1] = ld * esize;
  m.stride[2] = batch_stride * esize;
  m.base = static_cast<char*>(base);
  std::memcpy(&d, &m, sizeof m);
  return d;
}

template <typename T>
static T from_f(float x) { return from_float<T>(x); }

// TmaTile<R, C>::offset must be where an emulated TMA box load puts element (r, c).
template <int R, int C, typename T>
static void selftest_tile() {
  using Tile = sm90::TmaTile<R, C, T>;
  arena(Tile::kBytes + 1024);
  std::vector<T> g((std::size_t)R * C);  // element i holds the bit pattern of i (exact in any T)
  for (int i = 0; i < R * C; ++i) std::memcpy(&g[i], &i, sizeof(T));
  TmaDesc map = make_map(g.data(), sizeof(T), R, C, C, Tile::kBoxCols, R, Tile::kSwizzle);
  auto* bar = reinterpret_cast<unsigned long long*>(g_arena + Tile::kBytes);
  sm90::mbar_init(bar, 1);
  sm90::mbar_arrive_expect_tx(bar, Tile::kBytes);
  T* dst = reinterpret_cast<T*>(g_arena);
  sm90::tma_load_tile<Tile, 2>(dst, &map, 0, 0, 0, bar);
  sm90::mbar_wait(bar, 0);
  std::vector<int> seen(Tile::kElems, 0);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      int o = Tile::offset(r, c);
      CHECK(o >= 0 && o < Tile::kElems, "TmaTile<%d,%d> offset(%d,%d) = %d out of range", R, C, r, c, o);
      if (o < 0 || o >= Tile::kElems) continue;
      ++seen[o];
      int got = 0, want = r * C + c;
      std::memcpy(&got, &dst[o], sizeof(T));
      if (sizeof(T) < 4) want &= (1 << (8 * sizeof(T))) - 1;
      CHECK(got == want, "TmaTile<%d,%d>: (%d,%d) not where TMA put it", R, C, r, c);
    }
  for (int o = 0; o < Tile::kElems; ++o) CHECK(seen[o] == 1, "TmaTile<%d,%d>: element %d hit %d times", R, C, o, seen[o]);
}

static int selftest() {
  selftest_tile<64, 64, f16>();
  selftest_tile<128, 64, bf16>();
  selftest_tile<256, 64, f16>();
  selftest_tile<64, 32, f16>();
  selftest_tile<128, 16, bf16>();
  selftest_tile<64, 128, f16>();
  selftest_tile<16, 256, bf16>();
  selftest_tile<32, 192, f16>();
  selftest_tile<128, 128, float>();
  selftest_tile<64, 64, float>();
  selftest_tile<8, 64, f16>();
  // descriptor bit fields
  unsigned long long d = sm90::make_desc(0x12340, 0x800, 0x400, 1);
  CHECK((d & 0x3FFF) == (0x12340 >> 4) && ((d >> 16) & 0x3FFF) == 0x80 && ((d >> 32) & 0x3FFF) == 0x40 &&
            (d >> 62) == 1 && ((d >> 49) & 7) == 0,
        "make_desc fields: %llx", d);
  std::printf("%s selftest (failures: %ld)\n", g_fail ? "FAIL" : "PASS", g_fail);
  return g_fail ? 1 : 0;
}

// ---- GEMM through the device code ---------------------------------------------------------------

template <typename T, int BM, int BN, int BK, int NWG, bool COOP, bool AK, bool BKM, int WARP_BASE>
static int run_gemm(int M, int N, int K, int batch, unsigned seed) {
  using Mma = MmaSm90<BM, BN, BK, NWG, COOP, AK, BKM, T, WARP_BASE>;
  using TileD = sm90::TmaTile<BM, BN, T>;
  constexpr int S = 2;
  const int lda = (AK ? K : M) + 8, ldb = (BKM ? K : N) + 8, ldd = N + 8;  // padded rows
  const long long sa = (long long)lda * (AK ? M : K), sb = (long long)ldb * (BKM ? N : K), sd = (long long)ldd * M;
  std::vector<T> A(sa * batch), B(sb * batch), D(sd * batch);
  Rng rng{0x9E3779B97F4A7C15ull ^ seed};
  for (auto& x : A) x = from_f<T>(rng.uniform());
  for (auto& x : B) x = from_f<T>(rng.uniform());
  for (auto& x : D) x = from_f<T>(NAN);
  auto a_at = [&](int b, int m, int k) { return to_float(A[b * sa + (AK ? (long long)m * lda + k : (long long)k * lda + m)]); };
  auto b_at = [&](int b, int k, int n) { return to_float(B[b * sb + (BKM ? (long long)n * ldb + k : (long long)k * ldb + n)]); };
  const int ar = AK ? M : K, ac = AK ? K : M, br = BKM ? N : K, bc = BKM ? K : N;
  TmaDesc mapA = make_map(A.data(), sizeof(T), ar, ac, lda, Mma::TileA::kBoxCols, AK ? BM : BK, Mma::TileA::kSwizzle,
                          batch > 1 ? batch : 0, sa);
  TmaDesc mapB = make_map(B.data(), sizeof(T), br, bc, ldb, Mma::TileB::kBoxCols, BKM ? BN : BK, Mma::TileB::kSwizzle,
                          batch > 1 ? batch : 0, sb);
  TmaDesc mapD = make_map(D.data(), sizeof(T), M, N, ldd, TileD::kBoxCols, BM, TileD::kSwizzle, batch > 1 ? batch : 0, sd);
  const std::size_t bytesA = Mma::TileA::kBytes, bytesB = Mma::TileB::kBytes;
  const std::size_t offB = S * bytesA, offD = offB + S * bytesB, offBar = offD + TileD::kBytes;
  arena(offBar + 64);
  T* sA = reinterpret_cast<T*>(g_arena);
  T* sB = reinterpret_cast<T*>(g_arena + offB);
  T* sD = reinterpret_cast<T*>(g_arena + offD);
  auto* full = reinterpret_cast<unsigned long long*>(g_arena + offBar);
  const int nk = (K + BK - 1) / BK, threads = Mma::kThreads;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  long expect_wgmma = 0;
  for (int b = 0; b < batch; ++b)
    for (int tm = 0; tm < tiles_m; ++tm)
      for (int tn = 0; tn < tiles_n; ++tn) {
        const int m0 = tm * BM, n0 = tn * BN;
        for (int s = 0; s < S; ++s) sm90::mbar_init(full + s, 1);
        emu::S().wg_log.clear();
        emu::S().thread_pos.clear();
        std::vector<Mma> mma(threads);
        for (auto& x : mma) x.zero();
        for (int kt = 0; kt < nk; ++kt) {
          const int st = kt % S, k0 = kt * BK;
          // producer (one elected thread)
          sm90::mbar_arrive_expect_tx(full + st, Mma::kStageBytes);
          if (batch > 1) {
            sm90::tma_load_tile<typename Mma::TileA, 3>(sA + st * Mma::kStageElemsA, &mapA, AK ? m0 : k0, AK ? k0 : m0, b, full + st);
            sm90::tma_load_tile<typename Mma::TileB, 3>(sB + st * Mma::kStageElemsB, &mapB, BKM ? n0 : k0, BKM ? k0 : n0, b, full + st);
          } else {
            sm90::tma_load_tile<typename Mma::TileA, 2>(sA + st * Mma::kStageElemsA, &mapA, AK ? m0 : k0, AK ? k0 : m0, 0, full + st);
            sm90::tma_load_tile<typename Mma::TileB, 2>(sB + st * Mma::kStageElemsB, &mapB, BKM ? n0 : k0, BKM ? k0 : n0, 0, full + st);
          }
          // consumers
          for (int t = 0; t < threads; ++t) {
            emu::S().tid = t;
            const int warp = WARP_BASE + t / 32, lane = t % 32;
            sm90::mbar_wait(full + st, (kt / S) % 2);
            mma[t].fence();
            mma[t].step(sA + st * Mma::kStageElemsA, sB + st * Mma::kStageElemsB, warp, lane);
            mma[t].commit();
            mma[t].template wait<0>();
          }
          expect_wgmma += (long)threads * (BK / 16) * Mma::FM;
        }
        // epilogue: fragments -> swizzled output tile -> TMA store (and a direct check)
        for (int t = 0; t < threads; ++t) {
          const int warp = WARP_BASE + t / 32, lane = t % 32;
          for (int fm = 0; fm < Mma::FM; ++fm)
            for (int fn = 0; fn < Mma::FN; ++fn)
              for (int r = 0; r < 4; ++r) {
                int lr = Mma::row_of(warp, lane, fm, r), lc = Mma::col_of(warp, lane, fn, r);
                CHECK(lr >= 0 && lr < BM && lc >= 0 && lc < BN, "fragment (%d,%d) outside the tile", lr, lc);
                sD[TileD::offset(lr, lc)] = from_f<T>(mma[t].acc[fm][fn][r]);
              }
        }
        if (batch > 1) sm90::tma_store_tile<TileD, 3>(&mapD, m0, n0, b, sD);
        else sm90::tma_store_tile<TileD, 2>(&mapD, m0, n0, 0, sD);
      }
  long bad = 0;
  for (int b = 0; b < batch; ++b)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = 0;
        for (int k = 0; k < K; ++k) ref += (double)a_at(b, m, k) * b_at(b, k, n);
        double got = to_float(D[b * sd + (long long)m * ldd + n]);
        double tol = (sizeof(T) == 2 ? 1e-2 : 1e-5) * (1 + std::fabs(ref)) * (std::is_same<T, bf16>::value ? 4 : 1);
        if (!(std::fabs(got - ref) <= tol) && ++bad <= 5)
          std::fprintf(stderr, "FAIL D[%d][%d][%d] = %g, reference %g\n", b, m, n, got, ref);
      }
  for (int b = 0; b < batch; ++b)  // padding columns never written
    for (int m = 0; m < M; ++m)
      for (int n = N; n < ldd; ++n) CHECK(std::isnan(to_float(D[b * sd + (long long)m * ldd + n])), "TMA store wrote padding");
  CHECK(emu::S().wgmmas == expect_wgmma, "wgmma count %ld, expected %ld", emu::S().wgmmas, expect_wgmma);
  if (bad) ++g_fail;
  std::printf("%s run %dx%dx%d batch %d (wgmma %ld, tma loads %ld, stores %ld, failures %ld)\n", g_fail ? "FAIL" : "PASS",
              M, N, K, batch, emu::S().wgmmas, emu::S().tma_loads, emu::S().tma_stores, g_fail + bad);
  return g_fail ? 1 : 0;
}

// Configurations: BMxBNxBK, warpgroups, cooperative or one-warpgroup-per-tile (ping-pong math),
// warp base of the MMA role.
template <typename T, bool AK, bool BKM>
static int dispatch_cfg(const std::string& cfg, int M, int N, int K, int batch, unsigned seed) {
  if (cfg == "128x128x64_coop2") return run_gemm<T, 128, 128, 64, 2, true, AK, BKM, 4>(M, N, K, batch, seed);
  if (cfg == "64x128x32_coop1") return run_gemm<T, 64, 128, 32, 1, true, AK, BKM, 0>(M, N, K, batch, seed);
  if (cfg == "64x64x16_coop1") return run_gemm<T, 64, 64, 16, 1, true, AK, BKM, 4>(M, N, K, batch, seed);
  if (cfg == "128x256x64_coop2") return run_gemm<T, 128, 256, 64, 2, true, AK, BKM, 4>(M, N, K, batch, seed);
  if (cfg == "128x192x32_coop2") return run_gemm<T, 128, 192, 32, 2, true, AK, BKM, 4>(M, N, K, batch, seed);
  if (cfg == "128x128x64_pp") return run_gemm<T, 128, 128, 64, 1, false, AK, BKM, 8>(M, N, K, batch, seed);
  if (cfg == "256x128x64_coop2") return run_gemm<T, 256, 128, 64, 2, true, AK, BKM, 4>(M, N, K, batch, seed);
  emu::die("unknown config %s", cfg.c_str());
}

template <typename T>
static int dispatch_layout(const std::string& al, const std::string& bl, const std::string& cfg, int M, int N, int K,
                           int batch, unsigned seed) {
  bool ak = al == "k", bk = bl == "k";
  if (ak && bk) return dispatch_cfg<T, true, true>(cfg, M, N, K, batch, seed);
  if (ak) return dispatch_cfg<T, true, false>(cfg, M, N, K, batch, seed);
  if (bk) return dispatch_cfg<T, false, true>(cfg, M, N, K, batch, seed);
  return dispatch_cfg<T, false, false>(cfg, M, N, K, batch, seed);
}

static int expect_error(const std::string& what) {
  using Tile = sm90::TmaTile<64, 64, f16>;
  std::vector<f16> g(64 * 64);
  arena(4 * Tile::kBytes + 64);
  auto* bar = reinterpret_cast<unsigned long long*>(g_arena + 4 * Tile::kBytes);
  sm90::mbar_init(bar, 1);
  if (what == "tma_misaligned") {
    TmaDesc m = make_map(g.data(), 2, 64, 64, 64, 64, 64, 128);
    sm90::tma_load_box<2>(g_arena + 64, &m, 0, 0, 0, bar);
  } else if (what == "tma_box_wider_than_swizzle") {
    TmaDesc m = make_map(g.data(), 2, 64, 64, 64, 64, 64, 64);  // 128-byte rows, 64-byte swizzle
    sm90::tma_load_box<2>(g_arena, &m, 0, 0, 0, bar);
  } else if (what == "wait_before_tx") {
    TmaDesc m = make_map(g.data(), 2, 64, 64, 64, 64, 64, 128);
    sm90::mbar_arrive_expect_tx(bar, Tile::kBytes + 16);  // expects more than the box delivers
    sm90::tma_load_box<2>(g_arena, &m, 0, 0, 0, bar);
    sm90::mbar_wait(bar, 0);
  } else if (what == "wgmma_nonuniform") {
    using Mma = MmaSm90<64, 64, 16, 1, true, true, true, f16, 0>;
    Mma a, b;
    a.zero();
    b.zero();
    emu::S().tid = 0;
    a.step(reinterpret_cast<f16*>(g_arena), reinterpret_cast<f16*>(g_arena + 2048), 0, 0);
    emu::S().tid = 1;
    b.step(reinterpret_cast<f16*>(g_arena + 1024), reinterpret_cast<f16*>(g_arena + 2048), 0, 1);
  } else if (what == "descriptor_base_offset") {
    float d[32] = {};
    emu::wgmma(d, 64, sm90::make_desc(0, 16, 1024, 1) | (1ull << 49), sm90::make_desc(0, 16, 1024, 1), 0, 0, false, 1);
  } else {
    emu::die("unknown scenario %s", what.c_str());
  }
  std::printf("scenario %s was not refused\n", what.c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sm90_emu selftest | run DT AL BL CFG M N K SEED [BATCH] | expect-error S\n");
    return 64;
  }
  std::string mode = argv[1];
  if (mode == "selftest") return selftest();
  if (mode == "expect-error" && argc > 2) return expect_error(argv[2]);
  if (mode == "run" && argc >= 10) {
    std::string dt = argv[2], al = argv[3], bl = argv[4], cfg = argv[5];
    int M = std::atoi(argv[6]), N = std::atoi(argv[7]), K = std::atoi(argv[8]);
    unsigned seed = (unsigned)std::atoi(argv[9]);
    int batch = argc > 10 ? std::atoi(argv[10]) : 1;
    if (dt == "f16") return dispatch_layout<f16>(al, bl, cfg, M, N, K, batch, seed);
    if (dt == "bf16") return dispatch_layout<bf16>(al, bl, cfg, M, N, K, batch, seed);
  }
  std::fprintf(stderr, "bad arguments\n");
  return 64;
}
