// Definitions of the heddle::emu primitives declared by the heddle device headers under
// HEDDLE_HOST_EMULATION, plus the lockstep warp scheduler. See warp_emu.h for the semantics.
#include "warp_emu.h"

#include <ucontext.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "heddle/heddle_types.cuh"

namespace heddle {
namespace emu {

void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "EMULATION ERROR: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::fflush(stdout);
  std::exit(2);
}

namespace {

struct Region {
  const char* base;
  std::size_t bytes;
};

struct Pending {
  char* dst;
  unsigned char data[16];
  int bytes;
  long group;  // -1 until committed
};

struct State {
  Region smem{nullptr, 0};
  std::vector<Region> globals;
  std::vector<unsigned> writes;
  int tid = -1;
  std::vector<std::vector<Pending>> pending;
  std::vector<long> committed;
  std::vector<std::vector<const char*>> store_log;
  Stats stats;
};

State& S() {
  static State s;
  return s;
}

bool in_smem(const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  return S().smem.base && c >= S().smem.base && c + n <= S().smem.base + S().smem.bytes;
}

bool in_global(const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  for (const Region& r : S().globals)
    if (c >= r.base && c + n <= r.base + r.bytes && (n > 0 || c < r.base + r.bytes)) return true;
  return false;
}

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

void need_thread(const char* op) {
  if (S().tid < 0) die("%s outside a CTA thread (set_thread not called)", op);
}

void land(char* dst, const unsigned char* data, int bytes) {
  std::memcpy(dst, data, bytes);
  std::size_t o = dst - S().smem.base;
  for (int i = 0; i < bytes; ++i) ++S().writes[o + i];
}

void log_store(const void* dst) { S().store_log[S().tid].push_back(static_cast<const char*>(dst)); }

}  // namespace

void set_shared_arena(char* base, std::size_t bytes) {
  if (addr(base) % 128) die("shared arena must be 128-byte aligned");
  S().smem = {base, bytes};
  S().writes.assign(bytes, 0);
}
void add_global(const void* base, std::size_t bytes) {
  S().globals.push_back({static_cast<const char*>(base), bytes});
}
void clear_globals() { S().globals.clear(); }

void set_thread(int tid, int nthreads) {
  if ((int)S().pending.size() < nthreads) {
    S().pending.resize(nthreads);
    S().committed.resize(nthreads, 0);
    S().store_log.resize(nthreads);
  }
  S().tid = tid;
}

unsigned writes_at(const void* p) {
  if (!in_smem(p, 1)) die("writes_at: address outside the shared arena");
  return S().writes[static_cast<const char*>(p) - S().smem.base];
}
void reset_writes(const void* p, std::size_t bytes) {
  if (!in_smem(p, bytes)) die("reset_writes: range outside the shared arena");
  std::size_t o = static_cast<const char*>(p) - S().smem.base;
  for (std::size_t i = 0; i < bytes; ++i) S().writes[o + i] = 0;
}
long pending_copies() {
  long n = 0;
  for (auto& v : S().pending) n += (long)v.size();
  return n;
}
Stats& stats() { return S().stats; }
void reset_stats() { S().stats = Stats(); }

void check_store_conflicts() {
  auto& log = S().store_log;
  std::size_t maxlen = 0;
  for (auto& v : log) maxlen = v.size() > maxlen ? v.size() : maxlen;
  for (std::size_t it = 0; it < maxlen; ++it)
    for (std::size_t q = 0; q < log.size(); q += 8) {
      unsigned seen = 0;
      for (std::size_t t = q; t < q + 8 && t < log.size(); ++t) {
        if (it >= log[t].size()) continue;
        unsigned bank_group = (unsigned)(((log[t][it] - S().smem.base) / 16) % 8);
        if (seen & (1u << bank_group)) ++S().stats.store_conflicts;
        seen |= 1u << bank_group;
      }
    }
  for (auto& v : log) v.clear();
}

// ---- copy primitives -------------------------------------------------------------------------

void cp_async(void* dst, const void* src, int cp_bytes, int src_bytes, bool cg) {
  need_thread("cp.async");
  if (cp_bytes != 4 && cp_bytes != 8 && cp_bytes != 16) die("cp.async: cp-size %d", cp_bytes);
  if (cg && cp_bytes != 16) die("cp.async.cg requires cp-size 16 (got %d)", cp_bytes);
  if (src_bytes < 0 || src_bytes > cp_bytes) die("cp.async: src-size %d > cp-size %d", src_bytes, cp_bytes);
  if (addr(dst) % cp_bytes || addr(src) % cp_bytes) die("cp.async: misaligned address (cp-size %d)", cp_bytes);
  if (!in_smem(dst, cp_bytes)) die("cp.async: destination outside the shared arena");
  if (!in_global(src, src_bytes)) die("cp.async: source [%p, +%d) outside every global buffer", src, src_bytes);
  Pending p;
  p.dst = static_cast<char*>(dst);
  p.bytes = cp_bytes;
  p.group = -1;
  std::memset(p.data, 0, sizeof p.data);
  std::memcpy(p.data, src, src_bytes);
  S().pending[S().tid].push_back(p);
  ++S().stats.cp_async[cp_bytes];
  if (cg) ++S().stats.cp_async_cg;
  if (cp_bytes == 16) log_store(dst);
}

void cp_async_commit() {
  need_thread("cp.async.commit_group");
  long g = S().committed[S().tid]++;
  for (Pending& p : S().pending[S().tid])
    if (p.group < 0) p.group = g;
  ++S().stats.commits;
}

void cp_async_wait(int n) {
  need_thread("cp.async.wait_group");
  long limit = S().committed[S().tid] - n;  // groups < limit must be complete
  auto& v = S().pending[S().tid];
  std::vector<Pending> keep;
  for (Pending& p : v) {
    if (p.group >= 0 && p.group < limit) land(p.dst, p.data, p.bytes);
    else keep.push_back(p);
  }
  v.swap(keep);
  ++S().stats.waits;
}

void block_sync() { ++S().stats.block_syncs; }

void copy_sync(void* dst, const void* src, int bytes) {
  need_thread("sync copy");
  if (addr(dst) % bytes || addr(src) % bytes) die("sync copy: misaligned %d-byte access", bytes);
  if (!in_smem(dst, bytes)) die("sync copy: destination outside the shared arena");
  if (!in_global(src, bytes)) die("sync copy: source [%p, +%d) outside every global buffer", src, bytes);
  unsigned char tmp[16];
  std::memcpy(tmp, src, bytes);
  land(static_cast<char*>(dst), tmp, bytes);
  ++S().stats.sync_copies;
}

void zero_sync(void* dst, int bytes) {
  need_thread("sync zero fill");
  if (addr(dst) % bytes) die("sync zero fill: misaligned %d-byte store", bytes);
  if (!in_smem(dst, bytes)) die("sync zero fill: destination outside the shared arena");
  unsigned char z[16] = {};
  land(static_cast<char*>(dst), z, bytes);
  ++S().stats.zero_fills;
}

// ---- lockstep warp ----------------------------------------------------------------------------

namespace {

// Coroutine switch. glibc swapcontext makes a sigprocmask system call per switch, which dominates
// the run time (a collective costs 64 switches), so x86-64 uses a minimal switch of the SysV
// callee-saved registers; other hosts fall back to ucontext.
#if defined(__x86_64__) && !defined(HEDDLE_EMU_UCONTEXT)
extern "C" void heddle_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl heddle_emu_switch
  .type heddle_emu_switch, @function
heddle_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size heddle_emu_switch, .-heddle_emu_switch
)");

struct Ctx {
  void* sp = nullptr;
};
void ctx_init(Ctx& c, std::vector<char>& stack, void (*entry)()) {
  std::uintptr_t top = reinterpret_cast<std::uintptr_t>(stack.data() + stack.size()) & ~std::uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                                 // keeps rsp % 16 == 8 at entry, like a call
  *--sp = reinterpret_cast<void*>(entry);          // popped by ret
  for (int i = 0; i < 6; ++i) *--sp = nullptr;     // rbp rbx r12..r15
  c.sp = sp;
}
void ctx_switch(Ctx& from, Ctx& to) { heddle_emu_switch(&from.sp, to.sp); }
#else
struct Ctx {
  ucontext_t uc;
};
void ctx_init(Ctx& c, std::vector<char>& stack, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack.data();
  c.uc.uc_stack.ss_size = stack.size();
  c.uc.uc_link = nullptr;  // lane_entry never returns
  makecontext(&c.uc, entry, 0);
}
void ctx_switch(Ctx& from, Ctx& to) { swapcontext(&from.uc, &to.uc); }
#endif

enum class Op { None, Ldmatrix, Mma, Done };

struct Post {
  Op op = Op::None;
  int num = 0;
  bool flag = false;  // ldmatrix: .trans, mma: bf16
  const char* addr = nullptr;
  unsigned* regs = nullptr;
  float* d = nullptr;
  unsigned a[4] = {}, b[2] = {};
};

struct Warp {
  Ctx sched;
  Ctx ctx[32];
  std::vector<char> stack[32];
  Post post[32];
  int cur = -1;
  const std::function<void(int)>* body = nullptr;
};

Warp* g_warp = nullptr;

void lane_entry() {
  Warp* w = g_warp;
  int lane = w->cur;
  (*w->body)(lane);
  w->post[lane].op = Op::Done;
  ctx_switch(w->ctx[lane], w->sched);  // never resumed
  std::abort();
}

Warp& need_warp(const char* op) {
  if (!g_warp || g_warp->cur < 0) die("%s outside run_warp: warp collectives need all 32 lanes", op);
  return *g_warp;
}

void yield(Warp& w) {
  int lane = w.cur;
  ctx_switch(w.ctx[lane], w.sched);
}

unsigned short u16_at(const char* p, int idx) {
  unsigned short v;
  std::memcpy(&v, p + 2 * idx, 2);
  return v;
}

void resolve_ldmatrix(Warp& w) {
  const int num = w.post[0].num;
  const bool trans = w.post[0].flag;
  Stats& st = S().stats;
  ++st.ldmatrix;
  if (trans) ++st.ldmatrix_trans;
  if (num == 2) ++st.ldmatrix_x2;
  for (int l = 0; l < 8 * num; ++l) {
    const char* p = w.post[l].addr;
    if (addr(p) % 16) die("ldmatrix: lane %d row address not 16-byte aligned", l);
    if (!in_smem(p, 16)) die("ldmatrix: lane %d row address outside the shared arena", l);
  }
  for (int j = 0; j < num; ++j) {
    unsigned seen = 0;
    for (int i = 0; i < 8; ++i) {
      unsigned g = (unsigned)(((w.post[8 * j + i].addr - S().smem.base) / 16) % 8);
      if (seen & (1u << g)) ++st.ldmatrix_conflicts;
      seen |= 1u << g;
    }
  }
  for (int l = 0; l < 32; ++l)
    for (int j = 0; j < num; ++j) {
      unsigned lo, hi;
      if (!trans) {  // (row l/4, cols 2(l%4), 2(l%4)+1) of matrix j
        const char* row = w.post[8 * j + l / 4].addr;
        lo = u16_at(row, 2 * (l % 4));
        hi = u16_at(row, 2 * (l % 4) + 1);
      } else {  // transpose: (rows 2(l%4), 2(l%4)+1, col l/4) of stored matrix j
        lo = u16_at(w.post[8 * j + 2 * (l % 4)].addr, l / 4);
        hi = u16_at(w.post[8 * j + 2 * (l % 4) + 1].addr, l / 4);
      }
      w.post[l].regs[j] = lo | (hi << 16);
    }
}

double elem(unsigned reg, int half, bool bf16) {
  unsigned short bits = (unsigned short)(half ? reg >> 16 : reg & 0xffffu);
  return bf16 ? (double)to_float(heddle::bf16{bits}) : (double)to_float(heddle::f16{bits});
}

void resolve_mma(Warp& w) {
  const bool bf16 = w.post[0].flag;
  ++S().stats.mma;
  if (bf16) ++S().stats.mma_bf16;
  double A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    const Post& p = w.post[l];
    int g = l / 4, t = l % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = elem(p.a[0], h, bf16);
      A[g + 8][2 * t + h] = elem(p.a[1], h, bf16);
      A[g][2 * t + 8 + h] = elem(p.a[2], h, bf16);
      A[g + 8][2 * t + 8 + h] = elem(p.a[3], h, bf16);
      B[2 * t + h][g] = elem(p.b[0], h, bf16);
      B[2 * t + 8 + h][g] = elem(p.b[1], h, bf16);
      C[g][2 * t + h] = p.d[h];
      C[g + 8][2 * t + h] = p.d[2 + h];
    }
  }
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    for (int r = 0; r < 4; ++r) {
      int row = g + 8 * (r / 2), col = 2 * t + (r % 2);
      double s = C[row][col];
      for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
      w.post[l].d[r] = (float)s;
    }
  }
}

}  // namespace

void ldmatrix(unsigned* regs, int num, bool trans, const void* row_addr) {
  Warp& w = need_warp("ldmatrix");
  Post& p = w.post[w.cur];
  p.op = Op::Ldmatrix;
  p.num = num;
  p.flag = trans;
  p.addr = static_cast<const char*>(row_addr);
  p.regs = regs;
  yield(w);
}

void mma_m16n8k16(float* d, const unsigned* a, const unsigned* b, bool bf16) {
  Warp& w = need_warp("mma");
  Post& p = w.post[w.cur];
  p.op = Op::Mma;
  p.flag = bf16;
  p.d = d;
  for (int i = 0; i < 4; ++i) p.a[i] = a[i];
  for (int i = 0; i < 2; ++i) p.b[i] = b[i];
  yield(w);
}

void run_warp(const std::function<void(int)>& body) {
  if (g_warp) die("run_warp: nested warps");
  static Warp* pool = new Warp();  // stacks reused: allocating 32 fresh stacks per warp is slow
  Warp* w = pool;
  w->body = &body;
  g_warp = w;
  for (int l = 0; l < 32; ++l) {
    if (w->stack[l].empty()) w->stack[l].resize(128 * 1024);
    w->post[l] = Post();
    ctx_init(w->ctx[l], w->stack[l], lane_entry);
  }
  for (;;) {
    for (int l = 0; l < 32; ++l) {
      if (w->post[l].op == Op::Done) continue;
      w->post[l].op = Op::None;
      w->cur = l;
      ctx_switch(w->sched, w->ctx[l]);
      w->cur = -1;
      if (w->post[l].op == Op::None) die("lane %d stopped without reaching a collective", l);
    }
    int done = 0;
    for (int l = 0; l < 32; ++l) done += w->post[l].op == Op::Done;
    if (done == 32) break;
    if (done) die("warp divergence: %d lanes finished while others wait at a collective", done);
    for (int l = 1; l < 32; ++l)
      if (w->post[l].op != w->post[0].op || w->post[l].num != w->post[0].num ||
          w->post[l].flag != w->post[0].flag)
        die("non-uniform collective: lane %d differs from lane 0 (.aligned violated)", l);
    if (w->post[0].op == Op::Ldmatrix) resolve_ldmatrix(*w);
    else resolve_mma(*w);
  }
  g_warp = nullptr;
}

}  // namespace emu
}  // namespace heddle
