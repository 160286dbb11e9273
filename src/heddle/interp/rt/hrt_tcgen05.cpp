// heddle/interp/rt/hrt_tcgen05.cpp -- the sm_100a tcgen05 primitives under HEDDLE_INTERPRET, on the data
// semantics of hrt_ptx_tcgen05.h (PTX ISA 9.7.16):
//   tcgen05.alloc / relinquish_alloc_permit / dealloc   warp collectives on the CTA's tensor memory; the
//                      allocation's address is written to shared memory (a write of the issuing warp)
//   tcgen05.mma        kind::f16 or kind::f8f6f4, one thread; asynchronous: it runs -- reads its shared-memory operands, writes the
//                      tensor-memory accumulator -- only when a later tcgen05.commit of the same thread lands
//   tcgen05.mma kind::mxf8f6f4 / kind::mxf4nvf4 / kind::mxf4 .block_scale and tcgen05.cp.32x128b.warpx4 (hrt_ptx_tcgen05_mx.h): queued with the
//                      thread's MMAs and run in issue order when its commit lands (the cp -> mma pipeline)
//   tcgen05.commit     lands when the scheduler says (adversarial: as late as allowed): runs the thread's
//                      MMAs issued before it, in order, then arrives once on the mbarrier with the thread's
//                      clock at the commit. An MMA never committed, a commit never landed, or tensor memory
//                      still allocated when the CTA exits is a finding.
//   tcgen05.ld 32x32b  the warp's lane quarter, read when issued (the value the accumulator holds then: an
//                      MMA that has not landed shows as stale or NaN data, i.e. wrong numbers)
//   tcgen05.wait::ld   a scheduling point (it follows every tcgen05.ld in heddle_sm100.cuh)
//   the tcgen05 fences, and the ordering of every tensor-memory access: hrt_tmem_shadow.cpp (a race shadow
//                      per lane and column; fence::before_thread_sync publishes the thread's tcgen05.ld
//                      reads, fence::after_thread_sync sets the clock its asynchronous tcgen05 ops are
//                      checked with, a commit's arrival publishes its MMAs)
#include <cstring>
#include <utility>

#include "heddle/interp/rt/hrt_core.h"
#include "heddle/interp/rt/hrt_ptx_tcgen05_mx.h"
#include "heddle/interp/rt/hrt_tmem_shadow.h"

namespace heddle_rt {

namespace {

struct OperandSink : ptx::Access {  // the MMA's operand reads, as async-proxy reads of the issuing thread
  uint32_t tid;
  Clock clk;
  const VC* vc;
  const void* pc;
  void read(uint32_t off, uint32_t bytes) override {
    smem_access(off, bytes, false, tid, clk, tid, *vc, pc, true, "tcgen05.mma operand read");
  }
  void write(uint32_t, uint32_t) override {}
};

ptx::Tmem& tmem_of(Cta& c) {
  if (!c.tmem) c.tmem.reset(new ptx::Tmem());
  return *c.tmem;
}

void land_commit(PendingTcCommit& p) {
  Cta& c = cta();
  for (auto& m : p.mmas) {
    OperandSink sink;
    sink.tid = uint32_t(p.tid);
    sink.clk = p.vc[p.tid];
    sink.vc = &p.vc;
    sink.pc = m.pc;
    std::string err;
    if (m.op == PendingTcMma::kCopy)
      err = ptx::tcgen05_cp_32x128b_warpx4(tmem_of(c), m.d, m.a, run().smem, run().smem_bytes, &sink);
    else if (m.op == PendingTcMma::kBlockScaled)
      err = ptx::tcgen05_mma_mx_ss(tmem_of(c), m.d, m.a, m.b, m.idesc, m.sfa, m.sfb, m.enable, run().smem,
                                   run().smem_bytes, &sink);
    else if (m.op == PendingTcMma::kNvf4 || m.op == PendingTcMma::kMxf4)
      err = ptx::tcgen05_mma_fp4_ss(tmem_of(c), m.d, m.a, m.b, m.idesc, m.sfa, m.sfb, m.enable, run().smem,
                                    run().smem_bytes, &sink, m.op == PendingTcMma::kNvf4 ? 4 : 2);
    else
      err = ptx::tcgen05_mma_ss(m.kind, tmem_of(c), m.d, m.a, m.b, m.idesc, m.enable, run().smem, run().smem_bytes,
                                &sink);
    // the scheduler lands commits outside any thread: report (abort_cta belongs to a running thread)
    if (!err.empty()) finding("error", err + " (issued at " + pcs(m.pc) + " by " + who(m.tid) + ")");
  }
  mbar_arrive_vc(p.bar, p.vc, p.pc, "tcgen05.commit");
}

}  // namespace

void tcgen05_alloc(uint32_t slot, int ncols) {
  const void* pc = __builtin_return_address(0);
  struct In { uint32_t slot; int ncols; };
  In in{slot, ncols};
  collective(32, "tcgen05.alloc", pc, &in, nullptr, [&](void** ins, void**) {
    Cta& c = cta();
    In* i0 = static_cast<In*>(ins[0]);
    for (int t = 1; t < 32; ++t)
      if (static_cast<In*>(ins[t])->slot != i0->slot || static_cast<In*>(ins[t])->ncols != i0->ncols)
        abort_cta("tcgen05.alloc at " + pcs(pc) + ": the lanes of the warp pass different operands");
    uint32_t addr = 0;
    const std::string err = tmem_of(c).alloc(i0->ncols, &addr);
    if (!err.empty()) abort_cta(err + " at " + pcs(pc));
    if (uint64_t(i0->slot) + 4 > run().smem_bytes) abort_cta("tcgen05.alloc at " + pcs(pc) + ": slot outside shared memory");
    Fiber& f = me();
    smem_access(i0->slot, 4, true, uint32_t(f.tid), f.vc[f.tid], uint32_t(f.tid), f.vc, pc, false, "tcgen05.alloc");
    std::memcpy(run().smem + i0->slot, &addr, 4);
    tmem_shadow_alloc(f.tid, ptx::tmem_col(addr), i0->ncols, pc);
  });
}

void tcgen05_relinquish_alloc_permit() {
  const void* pc = __builtin_return_address(0);
  collective(32, "tcgen05.relinquish_alloc_permit", pc, nullptr, nullptr,
             [&](void**, void**) { tmem_of(cta()).relinquished = true; });
}

void tcgen05_dealloc(uint32_t taddr, int ncols) {
  const void* pc = __builtin_return_address(0);
  struct In { uint32_t a; int n; };
  In in{taddr, ncols};
  collective(32, "tcgen05.dealloc", pc, &in, nullptr, [&](void** ins, void**) {
    Cta& c = cta();
    In* i0 = static_cast<In*>(ins[0]);
    for (auto& p : c.tc_commits)
      if (!p.mmas.empty())
        finding("async", "tcgen05.dealloc at " + pcs(pc) + " frees tensor memory while MMAs committed at " +
                             pcs(p.pc) + " by " + who(p.tid) + " have not completed");
    const std::string err = tmem_of(c).dealloc(i0->a, i0->n);
    if (!err.empty()) abort_cta(err + " at " + pcs(pc));
    tmem_shadow_dealloc(me().tid, ptx::tmem_col(i0->a), i0->n, pc);
  });
}

namespace {

void issue_mma(ptx::TcKind kind, uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, int enable_input_d,
               const void* pc) {
  Cta& c = cta();
  tick();
  c.tc_mmas.push_back(PendingTcMma{me().tid, d, idesc, desc_a, desc_b, enable_input_d != 0, pc, kind});
  ptx::InstrDescF16 id;  // the columns it writes (a bad descriptor or address is reported when it runs)
  if (ptx::decode_idesc(kind, idesc, &id).empty() && ptx::tmem_lane(d) == 0 &&
      tmem_of(c).columns_allocated(ptx::tmem_col(d), id.N))
    tmem_shadow_mma(me().tid, ptx::tmem_col(d), id.N, pc);
}

}  // namespace

void tcgen05_mma_f16_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, int enable_input_d) {
  issue_mma(ptx::TcKind::F16, d, desc_a, desc_b, idesc, enable_input_d, __builtin_return_address(0));
}

void tcgen05_mma_f8f6f4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, int enable_input_d) {
  issue_mma(ptx::TcKind::F8F6F4, d, desc_a, desc_b, idesc, enable_input_d, __builtin_return_address(0));
}

namespace {

void issue_block_scaled(PendingTcMma::Op op, uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc,
                        uint32_t sfa, uint32_t sfb, int enable_input_d, const void* pc) {
  Cta& c = cta();
  tick();
  PendingTcMma m{me().tid, d, idesc, desc_a, desc_b, enable_input_d != 0, pc, ptx::TcKind::F8F6F4};
  m.op = op;
  m.sfa = sfa;
  m.sfb = sfb;
  c.tc_mmas.push_back(m);
  // the columns it writes (a bad descriptor or address is reported when it runs)
  ptx::InstrDescMx mx;
  ptx::InstrDescNvf4 nv;
  const bool ok = op == PendingTcMma::kBlockScaled ? ptx::decode_idesc_mx(idesc, &mx).empty()
                                                   : ptx::decode_idesc_fp4(idesc, &nv, op == PendingTcMma::kNvf4 ? 4 : 2)
                                                         .empty();
  const int n = op == PendingTcMma::kBlockScaled ? mx.N : nv.N;
  if (!ok) return;
  // the scale columns it reads: 128 rows of A and n columns of B, 32 a column (hrt_ptx_tcgen05_mx.h)
  for (auto [addr, cols] : {std::pair<uint32_t, int>{sfa, 4}, {sfb, (n + 31) / 32}})
    if (ptx::tmem_lane(addr) == 0 && tmem_of(c).columns_allocated(ptx::tmem_col(addr), cols))
      tmem_shadow_mma_read(me().tid, ptx::tmem_col(addr), cols, pc);
  if (ptx::tmem_lane(d) == 0 && tmem_of(c).columns_allocated(ptx::tmem_col(d), n))
    tmem_shadow_mma(me().tid, ptx::tmem_col(d), n, pc);
}

}  // namespace

void tcgen05_mma_mxf8f6f4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, uint32_t sfa, uint32_t sfb,
                             int enable_input_d) {
  issue_block_scaled(PendingTcMma::kBlockScaled, d, desc_a, desc_b, idesc, sfa, sfb, enable_input_d,
                     __builtin_return_address(0));
}

void tcgen05_mma_mxf4nvf4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, uint32_t sfa, uint32_t sfb,
                             int enable_input_d) {
  issue_block_scaled(PendingTcMma::kNvf4, d, desc_a, desc_b, idesc, sfa, sfb, enable_input_d,
                     __builtin_return_address(0));
}

void tcgen05_mma_mxf4_ss(uint32_t d, uint64_t desc_a, uint64_t desc_b, uint32_t idesc, uint32_t sfa, uint32_t sfb,
                        int enable_input_d) {
  issue_block_scaled(PendingTcMma::kMxf4, d, desc_a, desc_b, idesc, sfa, sfb, enable_input_d,
                     __builtin_return_address(0));
}

void tcgen05_cp_32x128b_warpx4(uint32_t taddr, uint64_t sdesc) {
  const void* pc = __builtin_return_address(0);
  Cta& c = cta();
  tick();
  PendingTcMma m{me().tid, taddr, 0, sdesc, 0, false, pc, ptx::TcKind::F8F6F4};
  m.op = PendingTcMma::kCopy;
  c.tc_mmas.push_back(m);
  if (ptx::tmem_lane(taddr) == 0 && tmem_of(c).columns_allocated(ptx::tmem_col(taddr), 4))
    tmem_shadow_mma(me().tid, ptx::tmem_col(taddr), 4, pc);  // the copy writes 4 columns of every lane quarter
}

void tcgen05_commit(uint32_t bar) {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  PendingTcCommit p;
  p.tid = f.tid;
  p.bar = bar;
  p.pc = __builtin_return_address(0);
  mbar_async_use(bar, p.pc, "tcgen05.commit (its mbarrier)");
  for (size_t i = 0; i < c.tc_mmas.size();) {
    if (c.tc_mmas[i].tid == f.tid) {
      p.mmas.push_back(c.tc_mmas[i]);
      c.tc_mmas.erase(c.tc_mmas.begin() + long(i));
    } else {
      ++i;
    }
  }
  p.vc = f.vc;
  p.vc[size_t(c.agent_tc(f.tid))] = tmem_shadow_commit(f.tid);  // the MMA engine's ordinal: this commit's MMAs
  ++f.vc[f.tid];
  c.tc_commits.push_back(std::move(p));
}

void tcgen05_ld_32x32b(int num, uint32_t taddr, uint32_t* regs) {
  const void* pc = __builtin_return_address(0);
  struct In { int num; uint32_t addr; };
  In in{num, taddr};
  collective(32, "tcgen05.ld.32x32b", pc, &in, regs, [&](void** ins, void** outs) {
    Cta& c = cta();
    In* i0 = static_cast<In*>(ins[0]);
    for (int t = 1; t < 32; ++t)
      if (static_cast<In*>(ins[t])->num != i0->num || static_cast<In*>(ins[t])->addr != i0->addr)
        abort_cta("tcgen05.ld at " + pcs(pc) + ": the lanes of the warp pass different operands");
    static thread_local uint32_t out[32][128];
    const std::string err = ptx::tcgen05_ld_32x32b(tmem_of(c), me().tid / 32, i0->addr, i0->num, out);
    if (!err.empty()) abort_cta(err + " at " + pcs(pc));
    for (int t = 0; t < 32; ++t) std::memcpy(outs[t], out[t], sizeof(uint32_t) * size_t(i0->num));
    const int base = me().tid - me().tid % 32;
    for (int t = 0; t < 32; ++t)
      tmem_shadow_ld(base + t, ptx::tmem_lane(i0->addr) + uint32_t(t), ptx::tmem_col(i0->addr), i0->num, pc);
  });
}

void tcgen05_wait_ld() { tick(); }
void tcgen05_fence(bool before) {
  tick();
  tmem_shadow_fence(me().tid, before);
}

bool land_one_tcgen05(bool random_pick) {
  Cta& c = cta();
  if (c.tc_commits.empty()) return false;
  // per thread, commits land in issue order (tcgen05 ops of one thread complete in order)
  size_t k = 0;
  if (random_pick) {
    std::vector<size_t> firsts;
    for (size_t i = 0; i < c.tc_commits.size(); ++i) {
      bool first = true;
      for (size_t j = 0; j < i; ++j) first = first && c.tc_commits[j].tid != c.tc_commits[i].tid;
      if (first) firsts.push_back(i);
    }
    k = firsts[c.rng() % firsts.size()];
  }
  PendingTcCommit p = std::move(c.tc_commits[k]);
  c.tc_commits.erase(c.tc_commits.begin() + long(k));
  land_commit(p);
  return true;
}

void finish_cta_tcgen05() {
  Cta& c = cta();
  while (!c.tc_commits.empty()) land_one_tcgen05(false);  // arrivals nobody waits for (the last k-tile's empty)
  if (!c.tc_mmas.empty())
    finding("async", std::to_string(c.tc_mmas.size()) + " tcgen05.mma issued at " + pcs(c.tc_mmas.front().pc) + " by " +
                         who(c.tc_mmas.front().tid) + " never committed (no tcgen05.commit after them): they never complete");
  if (c.tmem && c.tmem->allocated_columns())
    finding("async", "CTA " + std::to_string(c.linear) + " exits with " + std::to_string(c.tmem->allocated_columns()) +
                         " tensor-memory columns allocated (no tcgen05.dealloc)");
  c.tmem.reset();
  c.tc_shadow.reset();
}

}  // namespace heddle_rt
