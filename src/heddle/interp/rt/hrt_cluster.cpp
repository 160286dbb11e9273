// heddle/interp/rt/hrt_cluster.cpp -- thread-block clusters (sm_90), from the PTX ISA: %cluster_ctarank,
// mapa, mbarrier arrivals on another CTA's mbarrier (shared::cluster), fence.mbarrier_init, and the
// cluster barrier (barrier.cluster.arrive.release / wait.acquire). Multicast TMA is in hrt_async.cpp.
//
// The model: a cluster launch runs the CTAs of one cluster as one scheduling unit (hrt_sched.cpp
// run_cta): one set of fibers, one agent space for happens-before, one shared window in which CTA rank r
// owns [r * HRT_SMEM_WINDOW_BYTES, (r + 1) * HRT_SMEM_WINDOW_BYTES). A shared::cta address is a window
// offset in the caller's range; mapa moves it to the same CTA-relative offset in the target's range;
// mbarriers are keyed by window offset, so a remote arrival is an arrival on the target's object.
// Checked: a remote use of an mbarrier needs its init fenced (fence.mbarrier_init.release.cluster by the
// initializing thread, ordered before the use -- in practice through barrier.cluster); an arrival on, or
// a multicast landing in, a CTA whose threads have all exited is an error (the missing cluster barrier
// before exit); barrier.cluster phases complete when every thread of the cluster that has not exited
// arrived (PTX: "all non-exited threads of the cluster").
#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

uint32_t cluster_ctarank() { return (uint32_t)me().rank; }
uint32_t cluster_nctarank() { return (uint32_t)cta().ranks; }
uint32_t smem_cta_base() { return (uint32_t)me().rank * HRT_SMEM_WINDOW_BYTES; }

uint32_t mapa_shared_cluster(uint32_t addr, uint32_t rank) {
  const void* pc = __builtin_return_address(0);
  tick();
  Fiber& f = me();
  const uint32_t own = (uint32_t)f.rank * HRT_SMEM_WINDOW_BYTES;
  if (rank >= (uint32_t)cta().ranks)
    abort_cta("mapa.shared::cluster at " + pcs(pc) + " by " + who(f.tid) + " to CTA rank " + std::to_string(rank) +
              ": the cluster has " + std::to_string(cta().ranks) + " CTAs");
  if (addr < own || addr - own >= HRT_SMEM_WINDOW_BYTES)
    abort_cta("mapa.shared::cluster at " + pcs(pc) + " by " + who(f.tid) + " of shared offset " + std::to_string(addr) +
              ", which is not in the calling CTA's shared memory");
  return addr - own + rank * HRT_SMEM_WINDOW_BYTES;
}

void mbarrier_arrive_cluster(uint32_t cluster_addr) {
  mbar_arrive_impl(cluster_addr, 0, __builtin_return_address(0), "mbarrier.arrive.release.cluster.shared::cluster");
}

void fence_mbarrier_init_release_cluster() {
  Cta& c = cta();
  Fiber& f = me();
  tick();
  for (auto& [off, m] : c.mbars)  // the caller's own inits so far
    if (m.init_tid == f.tid && m.init_clk <= f.vc[f.tid]) m.fence_clk = f.vc[f.tid];
  ++f.vc[f.tid];
}

void cluster_barrier_try_complete() {
  Cta& c = cta();
  ClusterBar& b = c.cluster_bar;
  if (b.arrived == 0) return;
  int waiting_on = 0;  // threads that neither arrived in this phase nor exited
  for (auto& f : c.fibers)
    if (f->st != FState::Done && f->cl_arrived != b.phase + 1) ++waiting_on;
  if (waiting_on) return;
  b.done = b.join;
  std::fill(b.join.begin(), b.join.end(), 0);
  b.arrived = 0;
  ++b.phase;
}

void barrier_cluster_arrive() {
  const void* pc = __builtin_return_address(0);
  Cta& c = cta();
  Fiber& f = me();
  tick();
  ClusterBar& b = c.cluster_bar;
  if (f.cl_arrived == b.phase + 1)
    abort_cta("barrier.cluster.arrive at " + pcs(pc) + " by " + who(f.tid) +
              " arrives twice in one phase (a barrier.cluster.wait between the arrivals is missing)");
  f.cl_arrived = b.phase + 1;
  vc_join(b.join, f.vc);
  ++f.vc[f.tid];
  ++b.arrived;
  cluster_barrier_try_complete();
}

void barrier_cluster_wait() {
  const void* pc = __builtin_return_address(0);
  Cta& c = cta();
  Fiber& f = me();
  tick();
  ClusterBar& b = c.cluster_bar;
  if (f.cl_arrived == 0)
    abort_cta("barrier.cluster.wait at " + pcs(pc) + " by " + who(f.tid) + " without a barrier.cluster.arrive before it");
  const uint64_t want = f.cl_arrived;  // the phase it arrived on completes
  block_until([&b, want] { return b.phase >= want; },
              "barrier.cluster.wait (phase " + std::to_string(want - 1) + ": every live thread of the cluster arrives)", pc);
  vc_join(f.vc, b.done);
}

}  // namespace heddle_rt
