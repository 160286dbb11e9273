// Host emulator of the AMD device runtime primitives: see amd_emu.h.
#include "amd_emu.h"

#include <ucontext.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace heddle {
namespace emu_amd {

void die(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "EMULATION ERROR: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::exit(2);
}

namespace {

struct Dma {
  char* dst;
  unsigned char data[4];
};

struct State {
  char* arena = nullptr;
  std::size_t arenaBytes = 0;
  std::vector<std::pair<const char*, std::size_t>> globals;
  std::vector<unsigned> writes, dmaWrites;
  int tid = -1, nthreads = 0;
  std::vector<std::deque<Dma>> queues;            // per thread, oldest first
  std::map<std::pair<int, int>, char*> m0;        // (wave, round) -> M0 of that DMA instruction
  std::map<std::pair<int, char*>, unsigned long long> lanesAt;  // (wave, M0) -> lanes that wrote there
  Stats stats;
};

State& S() {
  static State s;
  return s;
}

void needThread(const char* op) {
  if (S().tid < 0) die("%s outside a thread (set_thread)", op);
}

bool inGlobal(const void* p, std::size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (auto& [b, n] : S().globals)
    if (c >= b && c + bytes <= b + n) return true;
  return false;
}

void checkLds(const void* p, std::size_t bytes, std::size_t align, const char* op) {
  const char* c = static_cast<const char*>(p);
  if (c < S().arena || c + bytes > S().arena + S().arenaBytes)
    die("%s: LDS address %p (+%zu) outside the %zu-byte arena", op, p, bytes, S().arenaBytes);
  if ((std::size_t)(c - S().arena) % align) die("%s: LDS address %p not %zu-byte aligned", op, p, align);
}

void land(char* dst, const void* src, int bytes) {
  std::memcpy(dst, src, bytes);
  for (int i = 0; i < bytes; ++i) S().writes[(dst - S().arena) + i]++;
}

}  // namespace

void set_shared_arena(char* base, std::size_t bytes) {
  S().arena = base;
  S().arenaBytes = bytes;
  S().writes.assign(bytes, 0);
  S().dmaWrites.assign(bytes, 0);
}
void add_global(const void* base, std::size_t bytes) { S().globals.push_back({static_cast<const char*>(base), bytes}); }
void clear_globals() { S().globals.clear(); }
void set_thread(int tid, int nthreads) {
  S().tid = tid;
  S().nthreads = nthreads;
  if ((int)S().queues.size() < nthreads) S().queues.resize(nthreads);
}
unsigned writes_at(const void* p) { return S().writes[static_cast<const char*>(p) - S().arena]; }
unsigned dma_writes_at(const void* p) { return S().dmaWrites[static_cast<const char*>(p) - S().arena]; }
void reset_writes() {
  std::fill(S().writes.begin(), S().writes.end(), 0u);
  std::fill(S().dmaWrites.begin(), S().dmaWrites.end(), 0u);
}
long pending() {
  long n = 0;
  for (auto& q : S().queues) n += (long)q.size();
  return n;
}
void new_copy_phase() {
  S().m0.clear();
  S().lanesAt.clear();
}
Stats& stats() { return S().stats; }

void lds_dma_dword(void* lds_wave_base, const void* src, int lane, int round) {
  needThread("LDS DMA");
  const int tid = S().tid, wave = tid / 64;
  if (lane != tid % 64) die("LDS DMA: thread %d passed lane %d (its lane is %d)", tid, lane, tid % 64);
  char* base = static_cast<char*>(lds_wave_base);
  auto key = std::make_pair(wave, round);
  auto it = S().m0.find(key);
  if (it == S().m0.end()) S().m0[key] = base;
  else if (it->second != base)
    die("LDS DMA: M0 is not uniform: wave %d round %d: lane %d uses %p, another lane %p", wave, round, lane,
        (void*)base, (void*)it->second);
  unsigned long long& mask = S().lanesAt[{wave, base}];
  if (mask >> lane & 1) die("LDS DMA: lane %d of wave %d writes M0 %p twice", lane, wave, (void*)base);
  mask |= 1ull << lane;
  char* dst = base + 4 * lane;  // the hardware's address: M0 + 4 * lane
  checkLds(dst, 4, 4, "LDS DMA");
  Dma d{dst, {0, 0, 0, 0}};
  if (src) {
    if ((reinterpret_cast<std::uintptr_t>(src) & 3) != 0) die("LDS DMA: global address %p not dword aligned", src);
    if (!inGlobal(src, 4)) die("LDS DMA: global read at %p outside every buffer", src);
    std::memcpy(d.data, src, 4);
  } else {
    ++S().stats.dma_zero;
  }
  S().queues[tid].push_back(d);
  ++S().stats.dma;
}

void wait_vmcnt(int n) {
  needThread("s_waitcnt vmcnt");
  auto& q = S().queues[S().tid];
  while ((int)q.size() > n) {
    land(q.front().dst, q.front().data, 4);
    for (int i = 0; i < 4; ++i) S().dmaWrites[(q.front().dst - S().arena) + i]++;
    q.pop_front();
  }
  ++S().stats.waits;
}

void block_sync() { ++S().stats.block_syncs; }
void barrier_signal() { ++S().stats.signals; }
void barrier_wait() { ++S().stats.barrier_waits; }

void copy_sync(void* dst, const void* src, int bytes) {
  needThread("sync copy");
  if (!inGlobal(src, bytes)) die("sync copy: global read at %p (+%d) outside every buffer", src, bytes);
  if ((reinterpret_cast<std::uintptr_t>(src) % bytes) != 0) die("sync copy: global %p not %d-byte aligned", src, bytes);
  checkLds(dst, bytes, bytes, "sync copy");
  land(static_cast<char*>(dst), src, bytes);
  ++S().stats.sync_copies;
}

void zero_sync(void* dst, int bytes) {
  needThread("zero fill");
  checkLds(dst, bytes, bytes, "zero fill");
  unsigned char z[16] = {};
  land(static_cast<char*>(dst), z, bytes);
  ++S().stats.zero_fills;
}

// ---- layout tables (AMD matrix instruction calculator, CDNA2/3 and RDNA4) --------------------

void mfma_a(int l, int e, int& i, int& k) { i = l % 16; k = 4 * (l / 16) + e; }
void mfma_b(int l, int e, int& k, int& j) { k = 4 * (l / 16) + e; j = l % 16; }
void mfma_d(int l, int r, int& i, int& j) { i = 4 * (l / 16) + r; j = l % 16; }
void wmma_a(int l, int e, int& i, int& k) { i = l % 16; k = 8 * (e / 4) + 4 * (l / 16) + e % 4; }
void wmma_b(int l, int e, int& k, int& j) { k = 8 * (e / 4) + 4 * (l / 16) + e % 4; j = l % 16; }
void wmma_d(int l, int r, int& i, int& j) { i = 8 * (l / 16) + r; j = l % 16; }

// ---- lockstep wave ------------------------------------------------------------------------------

namespace {

enum class Op { None, Mfma, Wmma, Done };

struct Post {
  Op op = Op::None;
  bool bf16 = false;
  float* d = nullptr;
  const unsigned short* a = nullptr;
  const unsigned short* b = nullptr;
};

struct Wave {
  int lanes = 0;
  ucontext_t sched;
  ucontext_t ctx[64];
  std::vector<char> stack[64];
  Post post[64];
  int cur = -1;
  const std::function<void(int)>* body = nullptr;
};

Wave* g_wave = nullptr;

void laneEntry() {
  Wave* w = g_wave;
  int lane = w->cur;
  (*w->body)(lane);
  w->post[lane].op = Op::Done;
  swapcontext(&w->ctx[lane], &w->sched);
  std::abort();
}

float toFloat(unsigned short v, bool bf16) {
  if (bf16) {
    unsigned u = (unsigned)v << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  return (float)*reinterpret_cast<const _Float16*>(&v);
}

void resolve(Wave& w, Op op) {
  const int n = op == Op::Mfma ? 64 : 32, elems = op == Op::Mfma ? 4 : 8;
  if (w.lanes != n) die("%s needs a wave of %d lanes, this one has %d", op == Op::Mfma ? "MFMA" : "WMMA", n, w.lanes);
  const bool bf16 = w.post[0].bf16;
  double A[16][16], B[16][16], D[16][16];
  int seenA[16][16] = {}, seenB[16][16] = {}, seenD[16][16] = {};
  for (int l = 0; l < n; ++l) {
    if (w.post[l].bf16 != bf16) die("MMA: lanes disagree on the element type");
    for (int e = 0; e < elems; ++e) {
      int i, k, j;
      if (op == Op::Mfma) mfma_a(l, e, i, k); else wmma_a(l, e, i, k);
      A[i][k] = toFloat(w.post[l].a[e], bf16);
      seenA[i][k]++;
      if (op == Op::Mfma) mfma_b(l, e, k, j); else wmma_b(l, e, k, j);
      B[k][j] = toFloat(w.post[l].b[e], bf16);
      seenB[k][j]++;
      if (op == Op::Mfma) mfma_d(l, e, i, j); else wmma_d(l, e, i, j);
      D[i][j] = w.post[l].d[e];
      seenD[i][j]++;
    }
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      if (seenA[i][j] != 1 || seenB[i][j] != 1 || seenD[i][j] != 1) die("MMA layout table is not a bijection at (%d, %d)", i, j);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double s = D[i][j];
      for (int k = 0; k < 16; ++k) s += A[i][k] * B[k][j];
      D[i][j] = (float)s;
    }
  for (int l = 0; l < n; ++l)
    for (int e = 0; e < elems; ++e) {
      int i, j;
      if (op == Op::Mfma) mfma_d(l, e, i, j); else wmma_d(l, e, i, j);
      w.post[l].d[e] = (float)D[i][j];
    }
  if (op == Op::Mfma) ++S().stats.mfma; else ++S().stats.wmma;
}

void collective(Op op, float* d, const unsigned short* a, const unsigned short* b, bool bf16) {
  Wave* w = g_wave;
  if (!w || w->cur < 0) die("MMA collective outside run_wave");
  int lane = w->cur;
  w->post[lane] = Post{op, bf16, d, a, b};
  swapcontext(&w->ctx[lane], &w->sched);
}

}  // namespace

void mfma16(float* d, const unsigned short* a, const unsigned short* b, bool bf16) { collective(Op::Mfma, d, a, b, bf16); }
void wmma16(float* d, const unsigned short* a, const unsigned short* b, bool bf16) { collective(Op::Wmma, d, a, b, bf16); }

void run_wave(int lanes, const std::function<void(int)>& body) {
  if (lanes != 32 && lanes != 64) die("run_wave: %d lanes (32 or 64)", lanes);
  static Wave* pool = new Wave();
  Wave* w = pool;
  w->lanes = lanes;
  w->body = &body;
  g_wave = w;
  for (int l = 0; l < lanes; ++l) {
    w->stack[l].resize(256 * 1024);
    getcontext(&w->ctx[l]);
    w->ctx[l].uc_stack.ss_sp = w->stack[l].data();
    w->ctx[l].uc_stack.ss_size = w->stack[l].size();
    w->ctx[l].uc_link = nullptr;
    makecontext(&w->ctx[l], laneEntry, 0);
    w->post[l] = Post{};
  }
  for (;;) {
    for (int l = 0; l < lanes; ++l) {
      if (w->post[l].op == Op::Done) continue;
      w->post[l].op = Op::None;
      w->cur = l;
      swapcontext(&w->sched, &w->ctx[l]);
    }
    w->cur = -1;
    int done = 0;
    for (int l = 0; l < lanes; ++l) done += w->post[l].op == Op::Done;
    if (done == lanes) break;
    if (done) die("divergence: %d lane(s) finished while others wait at a collective", done);
    for (int l = 1; l < lanes; ++l)
      if (w->post[l].op != w->post[0].op) die("divergence: lanes 0 and %d wait at different collectives", l);
    resolve(*w, w->post[0].op);
  }
  g_wave = nullptr;
}

}  // namespace emu_amd
}  // namespace heddle
