// heddle/interp/rt/hrt_regs.cpp -- setmaxnreg (PTX ISA, "setmaxnreg"): a warpgroup collective over the CTA's
// register pool.
//
// The ISA: "A pool of available registers is maintained per-CTA"; .dec releases registers of the executing
// warps into it, .inc takes them from it and blocks until enough are free; .sync.aligned: every thread of the
// warpgroup executes the same setmaxnreg (executed by a subset it is undefined). The pool is what the CTA was
// launched with: the per-thread register count at entry (ptxas's count, rounded up to the allocation unit of 8;
// without one, the __launch_bounds__(threads, 1) cap 65536 / threads rounded down to a multiple of 8, at most
// 256) times the CTA's threads -- 168 x 384 = 64,512 for the three-warpgroup kernels.
//
// The model: each warpgroup starts at the entry count. setmaxnreg is a 128-thread collective (the same
// instruction, .inc or .dec and value, in all 128 threads: else an error; a thread that never arrives leaves
// the others in a deadlock report naming it). A .dec returns its registers to the pool at once; an .inc is
// granted when the pool has them, else the warpgroup waits (pending requests are granted in warpgroup order
// after every release); an increase that is never granted shows in the deadlock report with the pool's
// numbers. Registers of warps that exit are not returned to the pool (the ISA does not say that setmaxnreg
// can take them; heddle's kernels never rely on it). "After executing a setmaxnreg instruction, all warps in
// the warpgroup must synchronize explicitly before executing subsequent setmaxnreg instructions": a second
// setmaxnreg of a warpgroup is an error unless every thread of it has synchronized with every other since
// the first (their clocks just after the first, ordered before the second by a barrier).
#include <algorithm>
#include <map>
#include <mutex>

#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

namespace {

int rank_of_wg(const Cta& c, int wg) { return wg * 128 / c.cta_threads; }

// Per CTA (workers run several at once): each thread's own clock just after its last setmaxnreg (0: none).
std::mutex after_mu;
std::map<const Cta*, VC> after_of;

VC& after_setmaxnreg(const Cta& c) {
  std::lock_guard<std::mutex> lock(after_mu);
  return after_of[&c];
}

int64_t pool_free(const Cta& c, int rank) { return c.reg_pool - c.reg_used[rank]; }

std::string pool_text(const Cta& c, int rank) {
  return "the CTA's register pool is " + std::to_string(c.reg_pool) + " = " + std::to_string(c.reg_entry) +
         " registers per thread at entry (" + (c.reg_from_ptxas ? "ptxas" : "the __launch_bounds__ cap") + ") x " +
         std::to_string(c.cta_threads) + " threads, " + std::to_string(pool_free(c, rank)) + " free";
}

std::string wait_text(const Cta& c, int wg) {
  const int want = c.wg_reg_pending[wg], have = c.wg_regs[wg];
  return "setmaxnreg.inc to " + std::to_string(want) + " registers by warpgroup " + std::to_string(wg) + " (needs " +
         std::to_string((int64_t)(want - have) * 128) + " more registers: " + std::to_string(want - have) + " x 128; " +
         pool_text(c, rank_of_wg(c, wg)) + ")";
}

// Grants the pending increases that fit, in warpgroup order; refreshes the waiting text of the others.
void grant_pending() {
  Cta& c = cta();
  for (int w = 0; w < c.nwg; ++w) {
    const int want = c.wg_reg_pending[w];
    if (!want) continue;
    const int rank = rank_of_wg(c, w);
    const int64_t need = (int64_t)(want - c.wg_regs[w]) * 128;
    if (need <= pool_free(c, rank)) {
      c.reg_used[rank] += need;
      c.wg_regs[w] = want;
      c.wg_reg_pending[w] = 0;
      continue;
    }
    const std::string text = wait_text(c, w);
    for (int t = 128 * w; t < 128 * (w + 1) && t < c.nthreads; ++t)
      if (c.fibers[t]->st == FState::Blocked && !c.fibers[t]->waiting.compare(0, 14, "setmaxnreg.inc"))
        c.fibers[t]->waiting = text;
  }
}

}  // namespace

void regs_reset(Cta& c, uint32_t regs_per_thread) {
  c.reg_from_ptxas = regs_per_thread != 0;
  c.reg_entry = regs_per_thread ? (int)((regs_per_thread + 7) / 8 * 8)
                                : std::min(256, (65536 / std::max(1, c.cta_threads)) / 8 * 8);
  c.reg_pool = (int64_t)c.reg_entry * c.cta_threads;
  c.reg_used.assign(c.ranks, c.reg_pool);  // every warp holds its entry count
  c.wg_regs.assign(c.nwg, c.reg_entry);
  c.wg_reg_pending.assign(c.nwg, 0);
  after_setmaxnreg(c).assign(c.nthreads, 0);
}

void setmaxnreg(bool inc, int regs) {
  Cta& c = cta();
  Fiber& f = me();
  const void* pc = __builtin_return_address(0);
  tick();
  if (regs < 24 || regs > 256 || regs % 8)
    abort_cta("setmaxnreg at " + pcs(pc) + " with " + std::to_string(regs) + " registers: the ISA takes 24..256, multiples of 8");
  struct In { bool inc; int regs; int tid; };
  In in{inc, regs, f.tid};
  const int wg = f.tid / 128;
  collective(128, "setmaxnreg.sync.aligned", pc, &in, nullptr, [&](void** ins, void**) {
    for (int l = 0; l < 128; ++l) {
      const In& o = *static_cast<const In*>(ins[l]);
      if (o.inc != inc || o.regs != regs)
        abort_cta(std::string("setmaxnreg.") + (inc ? "inc" : "dec") + " " + std::to_string(regs) + " at " + pcs(pc) +
                  " by " + who(f.tid) + " while " + who(o.tid) + " of its warpgroup executes setmaxnreg." +
                  (o.inc ? "inc " : "dec ") + std::to_string(o.regs) + " (.sync.aligned: one instruction and value "
                  "for the whole warpgroup)");
    }
    const VC& after = after_setmaxnreg(c);
    for (int l = 0; l < 128; ++l)
      for (int o = 0; o < 128; ++o) {
        const int t = 128 * wg + l, u = 128 * wg + o;
        if (after[u] && c.fibers[t]->vc[u] < after[u])
          abort_cta(std::string("setmaxnreg.") + (inc ? "inc" : "dec") + " at " + pcs(pc) + " by warpgroup " +
                    std::to_string(wg) + ": " + who(t) + " has not synchronized with " + who(u) + " since their " +
                    "previous setmaxnreg (the ISA wants the warpgroup to synchronize explicitly between two)");
      }
    const int have = c.wg_regs[wg];
    if ((inc && regs < have) || (!inc && regs > have))
      abort_cta(std::string("setmaxnreg.") + (inc ? "inc" : "dec") + " at " + pcs(pc) + " to " + std::to_string(regs) +
                " from warpgroup " + std::to_string(wg) + "'s " + std::to_string(have) + " goes the wrong way");
    if (!inc) {
      c.reg_used[rank_of_wg(c, wg)] -= (int64_t)(have - regs) * 128;
      c.wg_regs[wg] = regs;
    } else {
      c.wg_reg_pending[wg] = regs;
    }
    grant_pending();
  });
  if (inc && c.wg_reg_pending[wg])
    block_until([&c, wg] { return c.wg_reg_pending[wg] == 0; }, wait_text(c, wg), pc);
  after_setmaxnreg(c)[f.tid] = ++f.vc[f.tid];
}

}  // namespace heddle_rt
