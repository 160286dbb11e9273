// Split-K in the simulator (passes/reduce_splits.cpp, heddle_grid.cuh): the grid-level edge between
// the CTAs of one output tile.
//
//   partial store ws[slot]     the thread's accumulators and clock are recorded for the slot (the same
//                              thread of the reducing CTA owns the same elements)
//   grid.release flags[i]      one thread: every thread's store to slot i must be ordered before it
//                              (the block barrier before the release), else a race; flag i is released
//   grid.wait flags[i..i+n)    one thread acquires each flag. CTAs run in linear order, so a flag no
//                              earlier CTA released is never released while this CTA waits: a deadlock
//   partial add ws[i..i+n)     slot j is read only after flag j was acquired in this CTA by an acquire
//                              ordered before the read (the block barrier after the wait), else a race;
//                              then the values are added in slot order
// The numbers follow: the reducing CTA's epilogue sees the sum of every split's accumulators.
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

namespace {

std::string cta(const Cta& c) {
  std::ostringstream os;
  os << "CTA (" << c.bx << ", " << c.by << ", " << c.bz << ")";
  return os.str();
}

}  // namespace

bool Cta::execGridSync(Thread& t, const kir::Sync& s) {
  if (s.sync != kir::SyncKind::GridRelease && s.sync != kir::SyncKind::GridWait) return false;
  if (!grid) fail<HeddleError>("simulate: ", kir::describe(s), " outside a grid simulation");
  const int64_t i0 = s.index.eval(t.env);
  if (s.sync == kir::SyncKind::GridRelease) {
    auto it = grid->partials.find(i0);
    if (it != grid->partials.end() && it->second.cta == ctaIndex)
      for (auto [u, clk] : it->second.clocks)
        if (u != t.tid && clk > t.vc[u]) {
          rep.add(Finding::Race, "grid-release|" + std::to_string(s.id), [&] {
            return threadName(t.tid, W) + " of " + cta(*this) + " releases flags[" + std::to_string(i0) +
                   "] before the partial store of " + threadName(u, W) +
                   " is ordered before it (the block barrier before the release is missing)";
          });
          if (opt.stopAtFirstError) stopped = true;
          break;
        }
    grid->released[i0] = ctaIndex;
    return true;
  }
  for (int64_t j = i0; j < i0 + s.count; ++j) {
    if (!grid->released.count(j)) {
      rep.add(Finding::Deadlock, "grid-wait|" + std::to_string(s.id), [&] {
        return threadName(t.tid, W) + " of " + cta(*this) + " waits on flags[" + std::to_string(j) + "] ('" +
               kir::describe(s) +
               "'), which no earlier CTA released: only CTAs dispatched before it can "
               "release a flag it waits on, so the wait never ends";
      });
      stopped = true;
      return true;
    }
    acquired[j] = {t.tid, t.vc[t.tid]};
    grid->released.erase(j);  // reset to 0 once seen
  }
  return true;
}

bool Cta::execPartial(Thread& t, const kir::EpilogueStore& e) {
  if (e.partial == kir::EpilogueStore::Partial::None) return false;
  if (!grid) fail<HeddleError>("simulate: ", kir::describe(e), " outside a grid simulation");
  if (k.tile.mma == MmaKind::Wgmma && (!t.h.wgOpen.cells.empty() || !t.h.wgGroups.empty())) {
    rep.add(Finding::AsyncMisuse, "accread|" + std::to_string(e.id), [&] {
      return "'" + kir::describe(e) + "' (" + threadName(t.tid, W) +
             ") reads the accumulators while wgmma groups are in flight (no wgmma.wait_group(0) before it)";
    });
    if (opt.stopAtFirstError) stopped = true;
  }
  const int64_t slot0 = e.slot.eval(t.env);
  newInst(e, t, 0, 0);
  if (e.partial == kir::EpilogueStore::Partial::Store) {
    auto& p = grid->partials[slot0];
    if (p.cta != ctaIndex) p = GridState::Partial{ctaIndex, {}, {}};
    p.values[t.tid] = t.acc;
    p.clocks[t.tid] = t.vc[t.tid];
    return true;
  }
  for (int64_t j = slot0; j < slot0 + e.count; ++j) {
    auto a = acquired.find(j);
    auto p = grid->partials.find(j);
    std::string problem;
    if (p == grid->partials.end() || !p->second.values.count(t.tid)) problem = "which no earlier CTA stored";
    else if (a == acquired.end())
      problem = "with no acquire of flags[" + std::to_string(j) +
                "] before it (the flag wait is missing, waits on "
                "another flag, or is not ordered before the read)";
    else if (a->second.first != t.tid && a->second.second > t.vc[a->second.first])
      problem = "but the acquire of flags[" + std::to_string(j) + "] by " + threadName(a->second.first, W) +
                " is not ordered before the read (the block barrier after the flag wait is missing)";
    if (!problem.empty()) {
      rep.add(Finding::Race, "grid-read|" + std::to_string(e.id), [&] {
        return threadName(t.tid, W) + " of " + cta(*this) + " reads the partial tile ws[" + std::to_string(j) + "] " +
               problem;
      });
      if (opt.stopAtFirstError) stopped = true;
      if (p == grid->partials.end() || !p->second.values.count(t.tid)) continue;
    }  // an unordered read still sees the partial here (CTAs ran in order): the race is the finding
    const auto& v = p->second.values.at(t.tid);
    if (v.size() != t.acc.size()) fail<HeddleError>("simulate: ", kir::describe(e), ": fragment sizes differ");
    for (size_t i = 0; i < v.size(); ++i) t.acc[i] += v[i];
  }
  return true;
}

}  // namespace heddle::verify
