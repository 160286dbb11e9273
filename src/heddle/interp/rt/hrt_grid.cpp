// heddle/interp/rt/hrt_grid.cpp -- grid-level flags between CTAs (split-K, heddle_grid.cuh).
//
// CTAs run one after another, in increasing linear index, which is one legal order of a GPU that
// dispatches CTAs in that order: a flag wait on a CTA that runs later (or on a flag nobody sets)
// never ends, and the scheduler reports it as a deadlock naming the flag.
//
// Happens-before across CTAs, for the partial tiles. A CTA's partial stores are recorded per slot
// with each storing thread's clock; the release of the slot's flag must be ordered after all of them
// (the block barrier before the release), else a race. A read of a partial (add_partials) must come
// after this CTA acquired the slot's flag, by an acquire ordered before the read (the block barrier
// after the wait), else a race naming what is missing: the wait (a read of a flag never acquired:
// a dropped or misdirected wait) or the barrier after it.
#include <algorithm>
#include <map>

#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

struct GridState {
  struct Store {
    uint32_t cta = UINT32_MAX;  // none yet
    std::map<int, Clock> clocks;  // storing thread -> its clock at the store
    const int* flag = nullptr;
  };
  std::map<const float*, Store> partials;
  struct Flag {
    bool released = false;
    uint32_t cta = 0;
  };
  std::map<const int*, Flag> flags;
  // per CTA (reset when another CTA starts): the acquires of this CTA, flag -> (thread, its clock)
  uint32_t acq_cta = UINT32_MAX;
  std::map<const int*, std::pair<int, Clock>> acquired;
};

static GridState& grid() {
  Run& r = run();
  if (r.launch->workers > 1)  // each worker's Run has its own GridState, and flags need the linear order
    abort_cta("grid flags (split-K) between CTAs need the CTAs run in order: interpret with workers=1");
  if (!r.grid) r.grid = std::make_shared<GridState>();
  GridState& g = *r.grid;
  if (g.acq_cta != cta().linear) {
    g.acq_cta = cta().linear;
    g.acquired.clear();
  }
  return g;
}

static std::string flagName(const int* flag) { return "grid flag " + hex(reinterpret_cast<uint64_t>(flag)); }

void grid_partial(const float* slot, const int* flag, int floats, bool store) {
  tick();
  GridState& g = grid();
  Cta& c = cta();
  Fiber& f = me();
  const std::string where = "workspace slot " + hex(reinterpret_cast<uint64_t>(slot)) + " (" +
                            std::to_string(floats) + " floats)";
  if (store) {
    auto& s = g.partials[slot];
    if (s.cta != c.linear) s = GridState::Store{c.linear, {}, flag};
    if (s.flag != flag)
      finding("race", who(f.tid) + " of CTA " + std::to_string(c.linear) + " publishes " + where + " through " +
                          flagName(flag) + ", but other threads of the CTA through " + flagName(s.flag));
    s.clocks[f.tid] = f.vc[f.tid];
    return;
  }
  auto it = g.partials.find(slot);
  if (it == g.partials.end()) {
    finding("race", who(f.tid) + " of CTA " + std::to_string(c.linear) + " reads " + where +
                        ", which no CTA before it stored (a wrong slot, or its writer runs later)");
    return;
  }
  auto fl = g.flags.find(flag);
  if (fl == g.flags.end() || !fl->second.released) {
    finding("race", who(f.tid) + " of CTA " + std::to_string(c.linear) + " reads " + where + " written by CTA " +
                        std::to_string(it->second.cta) + ", but " + flagName(flag) + " was never released");
    return;
  }
  auto a = g.acquired.find(flag);
  if (a == g.acquired.end()) {
    finding("race", who(f.tid) + " of CTA " + std::to_string(c.linear) + " reads " + where + " written by CTA " +
                        std::to_string(it->second.cta) + " with no acquire of " + flagName(flag) +
                        " before it (the flag wait is missing, waits on another flag, or is not ordered before the read)");
    return;
  }
  if (a->second.first != f.tid && f.vc[a->second.first] < a->second.second)
    finding("race", who(f.tid) + " of CTA " + std::to_string(c.linear) + " reads " + where + ", but the acquire of " +
                        flagName(flag) + " by " + who(a->second.first) +
                        " is not ordered before the read (the block barrier after the flag wait is missing)");
}

void grid_release(int* flag) {
  tick();
  GridState& g = grid();
  Cta& c = cta();
  Fiber& f = me();
  for (auto& [slot, s] : g.partials) {
    if (s.flag != flag || s.cta != c.linear) continue;
    for (auto [t, clk] : s.clocks)
      if (t != f.tid && f.vc[t] < clk) {
        finding("race", who(f.tid) + " of CTA " + std::to_string(c.linear) + " releases " + flagName(flag) +
                            " before the partial store of " + who(t) +
                            " is ordered before it (the block barrier before the release is missing)");
        break;
      }
  }
  if (region_of(reinterpret_cast<uint64_t>(flag), 4, true) < 0)
    abort_cta("release of " + flagName(flag) + " by " + who(f.tid) + ": outside every writable tensor of the launch");
  if (*flag != 0)  // each flag is released once per launch and reset by its one reader: a second release can
                   // land after the reset and leave the flag set for the next launch
    finding("race", who(f.tid) + " of CTA " + std::to_string(c.linear) + " releases " + flagName(flag) +
                        ", which is already released and not yet acquired (a second release of one flag)");
  g.flags[flag] = GridState::Flag{true, c.linear};
  *flag = 1;
}

void grid_acquire(int* flag) {
  tick();
  if (region_of(reinterpret_cast<uint64_t>(flag), 4, true) < 0)
    abort_cta("wait on " + flagName(flag) + " by " + who(me().tid) + ": outside every writable tensor of the launch");
  block_until([flag] { return *flag != 0; },
              flagName(flag) + " (no CTA that ran before this one released it: a later CTA, or none, would)",
              __builtin_return_address(0));
  GridState& g = grid();
  Fiber& f = me();
  g.acquired[flag] = {f.tid, f.vc[f.tid]};
  *flag = 0;
}

}  // namespace heddle_rt
