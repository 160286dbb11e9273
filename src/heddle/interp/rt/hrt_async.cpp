// heddle/interp/rt/hrt_async.cpp -- the primitives the headers call under HEDDLE_INTERPRET, with their
// ordering semantics (PTX ISA): cp.async groups, mbarriers (phases, arrival counts, transaction bytes,
// parity waits), TMA loads completing on an mbarrier, bulk-store groups, wgmma groups, proxy fences;
// and the warp collectives ldmatrix / mma.sync. The data each one moves or computes
// comes from hrt_ptx.h (written from the ISA, independently of the device headers' layout code).
#include <algorithm>
#include <cstring>

#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

namespace {

struct AccessSink : ptx::Access {  // routes a primitive's shared accesses into the shadow state
  uint32_t agent;
  Clock clk;
  uint32_t tid;
  const VC* vc;
  const void* pc;
  bool async_proxy;
  const char* what;
  uint32_t base = 0;  // window offset of the CTA the primitive's offsets are relative to (wgmma descriptors)
  void read(uint32_t off, uint32_t bytes) override {
    smem_access(base + off, bytes, false, agent, clk, tid, *vc, pc, async_proxy, what);
  }
  void write(uint32_t off, uint32_t bytes) override {
    smem_access(base + off, bytes, true, agent, clk, tid, *vc, pc, async_proxy, what);
  }
};

struct Recorder : ptx::Access {  // collects the byte ranges a TMA box image covers
  std::vector<std::pair<uint32_t, uint32_t>> w;
  void write(uint32_t off, uint32_t bytes) override { w.push_back({off, bytes}); }
};

// Global byte ranges a TMA box touches inside the tensor (fn(address, bytes) per element), and the
// shared ranges of its image; built on hrt_ptx_tma.h's box walk.
template <class F>
std::string tma_global_elems(const ptx::TensorMap& m, const int32_t* coords, uint32_t off, F fn) {
  ptx::TmaBox b;
  std::string err = ptx::tma_check("cp.async.bulk.tensor", m, HRT_SMEM_WINDOW_TOTAL, off, &b);
  if (!err.empty()) return err;
  ptx::tma_walk(m, b, coords, off, [&](uint32_t, uint32_t, int64_t g, uint32_t) {
    if (g >= 0) fn(m.base + (uint64_t)g, (uint32_t)b.esz);
  });
  return "";
}

// wait_group N of one engine (cp.async, wgmma, bulk store) by the calling thread: the thread's groups
// 1..committed-N are complete: `land` each of its pending pieces in them, drop them, and publish the
// completion on the engine's agent clock.
template <class Pending, class Land>
void retire_groups(std::vector<Pending>& pending, int committed, int n, int agent, Land land) {
  Fiber& f = me();
  const int upto = committed - n;
  if (upto <= 0) return;
  std::vector<Pending> keep;
  for (auto& p : pending) {
    if (p.tid == f.tid && p.group <= upto) land(p);
    else keep.push_back(std::move(p));
  }
  pending.swap(keep);
  f.vc[agent] = std::max<Clock>(f.vc[agent], upto);
}

}  // namespace

uint32_t cvta_generic_to_shared(const void* p) {
  Run& r = run();
  const uint64_t a = reinterpret_cast<uint64_t>(p), s = reinterpret_cast<uint64_t>(r.smem);
  if (a < s || a >= s + HRT_SMEM_WINDOW_TOTAL)
    abort_cta("__cvta_generic_to_shared at " + pcs(__builtin_return_address(0)) + " of " + hex(a) +
              ", which is not a shared-memory address");
  return (uint32_t)(a - s);
}

// ---- cp.async -------------------------------------------------------------------------------

void cp_async_shared_global(uint32_t dst, const void* src, int cp_bytes, int src_bytes, bool cg) {
  Cta& c = cta();
  Fiber& f = me();
  const void* pc = __builtin_return_address(0);
  tick();
  if (!(cp_bytes == 4 || cp_bytes == 8 || cp_bytes == 16) || (cg && cp_bytes != 16))
    abort_cta("cp.async at " + pcs(pc) + " copies " + std::to_string(cp_bytes) + " bytes: .ca takes 4, 8 or 16, .cg 16");
  if (src_bytes < 0 || src_bytes > cp_bytes)
    abort_cta("cp.async at " + pcs(pc) + ": src-size " + std::to_string(src_bytes) + " outside [0, " + std::to_string(cp_bytes) + "]");
  if (dst % cp_bytes) abort_cta("cp.async at " + pcs(pc) + ": shared address " + std::to_string(dst) + " not aligned to " + std::to_string(cp_bytes));
  PendingCopy p{f.tid, f.cp_committed + 1, dst, cp_bytes, {}};
  if (src_bytes > 0) {
    const uint64_t a = reinterpret_cast<uint64_t>(src);
    if (a % cp_bytes) abort_cta("cp.async at " + pcs(pc) + ": global address " + hex(a) + " not aligned to " + std::to_string(cp_bytes));
    if (region_of(a, src_bytes) < 0) abort_cta("cp.async at " + pcs(pc) + " by " + who(f.tid) + " reads " + std::to_string(src_bytes) +
                       " bytes at " + hex(a) + ", outside every tensor of the launch");
    std::memcpy(p.data, src, src_bytes);
  }
  // the write is the copy engine's, ordered only by the wait that retires its group
  smem_access(dst, cp_bytes, true, c.agent_cp(f.tid), p.group, f.tid, f.vc, pc, false, "cp.async");
  c.copies.push_back(p);
}

void cp_async_commit_group() {
  tick();
  ++me().cp_committed;
}

static void land_copy(const PendingCopy& p) { std::memcpy(run().smem + p.dst, p.data, p.bytes); }

void cp_async_wait_group(int n) {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  retire_groups(c.copies, f.cp_committed, n, c.agent_cp(f.tid), land_copy);
}

// ---- ldmatrix / mma.sync (warp collectives) --------------------------------------------------

void ldmatrix_sync_aligned_m8n8(int num, bool trans, uint32_t* regs, uint32_t addr) {
  const void* pc = __builtin_return_address(0);
  if (!(num == 1 || num == 2 || num == 4)) abort_cta("ldmatrix at " + pcs(pc) + " with ." + std::to_string(num) + " matrices");
  collective(32, num == 4 ? (trans ? "ldmatrix.x4.trans" : "ldmatrix.x4") : num == 2 ? (trans ? "ldmatrix.x2.trans" : "ldmatrix.x2")
                                                                                   : (trans ? "ldmatrix.x1.trans" : "ldmatrix.x1"),
             pc, &addr, regs, [&](void** ins, void** outs) {
               uint32_t rows[32];
               uint32_t out[32][4];
               for (int l = 0; l < 32; ++l) rows[l] = *static_cast<uint32_t*>(ins[l]);
               // each lane's 16-byte row read is that lane's own access
               struct LaneSink : ptx::Access {
                 const void* pc;
                 void read(uint32_t off, uint32_t bytes) override {
                   Cta& c = cta();
                   // attribute to the lane whose row covers the bytes
                   for (int l = 0; l < 32; ++l) {
                     Fiber& f = *c.fibers[(me().tid / 32) * 32 + l];
                     if (off >= rows[l] && off < rows[l] + 16) {
                       smem_access(off, bytes, false, f.tid, f.vc[f.tid], f.tid, f.vc, pc, false, "ldmatrix");
                       return;
                     }
                   }
                   Fiber& f = me();
                   smem_access(off, bytes, false, f.tid, f.vc[f.tid], f.tid, f.vc, pc, false, "ldmatrix");
                 }
                 uint32_t rows[32];
               } sink;
               sink.pc = pc;
               std::memcpy(sink.rows, rows, sizeof rows);
               std::string err = ptx::ldmatrix(num, trans, run().smem, run().smem_bytes, rows, out, &sink);
               if (!err.empty()) abort_cta("ldmatrix at " + pcs(pc) + ": " + err);
               for (int l = 0; l < 32; ++l) std::memcpy(outs[l], out[l], sizeof(uint32_t) * num);
             });
}

void stmatrix_sync_aligned_m8n8(int num, const uint32_t* regs, uint32_t addr) {
  const void* pc = __builtin_return_address(0);
  if (!(num == 1 || num == 2 || num == 4)) abort_cta("stmatrix at " + pcs(pc) + " with ." + std::to_string(num) + " matrices");
  struct In { uint32_t addr; uint32_t regs[4]; };
  In in{addr, {0, 0, 0, 0}};
  std::memcpy(in.regs, regs, sizeof(uint32_t) * num);
  collective(32, num == 4 ? "stmatrix.x4" : num == 2 ? "stmatrix.x2" : "stmatrix.x1", pc, &in, nullptr,
             [&](void** ins, void**) {
               // each lane's 16-byte row write is that lane's own generic-proxy store (its fence.proxy.async covers it)
               struct LaneSink : ptx::Access {
                 const void* pc;
                 uint32_t rows[32];
                 int num;
                 void write(uint32_t off, uint32_t bytes) override {
                   Cta& c = cta();
                   for (uint32_t o = off; o < off + bytes; o += 16)
                     for (int l = 0; l < 8 * num; ++l)
                       if (o >= rows[l] && o < rows[l] + 16) {
                         Fiber& f = *c.fibers[(me().tid / 32) * 32 + l];
                         smem_access(o, 16, true, f.tid, f.vc[f.tid], f.tid, f.vc, pc, false, "stmatrix");
                         break;
                       }
                 }
               } sink;
               sink.pc = pc;
               sink.num = num;
               uint32_t vals[32][4];
               for (int l = 0; l < 32; ++l) {
                 auto* x = static_cast<In*>(ins[l]);
                 sink.rows[l] = x->addr;
                 std::memcpy(vals[l], x->regs, sizeof vals[l]);
               }
               std::string err = ptx::stmatrix(num, run().smem, run().smem_bytes, sink.rows, vals, &sink);
               if (!err.empty()) abort_cta("stmatrix at " + pcs(pc) + ": " + err);
             });
}

void mma_sync_aligned_m16n8k16_row_col_f32(bool bf16, float* d, const uint32_t* a, const uint32_t* b) {
  const void* pc = __builtin_return_address(0);
  struct In { const uint32_t* a; const uint32_t* b; };
  In in{a, b};
  collective(32, bf16 ? "mma.sync.m16n8k16.bf16" : "mma.sync.m16n8k16.f16", pc, &in, d, [&](void** ins, void** outs) {
    uint32_t A[32][4], B[32][2];
    float D[32][4];
    for (int l = 0; l < 32; ++l) {
      In* p = static_cast<In*>(ins[l]);
      std::memcpy(A[l], p->a, 16);
      std::memcpy(B[l], p->b, 8);
      std::memcpy(D[l], outs[l], 16);
    }
    ptx::mma_m16n8k16(bf16, A, B, D);
    for (int l = 0; l < 32; ++l) std::memcpy(outs[l], D[l], 16);
  });
}

// ---- mbarriers --------------------------------------------------------------------------------

Mbar& mbar_at(uint32_t bar, const void* pc, const char* what) {
  Cta& c = cta();
  Fiber& f = me();
  auto it = c.mbars.find(bar);
  if (it == c.mbars.end())
    abort_cta(std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + " on shared offset " + std::to_string(bar) +
              ", where no mbarrier was initialised");
  Mbar& m = it->second;
  if (m.init_tid != f.tid && f.vc[m.init_tid] < m.init_clk)
    finding("race", std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + " uses the mbarrier at shared offset " +
                        std::to_string(bar) + " before its mbarrier.init at " + pcs(m.init_pc) + " by " +
                        who(m.init_tid) + " is ordered before it (a barrier after the init is missing)");
  const int owner = (int)(bar / HRT_SMEM_WINDOW_BYTES);
  if (owner != f.rank) {  // another CTA of the cluster: the init must have been fenced for the cluster
    if (!m.fence_clk || f.vc[m.init_tid] < m.fence_clk)
      finding("race", std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + " (CTA rank " + std::to_string(f.rank) +
                          ") uses the mbarrier of CTA rank " + std::to_string(owner) + " at shared offset " +
                          std::to_string(bar) + " before a fence.mbarrier_init.release.cluster after its init at " +
                          pcs(m.init_pc) + " is ordered before it (fence the init, then barrier.cluster)");
    if (c.rank_done[owner] == c.cta_threads)
      finding("error", std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + " reaches the mbarrier at shared "
                           "offset " + std::to_string(bar) + " of CTA rank " + std::to_string(owner) +
                           ", which has exited (a barrier.cluster before exit is missing)");
  }
  return m;
}

// Two consecutive completed phases n, n+1 (n >= 0) that no try_wait observed (a wait observes the
// latest completed phase, so n+1's status is final once n+2 completes; the CTA's end checks the last
// pair): a parity wait cannot tell the completions apart, and the second is an arrival nobody waits
// for (synccheck's "Missing wait"). One unobserved phase is legal (a pre-arrived WAR phase a prologue
// never waits for; a ring's trailing release); in a correct protocol every wait observes the phase it
// was written for under any schedule, so this does not depend on the schedule.
static void mbar_check_unobserved(uint32_t bar, Mbar& m) {
  if (m.unobserved_reported || m.phase < 2 || m.observed >= (int64_t)m.phase - 2) return;
  m.unobserved_reported = true;
  const uint32_t n = m.phase - 2;
  finding("async", "mbarrier at shared offset " + std::to_string(bar) + ": phases " + std::to_string(n) + " and " +
                       std::to_string(n + 1) + " both completed and no wait observed either (phase " +
                       std::to_string(n + 1) + " completed at " + pcs(m.last_pc) +
                       (m.last_tid >= 0 ? " by " + who(m.last_tid) : std::string()) +
                       "): a parity wait cannot tell the two completions apart; an arrival no wait needs (a release "
                       "of a slot no load refills)");
}

Mbar& mbar_async_use(uint32_t bar, const void* pc, const char* what) {
  Fiber& f = me();
  Mbar& m = mbar_at(bar, pc, what);
  const bool ordered = m.fence_clk && (m.init_tid == f.tid ? m.fence_clk <= f.vc[f.tid] : f.vc[m.init_tid] >= m.fence_clk);
  if (!ordered && !m.unfenced_reported) {
    m.unfenced_reported = true;
    finding("async", std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + " uses the mbarrier at shared offset " +
                         std::to_string(bar) + " through the async proxy, but its mbarrier.init at " + pcs(m.init_pc) +
                         " by " + who(m.init_tid) + (m.fence_clk ? " was fenced after this use was ordered"
                                                                  : " is not followed by fence.mbarrier_init") +
                         " (the initializing thread fences its inits, then the barrier that publishes them)");
  }
  return m;
}

static void mbar_complete_phase(uint32_t bar, Mbar& m, const void* pc, int tid) {
  Cta& c = cta();
  mbar_check_unobserved(bar, m);  // the pair before this phase: phase - 1 is final now
  m.last_pc = pc;
  m.last_tid = tid;
  VC& slot = m.done[m.phase & 1];
  slot = m.arrivals;
  ++m.phase;
  slot[c.agent_mbar(m.agent)] = m.phase;  // what the TMA writes of this phase are ordered by
  m.pending = m.count;
  m.tx = 0;
  std::fill(m.arrivals.begin(), m.arrivals.end(), 0);
}

void mbar_arrive_impl(uint32_t bar, int64_t tx, const void* pc, const char* what) {
  Fiber& f = me();
  tick();
  Mbar& m = mbar_at(bar, pc, what);
  vc_join(m.arrivals, f.vc);
  ++f.vc[f.tid];
  m.tx += tx;
  if (--m.pending < 0)
    abort_cta(std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + ": more arrivals than the mbarrier's count " +
              std::to_string(m.count) + " in one phase");
  if (m.pending == 0 && m.tx == 0) mbar_complete_phase(bar, m, pc, f.tid);
}

void mbar_arrive_vc(uint32_t bar, const VC& vc, const void* pc, const char* what) {
  // called by the scheduler (a landing), outside any thread: findings, not abort_cta
  Cta& c = cta();
  auto it = c.mbars.find(bar);
  if (it == c.mbars.end()) {
    finding("error", std::string(what) + " at " + pcs(pc) + " arrives on shared offset " + std::to_string(bar) +
                         ", where no mbarrier was initialised");
    return;
  }
  Mbar& m = it->second;
  vc_join(m.arrivals, vc);
  if (m.pending <= 0) {
    finding("async", std::string(what) + " at " + pcs(pc) + ": more arrivals than the mbarrier's count " +
                         std::to_string(m.count) + " in one phase");
    return;
  }
  if (--m.pending == 0 && m.tx == 0) mbar_complete_phase(bar, m, pc, -1);
}

void mbarrier_init(uint32_t bar, int count) {
  Cta& c = cta();
  Fiber& f = me();
  const void* pc = __builtin_return_address(0);
  tick();
  if (bar % 8) abort_cta("mbarrier.init at " + pcs(pc) + ": shared offset " + std::to_string(bar) + " is not 8-byte aligned");
  if (count < 1 || count > (1 << 20) - 1) abort_cta("mbarrier.init at " + pcs(pc) + " with count " + std::to_string(count));
  auto it = c.mbars.find(bar);
  if (it != c.mbars.end() && (it->second.pending != it->second.count || it->second.tx != 0))
    finding("error", "mbarrier.init at " + pcs(pc) + " re-initialises the mbarrier at shared offset " + std::to_string(bar) +
                         " in the middle of a phase");
  Mbar m;
  m.count = m.pending = count;
  if (it != c.mbars.end()) m.agent = it->second.agent;
  else {
    if (c.next_mbar_agent >= Cta::kMaxMbars) abort_cta("more than 64 mbarriers in one CTA (the interpreter's limit)");
    m.agent = c.next_mbar_agent++;
  }
  m.arrivals.assign(c.nagents(), 0);
  m.done[0].assign(c.nagents(), 0);
  m.done[1].assign(c.nagents(), 0);
  m.init_tid = f.tid;
  m.init_clk = f.vc[f.tid];
  m.init_pc = pc;
  c.mbars[bar] = m;
  // the mbarrier's 8 bytes are written by the init (a plain access to them would race)
  smem_access(bar, 8, true, f.tid, f.vc[f.tid], f.tid, f.vc, pc, false, "mbarrier.init");
}

void mbarrier_arrive(uint32_t bar) { mbar_arrive_impl(bar, 0, __builtin_return_address(0), "mbarrier.arrive"); }

void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  mbar_arrive_impl(bar, bytes, __builtin_return_address(0), "mbarrier.arrive.expect_tx");
}

bool mbarrier_try_wait_parity(uint32_t bar, int parity) {
  const void* pc = __builtin_return_address(0);
  tick();
  Mbar& m = mbar_at(bar, pc, "mbarrier.try_wait.parity");
  if (parity != 0 && parity != 1) abort_cta("mbarrier.try_wait.parity at " + pcs(pc) + " with parity " + std::to_string(parity));
  // phase P (parity P) is complete while the current phase's parity differs from P
  block_until([&m, parity] { return (int)(m.phase & 1) != parity; },
              "mbarrier.try_wait.parity " + std::to_string(parity) + " on the mbarrier at shared offset " +
                  std::to_string(bar) + " (completed phases: " + std::to_string(m.phase) + ", pending arrivals " +
                  std::to_string(m.pending) + " of " + std::to_string(m.count) + ", transaction bytes " + std::to_string(m.tx) + ")",
              pc);
  Fiber& f = me();
  vc_join(f.vc, m.done[parity]);
  m.observed = std::max(m.observed, (int64_t)m.phase - 1);  // the latest completed phase (none on a fresh barrier)
  return true;
}

// ---- fences ------------------------------------------------------------------------

void fence_proxy_async_shared_cta() {
  Fiber& f = me();
  tick();
  f.fences.push_back(f.vc[f.tid]);
  ++f.vc[f.tid];
}

// ---- wgmma ------------------------------------------------------------------------------------

// wgmma.fence (PTX ISA, "wgmma.fence"): required before the first wgmma.mma_async of a warpgroup, and
// between a register access by ordinary instructions and a wgmma on those registers. The first rule is
// checked (the registers' other accesses are not visible here).
void wgmma_fence() {
  tick();
  me().wg_fenced = true;
}

void wgmma_commit_group() {
  tick();
  ++me().wg_committed;
}

static void land_wgmma(const PendingWgmma& p) { std::memcpy(p.d, p.result.data(), p.result.size() * sizeof(float)); }

void wgmma_wait_group(int n) {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  if (n < 0 || n > 7) abort_cta("wgmma.wait_group " + std::to_string(n) + " at " + pcs(__builtin_return_address(0)));
  retire_groups(c.wgmmas, f.wg_committed, n, c.agent_wg(f.tid / 128), land_wgmma);
}

static void wgmma_issue(int n, int atype, int btype, float* d, uint64_t desc_a, uint64_t desc_b, int scale_d,
                        int tnsp_a, int tnsp_b, const void* pc) {
  struct In { uint64_t da, db; int scale_d, ta, tb, n, tya, tyb; int group; };
  In in{desc_a, desc_b, scale_d, tnsp_a, tnsp_b, n, atype, btype, me().wg_committed + 1};
  if (!me().wg_fenced && me().tid % 128 == 0) {
    me().wg_fenced = true;  // one report per warpgroup
    finding("async", "wgmma.mma_async at " + pcs(pc) + " by " + who(me().tid) + " is the warpgroup's first wgmma and "
                         "no wgmma.fence came before it (the ISA requires one before the first wgmma.mma_async)");
  }
  collective(128, "wgmma.mma_async", pc, &in, d, [&](void** ins, void** outs) {
    Cta& c = cta();
    const int wg = me().tid / 128;
    In* i0 = static_cast<In*>(ins[0]);
    for (int t = 1; t < 128; ++t) {
      In* it = static_cast<In*>(ins[t]);
      if (it->da != i0->da || it->db != i0->db || it->scale_d != i0->scale_d || it->ta != i0->ta || it->tb != i0->tb ||
          it->n != i0->n || it->tya != i0->tya || it->tyb != i0->tyb)
        abort_cta("wgmma.mma_async at " + pcs(pc) + ": the threads of warpgroup " + std::to_string(wg) +
                  " pass different descriptors or operands (thread " + std::to_string(128 * wg + t) + " vs " +
                  std::to_string(128 * wg) + ")");
      if (it->group != i0->group)
        abort_cta("wgmma.mma_async at " + pcs(pc) + ": the threads of warpgroup " + std::to_string(wg) +
                  " have committed different numbers of wgmma groups");
    }
    if (i0->n < 8 || i0->n > 256 || i0->n % 8) abort_cta("wgmma.mma_async at " + pcs(pc) + " with N = " + std::to_string(i0->n));
    // each thread's accumulators as the pipeline sees them: its newest pending result, else its registers
    std::vector<std::vector<float>> acc(128);
    float* dp[128];
    for (int t = 0; t < 128; ++t) {
      const int tid = 128 * wg + t;
      float* reg = static_cast<float*>(outs[t]);
      const PendingWgmma* newest = nullptr;
      for (auto& p : c.wgmmas)
        if (p.tid == tid && p.d == reg) newest = &p;
      acc[t] = newest ? newest->result : std::vector<float>(reg, reg + i0->n / 2);
      dp[t] = acc[t].data();
    }
    Fiber& issuer = *c.fibers[128 * wg];
    AccessSink sink;
    sink.agent = c.agent_wg(wg);
    sink.clk = i0->group;
    sink.tid = issuer.tid;
    sink.vc = &issuer.vc;
    sink.pc = pc;
    sink.async_proxy = true;
    sink.what = "wgmma operand read";
    // a descriptor holds a shared::cta address (18 bits): in the issuing CTA's part of a cluster's window
    sink.base = (uint32_t)issuer.rank * HRT_SMEM_WINDOW_BYTES;
    std::string err = ptx::wgmma_ss_typed(i0->n, i0->tya, i0->tyb, i0->da, i0->db, i0->scale_d, i0->ta, i0->tb,
                                          run().smem + sink.base, run().smem_bytes - sink.base, dp, &sink);
    if (!err.empty()) abort_cta("wgmma.mma_async at " + pcs(pc) + ": " + err);
    for (int t = 0; t < 128; ++t)
      c.wgmmas.push_back(PendingWgmma{128 * wg + t, i0->group, static_cast<float*>(outs[t]), std::move(acc[t])});
  });
}

void wgmma_mma_async_ss(int n, bool bf16, float* d, uint64_t desc_a, uint64_t desc_b, int scale_d, int tnsp_a, int tnsp_b) {
  const int ty = bf16 ? ptx::kWgBF16 : ptx::kWgF16;
  wgmma_issue(n, ty, ty, d, desc_a, desc_b, scale_d, tnsp_a, tnsp_b, __builtin_return_address(0));
}

void wgmma_mma_async_ss_typed(int n, int atype, int btype, float* d, uint64_t desc_a, uint64_t desc_b, int scale_d,
                              int tnsp_a, int tnsp_b) {
  wgmma_issue(n, atype, btype, d, desc_a, desc_b, scale_d, tnsp_a, tnsp_b, __builtin_return_address(0));
}

// ---- TMA --------------------------------------------------------------------------------------

static const ptx::TensorMap& map_of(const void* map, const void* pc) {
  const ptx::TensorMap* m = static_cast<const ptx::TensorMap*>(map);
  if (m->magic != ptx::TensorMap::kMagic)
    abort_cta("cp.async.bulk.tensor at " + pcs(pc) + ": the tensor-map operand is not a map encoded for the "
              "interpreter (heddle passes maps built by heddle.interpret's encoder)");
  return *m;
}

// A TMA load into the calling CTA (cta_mask 0) or, multicast, into every CTA rank set in cta_mask: the box
// at dst's and the bytes on bar's CTA-relative offsets in each (PTX ISA cp.async.bulk.tensor .multicast::cluster).
static void tma_load_impl(uint32_t dst, const void* map, int rank, const int* coords, uint32_t bar, uint16_t cta_mask,
                          const void* pc) {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  const ptx::TensorMap& m = map_of(map, pc);
  if (rank != (int)m.rank)
    abort_cta("cp.async.bulk.tensor." + std::to_string(rank) + "d at " + pcs(pc) + " on a tensor map of rank " +
              std::to_string((int)m.rank));
  const uint32_t own = (uint32_t)f.rank * HRT_SMEM_WINDOW_BYTES;
  if (cta_mask >> c.ranks)
    abort_cta("cp.async.bulk.tensor.multicast::cluster at " + pcs(pc) + " by " + who(f.tid) + ": ctaMask " + hex(cta_mask) +
              " names a CTA rank beyond the cluster's " + std::to_string(c.ranks) + " CTA(s)");
  if (dst < own || bar < own || dst - own >= HRT_SMEM_WINDOW_BYTES || bar - own >= HRT_SMEM_WINDOW_BYTES)
    abort_cta("cp.async.bulk.tensor at " + pcs(pc) + " by " + who(f.tid) + ": its destination or mbarrier is not in the "
              "issuing CTA's shared memory");
  {  // every global element the box reads must lie in a tensor of the launch (a wrong map would fault)
    int32_t co[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < rank; ++i) co[i] = coords[i];
    std::string bad;
    std::string err = tma_global_elems(m, co, dst, [&](uint64_t a, uint32_t n) {
      if (bad.empty() && region_of(a, n) < 0) bad = hex(a);
    });
    if (!err.empty()) abort_cta("cp.async.bulk.tensor at " + pcs(pc) + " by " + who(f.tid) + ": " + err);
    if (!bad.empty())
      abort_cta("cp.async.bulk.tensor at " + pcs(pc) + " by " + who(f.tid) + " reads global address " + bad +
                ", outside every tensor of the launch (the tensor map's base, dims or strides are wrong)");
  }
  c.scratch.resize(run().smem_bytes);  // only the box's own bytes are written and read back
  Recorder rec;
  uint32_t bytes = 0;
  int32_t co[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < rank; ++i) co[i] = coords[i];
  std::string err = ptx::tma_load(m, co, c.scratch.data(), run().smem_bytes, dst, &bytes, &rec);
  if (!err.empty()) abort_cta("cp.async.bulk.tensor at " + pcs(pc) + " by " + who(f.tid) + ": " + err);
  for (int r = 0; r < c.ranks; ++r) {
    if (cta_mask ? !((cta_mask >> r) & 1) : r != f.rank) continue;
    const uint32_t shift = (uint32_t)r * HRT_SMEM_WINDOW_BYTES - own;  // (unsigned wrap-around: a move either way)
    Mbar& mb = r == f.rank ? mbar_async_use(bar + shift, pc, "cp.async.bulk.tensor (its mbarrier, complete_tx)")
                           : mbar_at(bar + shift, pc, "cp.async.bulk.tensor (its mbarrier)");
    PendingTma p{f.tid, bar + shift, mb.phase, bytes, {}, pc};
    for (auto& [off, n] : rec.w) {
      p.pieces.push_back({off + shift, std::vector<uint8_t>(c.scratch.begin() + off, c.scratch.begin() + off + n)});
      smem_access(off + shift, n, true, c.agent_mbar(mb.agent), mb.phase + 1, f.tid, f.vc, pc, true, "TMA load");
    }
    c.tmas.push_back(std::move(p));
  }
}

void cp_async_bulk_tensor_load(uint32_t dst, const void* map, int rank, const int* coords, uint32_t bar) {
  tma_load_impl(dst, map, rank, coords, bar, 0, __builtin_return_address(0));
}

void cp_async_bulk_tensor_load_multicast(uint32_t dst, const void* map, int rank, const int* coords, uint32_t bar,
                                         uint16_t cta_mask) {
  if (!cta_mask) abort_cta("cp.async.bulk.tensor.multicast::cluster at " + pcs(__builtin_return_address(0)) + " with an empty ctaMask");
  tma_load_impl(dst, map, rank, coords, bar, cta_mask, __builtin_return_address(0));
}

static void land_tma(PendingTma& p) {
  Cta& c = cta();
  const int owner = (int)(p.bar / HRT_SMEM_WINDOW_BYTES);
  if (c.ranks > 1 && c.rank_done[owner] == c.cta_threads)
    finding("error", "TMA load issued at " + pcs(p.pc) + " by " + who(p.tid) + " lands in CTA rank " +
                         std::to_string(owner) + " after it exited (a barrier.cluster before exit is missing)");
  for (auto& [off, data] : p.pieces) std::memcpy(run().smem + off, data.data(), data.size());
  Mbar& m = c.mbars[p.bar];
  if (m.phase != p.phase)
    finding("async", "TMA load issued at " + pcs(p.pc) + " by " + who(p.tid) + " landed after its mbarrier phase " +
                         std::to_string(p.phase) + " had completed (the expected transaction bytes are short, or the "
                         "arrivals complete the phase without them): a consumer can read the stage before the data");
  m.tx -= p.bytes;
  if (m.pending == 0 && m.tx == 0) mbar_complete_phase(p.bar, m, p.pc, p.tid);
}

static void perform_store(PendingStore& p) {
  Cta& c = cta();
  std::string bad;
  tma_global_elems(p.map, p.coords, p.src, [&](uint64_t a, uint32_t n) {
    if (bad.empty() && region_of(a, n, true) < 0) bad = hex(a);
  });
  if (!bad.empty()) {
    finding("error", "TMA store at " + pcs(p.pc) + " writes global address " + bad + ", outside every output tensor");
    c.aborted = true;
    return;
  }
  // (its shared reads were recorded at issue; the global writes are counted below)
  std::string err = ptx::tma_store(p.map, p.coords, run().smem, run().smem_bytes, p.src, nullptr);
  if (!err.empty()) {
    finding("error", "TMA store at " + pcs(p.pc) + ": " + err);
    c.aborted = true;
    return;
  }
  tma_global_elems(p.map, p.coords, p.src, [&](uint64_t a, uint32_t n) { global_store_by_engine(a, n, p.pc, p.tid); });
}

void cp_async_bulk_tensor_store(const void* map, int rank, const int* coords, uint32_t src) {
  Cta& c = cta();
  Fiber& f = me();
  const void* pc = __builtin_return_address(0);
  tick();
  const ptx::TensorMap& m = map_of(map, pc);
  if (rank != (int)m.rank) abort_cta("cp.async.bulk.tensor store at " + pcs(pc) + ": rank mismatch with its tensor map");
  PendingStore p{f.tid, f.bulk_committed + 1, m, rank, {0, 0, 0, 0, 0}, src, pc};
  for (int i = 0; i < rank; ++i) p.coords[i] = coords[i];
  AccessSink sink;
  sink.agent = c.agent_bulk(f.tid);
  sink.clk = p.group;
  sink.tid = f.tid;
  sink.vc = &f.vc;
  sink.pc = pc;
  sink.async_proxy = true;
  sink.what = "TMA store (shared read)";
  {
    ptx::TmaBox b;
    std::string err = ptx::tma_check("cp.async.bulk.tensor (store)", m, run().smem_bytes, src, &b);
    if (!err.empty()) abort_cta("cp.async.bulk.tensor store at " + pcs(pc) + " by " + who(f.tid) + ": " + err);
    ptx::tma_report(b, src, &sink, false);
  }
  c.stores.push_back(p);
  f.bulk_store_group = p.group;
  f.bulk_store_pc = pc;
}

void cp_async_bulk_commit_group() {
  tick();
  ++me().bulk_committed;
}

void cp_async_bulk_wait_group_read(int n) {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  retire_groups(c.stores, f.bulk_committed, n, c.agent_bulk(f.tid), perform_store);
  f.bulk_read_waited = std::max(f.bulk_read_waited, f.bulk_committed - n);
}

// ---- the scheduler's side -----------------------------------------------------------------------

bool land_one(bool random_pick) {
  Cta& c = cta();
  // candidates: TMA loads (any order), cp.async copies that are committed, TMA stores that are committed
  const size_t nt = c.tmas.size();
  std::vector<int> copies, stores;
  for (size_t i = 0; i < c.copies.size(); ++i)
    if (c.copies[i].group <= c.fibers[c.copies[i].tid]->cp_committed) copies.push_back((int)i);
  for (size_t i = 0; i < c.stores.size(); ++i)
    if (c.stores[i].group <= c.fibers[c.stores[i].tid]->bulk_committed) stores.push_back((int)i);
  if (!random_pick) {  // adversarial: only what blocks progress, oldest first (TMA loads complete phases)
    if (nt) {
      PendingTma p = std::move(c.tmas.front());
      c.tmas.erase(c.tmas.begin());
      land_tma(p);
      return true;
    }
    return land_one_tcgen05(false);
  }
  if (!c.tc_commits.empty() && (c.rng() & 3) == 0 && land_one_tcgen05(true)) return true;
  const size_t total = nt + copies.size() + stores.size();
  if (!total) return land_one_tcgen05(true);
  size_t k = c.rng() % total;
  if (k < nt) {
    PendingTma p = std::move(c.tmas[k]);
    c.tmas.erase(c.tmas.begin() + k);
    land_tma(p);
  } else if ((k -= nt) < copies.size()) {
    land_copy(c.copies[copies[k]]);  // lands early; stays pending (the wait still retires it)
  } else {
    k -= copies.size();
    perform_store(c.stores[stores[k]]);  // reads now; the wait still retires it
    c.stores.erase(c.stores.begin() + stores[k]);
  }
  return true;
}

void finish_cta_async() {
  finish_cta_tcgen05();
  Cta& c = cta();
  if (!c.tmas.empty())
    finding("async", std::to_string(c.tmas.size()) + " TMA load(s) still in flight when CTA " + std::to_string(c.linear) +
                         " exits (first issued at " + pcs(c.tmas.front().pc) + "): they would write shared memory "
                         "that the next CTA on the SM owns");
  if (!c.copies.empty())
    finding("async", std::to_string(c.copies.size()) + " cp.async copies still in flight when CTA " +
                         std::to_string(c.linear) + " exits (no wait_group drains them)");
  for (auto& f : c.fibers)  // the shared memory a bulk store reads is the CTA's: it must have been read first
    if (f->bulk_store_group > f->bulk_read_waited)
      finding("async", who(f->tid) + " ends CTA " + std::to_string(c.linear) + " with the TMA store issued at " +
                           pcs(f->bulk_store_pc) + " (bulk group " + std::to_string(f->bulk_store_group) +
                           ") not waited for by cp.async.bulk.wait_group.read: the CTA's shared memory may be "
                           "reused before the store has read it");
  for (auto& p : c.stores) perform_store(p);  // bulk stores finish after exit: their writes count
  if (!c.wgmmas.empty())
    finding("async", "wgmma results still pending when CTA " + std::to_string(c.linear) + " exits (no wgmma.wait_group)");
  for (auto& [off, m] : c.mbars) mbar_check_unobserved(off, m);  // the last pair
  for (auto& [off, m] : c.mbars)
    if (m.tx != 0)
      finding("async", "mbarrier at shared offset " + std::to_string(off) + " has " + std::to_string(m.tx) +
                           " transaction bytes outstanding when CTA " + std::to_string(c.linear) + " exits");
  // Every phase of a protocol gets exactly its init count of arrivals: arrivals left in a phase that never
  // completed mean the count and the arrivals disagree (a count one short completes each phase early and
  // carries an arrival into the next, which a long enough run turns into a phase completed before its
  // consumers released the slot).
  for (auto& [off, m] : c.mbars)
    if (m.pending > 0 && m.pending < m.count)
      finding("async", "mbarrier at shared offset " + std::to_string(off) + " (init count " + std::to_string(m.count) +
                           ", at " + pcs(m.init_pc) + ") ends CTA " + std::to_string(c.linear) + " with " +
                           std::to_string(m.count - m.pending) + " arrival(s) in phase " + std::to_string(m.phase) +
                           ", which never completed: the arrivals per phase do not match the init count");
}

}  // namespace heddle_rt
