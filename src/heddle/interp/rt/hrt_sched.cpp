// heddle/interp/rt/hrt_sched.cpp -- fibers, the scheduler, thread identity, block and named barriers,
// warp / warpgroup collectives, and hrt_run (the grid loop). See hrt_core.h for the model.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "heddle/interp/rt/hrt_core.h"
#include "heddle/interp/rt/hrt_fiber.h"

extern "C" void hrt_kernel_invoke(void* const* argv);  // the entry stub (HRT_DEFINE_ENTRY)
extern "C" unsigned char* hrt_kernel_smem(void);
extern "C" int hrt_kernel_wave(void);  // the wavefront size the kernel was compiled for (32 on CUDA)
extern "C" int hrt_kernel_amd(void);   // 1: a HIP kernel

namespace heddle_rt {

namespace {
thread_local Run* g_run = nullptr;
constexpr size_t kStack = 256 * 1024;
}  // namespace

Run& run() { return *g_run; }
Run* run_ptr() { return g_run; }
Cta& cta() { return *g_run->cta; }
Fiber& me() { return *g_run->cta->cur; }

// ---- fibers and scheduling ------------------------------------------------------------------

static void to_scheduler() {
  Cta& c = cta();
  Fiber* f = c.cur;
  fiber_switch(&f->sp, c.sched_sp);
}

static void fiber_main(void* arg) {
  Fiber* f = static_cast<Fiber*>(arg);
  hrt_kernel_invoke(run().argv);
  f->st = FState::Done;  // a barrier it never reaches becomes a deadlock report naming it
  ++cta().ndone;         // (an AMD barrier no longer waits for it)
  ++cta().rank_done[f->rank];
  cluster_barrier_try_complete();  // nor does a cluster barrier
  to_scheduler();
}

void tick() {
  Run& r = run();
  if (!r.cta || !r.cta->cur) return;
  Cta& c = *r.cta;
  ++c.events;
  ++r.events_total;
  if (c.max_events && c.events > c.max_events) {
    finding("deadlock", "CTA " + std::to_string(c.linear) + " ran more than " + std::to_string(c.max_events) +
                            " events without finishing (a livelock, or raise max_events)");
    c.aborted = true;
    to_scheduler();
  }
  if (c.policy == HRT_RANDOM && --c.burst <= 0) to_scheduler();  // preempted: stays Ready
}

void block_until(std::function<bool()> ready, std::string what, const void* pc) {
  if (ready()) return;
  Fiber& f = me();
  f.st = FState::Blocked;
  f.ready = std::move(ready);
  f.waiting = std::move(what);
  f.wait_pc = pc;
  to_scheduler();
  // resumed only once ready() held
  f.ready = nullptr;
  f.waiting.clear();
}

[[noreturn]] void abort_cta(const std::string& text) {
  finding("error", text);
  cta().aborted = true;
  to_scheduler();
  __builtin_unreachable();
}

static bool runnable(Fiber& f) {
  if (f.st == FState::Ready) return true;
  if (f.st == FState::Blocked && f.ready()) {
    f.st = FState::Ready;
    return true;
  }
  return false;
}

static std::string deadlock_text(Cta& c) {
  // group blocked threads by what they wait for
  std::map<std::string, std::vector<int>> by;
  std::vector<int> done;
  for (auto& f : c.fibers) {
    if (f->st == FState::Done) done.push_back(f->tid);
    else by[f->waiting + " at " + pcs(f->wait_pc)].push_back(f->tid);
  }
  auto ranges = [](const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size();) {
      size_t j = i;
      while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
      s += (s.empty() ? "" : ",") + std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
      i = j + 1;
    }
    return s;
  };
  std::string t = "deadlock in CTA " + std::to_string(c.linear) + " (" + std::to_string(c.idx.x) + "," +
                  std::to_string(c.idx.y) + "," + std::to_string(c.idx.z) + "): no thread can go on and no "
                  "asynchronous work is left to complete";
  for (auto& [w, ts] : by) t += "\n  threads " + ranges(ts) + " wait for " + w;
  if (!done.empty()) t += "\n  threads " + ranges(done) + " have exited";
  return t;
}

static void schedule_cta(Cta& c) {
  const int n = c.nthreads;
  for (;;) {
    if (c.aborted) return;
    // pick the next fiber
    Fiber* next = nullptr;
    bool any_live = false;
    if (c.policy == HRT_ADVERSARIAL) {
      for (int k = 0; k < n; ++k) {
        int i = c.flipped ? (c.cursor - k + n) % n : (c.cursor + k) % n;
        Fiber& f = *c.fibers[i];
        if (f.st != FState::Done) any_live = true;
        if (f.st != FState::Done && runnable(f)) {
          next = &f;
          c.cursor = i;
          break;
        }
      }
    } else {
      std::vector<Fiber*> ready;
      for (auto& f : c.fibers) {
        if (f->st != FState::Done) any_live = true;
        if (f->st != FState::Done && runnable(*f)) ready.push_back(f.get());
      }
      // asynchronous work lands at random moments (and whenever nothing else can run)
      if (!ready.empty() && (c.rng() & 7) == 0 && ((c.rng() & 1) ? land_one(true) : land_one_dma(true))) continue;
      if (!ready.empty()) {
        next = ready[c.rng() % ready.size()];
        c.burst = 1 + (int64_t)(c.rng() % 16);
      }
    }
    if (!any_live) return;
    if (!next) {
      if (land_one(c.policy == HRT_RANDOM) || land_one_dma(c.policy == HRT_RANDOM)) continue;  // as late as allowed
      finding("deadlock", deadlock_text(c));
      c.aborted = true;
      return;
    }
    next->st = FState::Ready;
    c.cur = next;
    fiber_switch(&c.sched_sp, next->sp);
    c.cur = nullptr;
  }
}

// ---- thread identity ------------------------------------------------------------------------

Dim3 thread_idx() { return me().idx; }
Dim3 block_idx() {
  Dim3 d = cta().idx;
  d.x += (unsigned)me().rank;
  return d;
}
Dim3 block_dim() {
  const hrt_launch* l = run().launch;
  return {l->block[0], l->block[1], l->block[2]};
}
Dim3 grid_dim() {
  const hrt_launch* l = run().launch;
  return {l->grid[0], l->grid[1], l->grid[2]};
}

// ---- barriers -------------------------------------------------------------------------------

static void bar_arrive_wait(int id, int count, const void* pc) {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  if (id < 0 || id > 15) abort_cta("bar.sync " + std::to_string(id) + " at " + pcs(pc) + ": barrier ids are 0..15");
  if (count <= 0 || count % 32 || count > c.cta_threads)
    abort_cta("bar.sync " + std::to_string(id) + ", " + std::to_string(count) + " at " + pcs(pc) +
              ": the thread count must be a positive multiple of 32, at most the CTA's " +
              std::to_string(c.cta_threads));
  NamedBar& b = c.bars[16 * f.rank + id];  // CTA-scoped: each CTA of a cluster has its own
  if (b.arrived == 0) {
    b.expected = count;
    b.pc = pc;
    b.join.assign(c.nagents(), 0);
    b.members.clear();
  } else if (b.expected != count) {
    abort_cta("bar.sync " + std::to_string(id) + " at " + pcs(pc) + " expects " + std::to_string(count) +
              " threads, but threads already waiting at " + pcs(b.pc) + " expect " + std::to_string(b.expected));
  }
  // Threads may meet at one barrier from different call sites: the compiler duplicates a call on the
  // two sides of a branch (so program points are not compared); a barrier that some thread never
  // reaches is a deadlock report.
  vc_join(b.join, f.vc);
  b.members.push_back(f.tid);
  const uint64_t gen = b.gen;
  if (++b.arrived == b.expected) {  // release everyone
    for (int t : b.members) {
      Fiber& m = *c.fibers[t];
      vc_join(m.vc, b.join);
      ++m.vc[m.tid];
    }
    b.arrived = 0;
    ++b.gen;
    c.flipped = !c.flipped;  // the next round runs the threads in the other order
    return;
  }
  std::string what = id == 0 ? "__syncthreads (barrier 0)" : "bar.sync " + std::to_string(id) + ", " + std::to_string(count);
  block_until([&b, gen] { return b.gen != gen; }, what + " (" + std::to_string(b.arrived) + " of " +
                  std::to_string(b.expected) + " arrived)", pc);
}

void syncthreads() { bar_arrive_wait(0, cta().cta_threads, __builtin_return_address(0)); }
void bar_sync(int id, int count) { bar_arrive_wait(id, count, __builtin_return_address(0)); }

// ---- collectives ----------------------------------------------------------------------------

// Every thread of the warp (32) or warpgroup (128) must call the same collective at the same program
// point; the last to arrive runs `all` over every member's in/out pointers, then all go on.
void collective(int width, const char* what, const void* pc, void* in, void* out,
                const std::function<void(void** ins, void** outs)>& all) {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  const char* unit = width == 128 ? "warpgroup" : c.amd ? "wave" : "warp";
  if (c.nthreads % width)
    abort_cta(std::string(what) + " at " + pcs(pc) + ": the CTA's " + std::to_string(c.nthreads) +
              " threads are not whole " + unit + "s of " + std::to_string(width));
  std::vector<Coll>& v = width == 32 ? c.warp_coll : width == 64 ? c.wave64_coll : c.wg_coll;
  Coll& k = v[f.tid / width];
  const int lane = f.tid % width;
  if (k.arrived == 0) {
    k.pc = pc;
    k.what = what;
  } else if (std::strcmp(k.what, what) != 0) {  // (call sites may differ: see bar_arrive_wait)
    abort_cta(std::string("divergent collective: ") + who(f.tid) + " calls " + what + " at " + pcs(pc) +
              " while its " + unit + " is in " + k.what + " at " + pcs(k.pc));
  }
  k.in[lane] = in;
  k.out[lane] = out;
  const uint64_t gen = k.gen;
  if (++k.arrived == width) {
    k.arrived = 0;
    all(k.in, k.out);
    ++k.gen;
    return;
  }
  block_until([&k, gen] { return k.gen != gen; }, std::string(what) + " (a collective: " +
                  std::to_string(k.arrived) + " of " + std::to_string(width) + " lanes arrived)", pc);
}

// elect.sync: a warp collective -- every lane of the membermask must arrive (a missing lane is a
// deadlock, a lane at another collective a divergence finding) -- true in exactly the lowest lane of the
// mask. heddle emits the full mask; a partial one is refused rather than modelled.
bool elect_sync(unsigned mask) {
  const void* pc = __builtin_return_address(0);
  const int lane = me().tid % 32;
  if (mask != 0xffffffffu)
    abort_cta(std::string("elect.sync at ") + pcs(pc) + " with membermask " + hex(mask) +
              ": the interpreter models the full-warp mask (0xffffffff) only");
  collective(32, "elect.sync", pc, nullptr, nullptr, [](void**, void**) {});
  return lane == __builtin_ctz(mask);
}

unsigned shfl_sync(unsigned mask, unsigned v, int src, int width, int mode) {
  struct In { unsigned v; int src; };
  In in{v, src};
  unsigned out = 0;
  collective(32, "shfl.sync", __builtin_return_address(0), &in, &out, [&](void** ins, void** outs) {
    for (int l = 0; l < 32; ++l) {
      In* a = static_cast<In*>(ins[l]);
      const int w = width > 0 ? width : 32, base = l & ~(w - 1);
      int s = l;
      if (mode == 0) s = base + (a->src & (w - 1));
      else if (mode == 1) s = (l - base >= a->src) ? l - a->src : l;
      else if (mode == 2) s = (l - base + a->src < w) ? l + a->src : l;
      else s = base + ((l - base) ^ a->src) % w;
      *static_cast<unsigned*>(outs[l]) = static_cast<In*>(ins[s])->v;
    }
  });
  (void)mask;
  return out;
}

// ---- the grid -------------------------------------------------------------------------------

// Runs CTA `linear` -- with a cluster launch, the `ranks` CTAs linear .. linear + ranks - 1 of one cluster
// (consecutive along x) together: one Cta whose threads are the CTAs' threads in rank order.
static void run_cta(Run& r, uint32_t linear, std::vector<char*>& stacks, int ranks) {
  const hrt_launch* l = r.launch;
  Cta c;
  c.run = &r;
  c.linear = linear;
  c.idx = {linear % l->grid[0], (linear / l->grid[0]) % l->grid[1], linear / (l->grid[0] * l->grid[1])};
  c.ranks = ranks;
  c.cta_threads = (int)(l->block[0] * l->block[1] * l->block[2]);
  c.rank_done.assign(ranks, 0);
  c.nthreads = ranks * c.cta_threads;
  c.nwg = (c.nthreads + 127) / 128;
  c.policy = l->schedule;
  c.rng.seed(l->seed * 0x9E3779B97F4A7C15ull + linear * 0xBF58476D1CE4E5B9ull + 1);
  c.max_events = l->max_events > 0 ? l->max_events : 50000000;
  c.warp_coll.resize((c.nthreads + 31) / 32);
  c.wave64_coll.resize((c.nthreads + 63) / 64);
  c.wg_coll.resize(c.nwg);
  c.wave = hrt_kernel_wave();
  c.amd = hrt_kernel_amd() != 0;
  c.hw_bar.sig.assign(c.nthreads, -1);
  c.hw_bar.member.assign(c.nthreads, 1);
  c.hw_bar.expected = c.nthreads;
  r.cta = &c;
  shadow_reset();
  std::memset(r.smem, 0xFF, r.smem_bytes);  // NaN-like garbage: a read of unwritten shared memory shows
  const int A = c.nagents();
  for (int t = 0; t < c.nthreads; ++t) {
    auto f = std::make_unique<Fiber>();
    f->tid = t;
    f->rank = t / c.cta_threads;
    const uint32_t lt = (uint32_t)(t % c.cta_threads);
    f->idx = {lt % l->block[0], (lt / l->block[0]) % l->block[1], lt / (l->block[0] * l->block[1])};
    f->vc.assign(A, 0);
    f->vc[t] = 1;
    if ((int)stacks.size() <= t) {
      void* m = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) {
        finding("error", "cannot allocate the stack of thread " + std::to_string(t));
        r.cta = nullptr;
        return;
      }
      mprotect(m, 4096, PROT_NONE);  // guard page: a stack overflow faults instead of corrupting
      stacks.push_back(static_cast<char*>(m));
    }
    f->stack_lo = stacks[t];
    f->stack_hi = stacks[t] + kStack;
    f->sp = fiber_prepare(stacks[t] + 4096, kStack - 4096, &fiber_main, f.get());
    c.fibers.push_back(std::move(f));
  }
  c.cluster_bar.join.assign(A, 0);
  c.cluster_bar.done.assign(A, 0);
  regs_reset(c, l->regs_per_thread);
  schedule_cta(c);
  if (!c.aborted) finish_cta_async();
  if (!c.aborted) finish_cta_amd();
  r.cta = nullptr;
}

}  // namespace heddle_rt

using namespace heddle_rt;

namespace heddle_rt {
std::string report_json(const Run& r, uint64_t ctas_run);
}

extern "C" int hrt_abi_version(void) { return HRT_ABI_VERSION; }

extern "C" void hrt_free(char* p) { std::free(p); }

// Runs the CTAs in `ids` (pulled through `next`) on the calling OS thread with its own run state and
// shared-memory window; `stop` (stop_at_first) ends every worker after the first CTA with a finding.
static void run_ctas(Run& r, const std::vector<uint32_t>& ids, std::atomic<size_t>& next, std::atomic<bool>& stop,
                     uint64_t* ran) {
  g_run = &r;
  r.smem = hrt_kernel_smem();  // this OS thread's window (thread_local in the kernel library)
  std::vector<char*> stacks;
  for (size_t i; !stop.load() && (i = next.fetch_add(1)) < ids.size();) {
    const size_t before = r.findings.size();
    run_cta(r, ids[i] * r.ranks, stacks, r.ranks);
    ++*ran;
    if (r.findings.size() != before && r.launch->stop_at_first) stop.store(true);
  }
  for (char* s : stacks) munmap(s, kStack);
  g_run = nullptr;
}

extern "C" int hrt_run(const hrt_launch* l, char** json) {
  Run r;
  r.launch = l;
  r.smem_bytes = l->smem_bytes;
  r.max_findings = l->max_findings > 0 ? l->max_findings : 20;
  auto fail = [&](const std::string& msg) {
    *json = strdup(msg.c_str());
    return 1;
  };
  if (l->smem_bytes > HRT_SMEM_WINDOW_BYTES) return fail("dynamic shared memory above the interpreter's window");
  r.ranks = l->cluster > 1 ? (int)l->cluster : 1;
  if (r.ranks > HRT_MAX_CLUSTER || l->grid[0] % r.ranks)
    return fail("a cluster of " + std::to_string(r.ranks) + " CTAs: the interpreter runs clusters of at most " +
                std::to_string(HRT_MAX_CLUSTER) + " along x, dividing grid.x (" + std::to_string(l->grid[0]) + ")");
  // a cluster's window: every rank's shared memory (rank r's at r * HRT_SMEM_WINDOW_BYTES)
  if (r.ranks > 1) r.smem_bytes = (uint32_t)(r.ranks - 1) * HRT_SMEM_WINDOW_BYTES + l->smem_bytes;
  if (l->block[0] * l->block[1] * l->block[2] == 0 || l->block[0] * l->block[1] * l->block[2] > 1024)
    return fail("a CTA has 1..1024 threads");
  std::vector<void*> argv(l->nargs);
  for (int i = 0; i < l->nargs; ++i)
    argv[i] = l->args[i].kind == HRT_TENSORMAP ? (void*)l->args[i].map : (void*)&l->args[i].bits;
  r.argv = argv.data();
  // output tracking: one counter per element of every writable region, shared by the workers
  size_t elems = 0;
  for (int i = 0; i < l->nregions; ++i) {
    r.region_granule0.push_back(elems);
    if (l->regions[i].writable) elems += l->regions[i].bytes / std::max(1, l->regions[i].elem_bytes);
  }
  std::unique_ptr<std::atomic<uint8_t>[]> written(new std::atomic<uint8_t>[elems + 1]);
  for (size_t i = 0; i <= elems; ++i) written[i].store(0, std::memory_order_relaxed);
  r.out_written = written.get();
  const uint64_t total = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
  std::vector<uint32_t> ids;  // clusters (CTAs without a cluster launch): linear id / ranks
  if (l->ncta_subset > 0) {
    for (int i = 0; i < l->ncta_subset; ++i)
      if (l->cta_subset[i] < total && (ids.empty() || ids.back() != l->cta_subset[i] / r.ranks))
        ids.push_back(l->cta_subset[i] / r.ranks);
  } else {
    for (uint64_t i = 0; i < total / r.ranks; ++i) ids.push_back((uint32_t)i);
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  uint64_t ran = 0;
  const int workers = (int)std::min<size_t>(std::max(1, l->workers), std::max<size_t>(1, ids.size()));
  if (workers <= 1) {
    run_ctas(r, ids, next, stop, &ran);
  } else {  // CTAs in parallel: one OS thread each (own window, own fibers), findings merged after
    std::vector<Run> rs(workers, r);
    std::vector<uint64_t> rans(workers, 0);
    std::vector<std::thread> ts;
    for (int w = 0; w < workers; ++w) ts.emplace_back(run_ctas, std::ref(rs[w]), std::cref(ids), std::ref(next), std::ref(stop), &rans[w]);
    for (auto& t : ts) t.join();
    for (int w = 0; w < workers; ++w) {
      ran += rans[w];
      r.events_total += rs[w].events_total;
      for (auto& [k, n] : rs[w].per_kind) r.per_kind[k] += n;
      for (auto& f : rs[w].findings) r.findings.push_back(f);
    }
    // one order whatever thread ran which CTA: by CTA, then as found
    std::stable_sort(r.findings.begin(), r.findings.end(), [](const Finding& a, const Finding& b) { return a.cta < b.cta; });
    std::map<std::string, int> kept;
    std::vector<Finding> capped;
    for (auto& f : r.findings)
      if (++kept[f.kind] <= r.max_findings) capped.push_back(f);
    r.findings.swap(capped);
  }
  *json = strdup(report_json(r, ran).c_str());
  return 0;
}
