// The hazard-driven sync planner (sync/plan.h) for block barriers and cp.async / vmcnt waits; the
// insert_syncs pass (lower/passes/insert_syncs.cpp) runs it on every kernel whose syncs are not placed
// by construction. It reads the pipelined loop (trip variable, k-tile, stages) from the kernel IR.
//
// Before (k loop after circular_buffer, s=4 p=3; no syncs besides commits):
//   for i in [0, 3) prologue { if (i < nk) { cp_async A -> sA[i%4]; cp_async B -> sB[i%4] }; commit }
//   for i in [0, nk-3) main  { cp_async A -> sA[(i+3)%4]; ...; commit; mma sA[i%4] x sB[i%4] }
//   for i in [max(nk-3, 0), nk) epilogue { mma sA[i%4] x sB[i%4] }
// After:
//   prologue ...; cp.async.wait_group(2); block_sync        # RAW sA/sB stage 0
//   main { ...; commit; mma; cp.async.wait_group(2); block_sync }   # RAW next stage + WAR this stage
//   cp.async.wait_group(0); block_sync                      # drain: epilogue reads the last stages
//   epilogue { mma }
//
// Method (docs/sync-plan.md). analyzeHazards() gives every hazard interval of the representative
// traces (trip counts, paths) and, for each static program point, whether one of its instances falls
// inside. Step 1 chooses the set of barrier points with the fewest barrier executions that stabs every
// cross-thread interval, at points every thread reaches (exact search under a node budget, else an
// irredundant greedy cover reported as valid with its lower bound; existing barriers are free and
// reused; an interval no uniform point stabs is refused naming the thread-dependent branch). Step 2
// assigns each async interval to the latest barrier instance inside it and gives that point the
// largest wait argument all of its intervals allow; a point inside a loop whose argument readers after
// the loop would lower gets a drain point at the loop exit instead (the steady state keeps its prefetch
// depth), and a barrier left serving nothing goes. Step 3 serves same-thread async reads with a wait
// just before the read. Step 4 drops or loosens waits whose intervals other waits already retire.
// Step 5 (no BackOffBarrier) drains the counters before barriers an LDS DMA may precede, then removes
// the drains every barrier can do without. Every placed op records its reason in the SyncPlan, with
// the origin builder "hazard planner" (the pass that ran it stamps its own name: stampPass).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "heddle/sync/plan.h"
#include "heddle/sync/split_barriers.h"

namespace heddle::sync {

namespace {

constexpr int kNoWait = 1 << 20;

struct Plan {
  std::set<int> barriers;                  // point ids
  std::map<int, int> wait;                 // point id -> wait_group arg
  std::map<int, std::vector<int>> served;  // point id -> hazard indices it serves
};

struct BarrierChoice {
  std::set<int> points;
  bool proven = false;     // the exact search finished: no placement has fewer executions
  int64_t executions = 0;  // barrier executions of the placement (new points, representative trace)
  int64_t lowerBound = 0;  // executions no placement can go below
  int64_t searched = 0;    // nodes of the exact search
};

// The thread-dependent branch a hazard's ends sit in (for the refusal message).
std::string branchOf(const HazardAnalysis& ha, const Hazard& h) {
  for (auto* n : {h.consumer, h.producer})
    for (auto& pt : ha.points)
      if (pt.index < (int)pt.block->stmts.size() && pt.block->stmts[pt.index].get() == n && !pt.uniform)
        return pt.nonUniformBranch;
  return "a thread-dependent branch";
}

// Fewest barrier executions stabbing every cross-thread hazard, at uniform points. Exact branch and
// bound (branch on the first unstabbed interval; points with an existing barrier cost nothing)
// under a node budget, seeded with a greedy cover; when the budget runs out the greedy cover, made
// irredundant, is used and the plan is reported valid rather than minimal, with a lower bound from
// intervals that share no candidate point.
BarrierChoice chooseBarriers(const HazardAnalysis& ha, const std::set<int>& fixed, int64_t kBudget) {
  std::vector<int> cross;
  for (int i = 0; i < (int)ha.hazards.size(); ++i)
    if (ha.hazards[i].crossThread) cross.push_back(i);
  // executions dominate; among equals prefer the shallower point (outside a loop rather than in it)
  auto cost = [&](int p) {
    return ha.points[p].hasBarrier ? int64_t(0)
                                   : std::max<int64_t>(1, ha.points[p].executions) * 16 + ha.points[p].loopDepth;
  };
  auto execs = [&](int p) {
    return ha.points[p].hasBarrier ? int64_t(0) : std::max<int64_t>(1, ha.points[p].executions);
  };
  std::vector<std::vector<int>> cands(ha.hazards.size());
  for (int h : cross) {
    for (int p = 0; p < (int)ha.points.size(); ++p)
      if (ha.hazards[h].latestInstance[p] >= 0 && ha.points[p].uniform) cands[h].push_back(p);
    if (cands[h].empty()) {
      auto& z = ha.hazards[h];
      fail<HeddleError>("sync planner: the ", hazardKindName(z.kind), " hazard on ", z.buffer, " (",
                        kir::describe(*z.producer), "  ->  ", kir::describe(*z.consumer),
                        ", different threads) can only be ordered inside ", branchOf(ha, z),
                        ", where a block barrier would not be reached by every thread. Move the producer or the "
                        "consumer out of that branch, give both the same thread mapping, or make the condition "
                        "uniform over the block");
    }
  }
  auto stabs = [&](int p, int h) { return ha.hazards[h].latestInstance[p] >= 0 && ha.points[p].uniform; };
  // the same relation as bit sets (a cross interval's candidate points; a set of chosen points), so
  // "is interval h stabbed by the chosen points" is a few word ANDs: the search asks it per node for
  // every interval, and the interval count grows with the square of the stage count
  const size_t words = (ha.points.size() + 63) / 64;
  std::vector<std::vector<uint64_t>> candBits(ha.hazards.size());
  for (int h : cross) {
    candBits[h].assign(words, 0);
    for (int p : cands[h]) candBits[h][p / 64] |= uint64_t(1) << (p % 64);
  }
  auto bitsOf = [&](const std::set<int>& ps) {
    std::vector<uint64_t> b(words, 0);
    for (int p : ps) b[p / 64] |= uint64_t(1) << (p % 64);
    return b;
  };
  auto stabbed = [&](int h, const std::vector<uint64_t>& chosen) {
    for (size_t w = 0; w < words; ++w)
      if (candBits[h][w] & chosen[w]) return true;
    return false;
  };
  // Intervals with the same candidate points are one constraint: a placement stabs all of them or
  // none. The walked traces repeat the ring's steady state once per trip count, so most of the
  // S^2 intervals of a deep ring are such repeats. The greedy cover and the search run over the
  // distinct candidate sets (first occurrence, in interval order, weighted by their count), which
  // chooses exactly what they chose over every interval: the search's first open interval is always
  // a first occurrence (a repeat is open only if its first occurrence is), the greedy's gains are the
  // same sums, and the irredundant pass asks only whether some chosen point stabs each set.
  std::vector<int> distinct;                          // first occurrence of each candidate set, in `cross` order
  std::vector<int64_t> weight(ha.hazards.size(), 0);  // per first occurrence: its number of intervals
  {
    std::map<std::vector<uint64_t>, int> firstOf;
    for (int h : cross) {
      auto [it, fresh] = firstOf.emplace(candBits[h], h);
      if (fresh) distinct.push_back(h);
      weight[it->second]++;
    }
  }

  // greedy: most newly stabbed intervals per cost, then drop points the others make redundant
  std::set<int> greedy = fixed;
  std::vector<bool> done(ha.hazards.size(), false);
  auto refresh = [&] {
    const std::vector<uint64_t> chosen = bitsOf(greedy);
    for (int h : distinct)
      if (!done[h] && stabbed(h, chosen)) done[h] = true;
  };
  refresh();
  for (;;) {
    std::map<int, int64_t> gain;
    for (int h : distinct)
      if (!done[h])
        for (int p : cands[h]) gain[p] += weight[h];
    if (gain.empty()) break;
    int bestP = -1;
    double bestScore = -1;
    for (auto& [p, g] : gain) {
      double score = double(g) / double(cost(p) + 1);
      if (score > bestScore) bestScore = score, bestP = p;
    }
    greedy.insert(bestP);
    refresh();
  }
  const std::vector<int> picked(greedy.rbegin(), greedy.rend());
  for (int p : picked) {  // irredundant: latest first, drop points every interval of which another stabs
    if (fixed.count(p)) continue;
    bool needed = false;
    for (int h : distinct) {
      if (!stabs(p, h)) continue;
      bool other = false;
      for (int q : greedy)
        if (q != p && stabs(q, h)) {
          other = true;
          break;
        }
      if (!other) {
        needed = true;
        break;
      }
    }
    if (!needed) greedy.erase(p);
  }
  int64_t greedyCost = 0;
  for (int p : greedy) greedyCost += cost(p);

  BarrierChoice out;
  int64_t best = greedyCost + 1;  // equal-cost placements found by the search win (its tie-breaks)
  std::set<int> bestSet;
  std::set<int> cur = fixed;
  std::vector<uint64_t> curBits = bitsOf(cur);
  int64_t nodes = 0;
  bool exhausted = false;
  std::function<void(int64_t)> search = [&](int64_t c) {
    if (c >= best) return;
    if (++nodes > kBudget) {
      exhausted = true;
      return;
    }
    int open = -1;
    for (int h : distinct)
      if (!stabbed(h, curBits)) {
        open = h;
        break;
      }
    if (open < 0) {
      best = c;
      bestSet = cur;
      return;
    }
    // candidates: cheapest first; among equals the earliest instance (a barrier closing an
    // iteration rather than opening the next one), which also lets following async copies issue early
    std::vector<int> cand;
    for (int p : cands[open])
      if (!cur.count(p)) cand.push_back(p);
    std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) {
      if (cost(a) != cost(b)) return cost(a) < cost(b);
      return ha.hazards[open].latestInstance[a] < ha.hazards[open].latestInstance[b];
    });
    for (int p : cand) {
      if (exhausted) return;
      cur.insert(p);
      curBits[p / 64] |= uint64_t(1) << (p % 64);
      search(c + cost(p));
      cur.erase(p);
      curBits[p / 64] &= ~(uint64_t(1) << (p % 64));
    }
  };
  search(0);
  out.searched = nodes;
  out.proven = !exhausted;
  out.points = best > greedyCost ? greedy : bestSet;
  for (int p : out.points) out.executions += execs(p);
  // lower bound (reported only when the search stopped early): intervals with pairwise disjoint
  // candidate sets each need their cheapest point
  if (out.proven) {
    out.lowerBound = out.executions;
    return out;
  }
  std::vector<int> order = cross;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return cands[a].size() < cands[b].size(); });
  std::set<int> usedPoints;
  int64_t lb = 0;
  for (int h : order) {
    bool disjoint = true;
    for (int p : cands[h]) disjoint &= !usedPoints.count(p);
    if (!disjoint) continue;
    int64_t m = INT64_MAX;
    for (int p : cands[h]) m = std::min(m, execs(p)), usedPoints.insert(p);
    lb += m;
  }
  out.lowerBound = std::min(lb, out.executions);
  return out;
}

// The latest barrier instance inside hazard h, among the chosen points.
int servingPoint(const Hazard& h, const std::set<int>& barriers) {
  int best = -1, bestInst = -1;
  for (int p : barriers)
    if (h.latestInstance[p] > bestInst) {
      bestInst = h.latestInstance[p];
      best = p;
    }
  return best;
}

// The point right after loop `l` in its parent block.
int loopExitPoint(const HazardAnalysis& ha, const kir::ForLoop* l) {
  for (int p = 0; p < (int)ha.points.size(); ++p) {
    auto& pt = ha.points[p];
    if (pt.index > 0 && pt.block->stmts[pt.index - 1].get() == l) return p;
  }
  return -1;
}

void assignWaits(const HazardAnalysis& ha, Plan& plan, bool backOffBarrier) {
  std::map<const kir::ForLoop*, const kir::ForLoop*> parent;  // loop nesting
  for (auto& pt : ha.points)
    if (pt.index < (int)pt.block->stmts.size() && pt.block->stmts[pt.index]->kind == kir::NodeKind::For)
      parent[static_cast<const kir::ForLoop*>(pt.block->stmts[pt.index].get())] = pt.loop;
  auto within = [&](const kir::ForLoop* l, const kir::ForLoop* outer) {
    for (; l; l = parent.count(l) ? parent.at(l) : nullptr)
      if (l == outer) return true;
    return false;
  };
  for (int iter = 0; iter < 8; ++iter) {
    plan.wait.clear();
    plan.served.clear();
    std::map<int, int> steady;  // wait allowed by readers inside the point's own loop
    std::map<int, std::vector<int>> outside;
    for (int h = 0; h < (int)ha.hazards.size(); ++h) {
      auto& hz = ha.hazards[h];
      if (!hz.crossThread) continue;
      int p = servingPoint(hz, plan.barriers);
      plan.served[p].push_back(h);
      if (!hz.async) continue;
      const kir::ForLoop* pl = ha.points[p].loop;
      bool readerOutsideLoop = pl && !within(hz.consumerLoop, pl);  // (a loop nested in pl is inside)
      if (readerOutsideLoop) outside[p].push_back(h);
      else steady[p] = std::min(steady.count(p) ? steady[p] : kNoWait, hz.allowedWait[p]);
    }
    bool added = false;
    for (auto& [p, hs] : outside) {
      int need = kNoWait;
      for (int h : hs) need = std::min(need, ha.hazards[h].allowedWait[p]);
      // (without BackOffBarrier a barrier an LDS DMA may precede waits for vmcnt(0) anyway: no drain)
      const bool zeroAnyway = !backOffBarrier && ha.points[p].vmIssuedBefore;
      if (steady.count(p) && need < steady[p] && !zeroAnyway) {
        int exitP = loopExitPoint(ha, ha.points[p].loop);
        if (exitP >= 0 && !plan.barriers.count(exitP)) {
          plan.barriers.insert(exitP);  // drain at the loop exit; the steady state keeps its depth
          added = true;
        }
      }
    }
    if (added) continue;
    for (auto& [p, hs] : plan.served)
      for (int h : hs)
        if (ha.hazards[h].async)
          plan.wait[p] = std::min(plan.wait.count(p) ? plan.wait[p] : kNoWait, ha.hazards[h].allowedWait[p]);
    return;
  }
}

// A wait a barrier carries for an async interval is not needed when another placed wait, followed
// by its barrier (cross-thread) or on the reader's thread (same thread), already retires the producer
// inside the interval on every walked path (e.g. a wait in a loop that runs before the point).
// Such intervals move to that wait; a wait left with none goes, one left with fewer is loosened.
// Points are visited most-executed first (a wait in a loop costs most), then latest first.
void dropCoveredWaits(const HazardAnalysis& ha, Plan& plan, const std::set<int>& keepWaits) {
  // the barrier that publishes a wait at q for interval hz: one with an instance after q's, before
  // the consumer (q's own, when q is a barrier point); -1 when none
  auto publisher = [&](int q, const Hazard& hz) {
    if (plan.barriers.count(q)) return q;
    for (int b : plan.barriers)
      if (hz.latestInstance[b] > hz.latestInstance[q]) return b;
    return -1;
  };
  auto covers = [&](int q, const Hazard& hz) {
    auto it = plan.wait.find(q);
    return it != plan.wait.end() && hz.latestInstance[q] >= 0 && it->second <= hz.allowedWait[q] &&
           (!hz.crossThread || publisher(q, hz) >= 0);
  };
  std::vector<int> order;
  for (auto& [p, w] : plan.wait)
    if (!keepWaits.count(p)) order.push_back(p);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (ha.points[a].executions != ha.points[b].executions) return ha.points[a].executions > ha.points[b].executions;
    return a > b;
  });
  for (int p : order) {
    std::vector<int> keep, asyncLeft;
    std::vector<std::pair<int, int>> moved;  // (hazard, new point)
    for (int h : plan.served[p]) {
      auto& hz = ha.hazards[h];
      int to = -1;
      if (hz.async)
        for (auto& [q, w] : plan.wait)
          if (q != p && covers(q, hz)) {
            to = q;
            break;
          }
      if (to >= 0) {
        moved.push_back({h, to});
      } else {
        keep.push_back(h);
        if (hz.async) asyncLeft.push_back(h);
      }
    }
    if (moved.empty()) continue;
    for (auto& [h, q] : moved) plan.served[q].push_back(h);
    // the barrier here still orders its other intervals; the moved ones are ordered by their new point
    plan.served[p] = keep;
    if (asyncLeft.empty()) {
      plan.wait.erase(p);
    } else {
      int w = kNoWait;
      for (int h : asyncLeft) w = std::min(w, ha.hazards[h].allowedWait[p]);
      plan.wait[p] = w;
    }
  }
}

// Same-thread async reads: a wait (no barrier) as late as possible, i.e. right before the read.
// (dropCoveredWaits, run next, removes the ones other waits make redundant.)
void assignSameThreadWaits(const HazardAnalysis& ha, Plan& plan) {
  auto covers = [&](int p, int w, const Hazard& hz) { return hz.latestInstance[p] >= 0 && w <= hz.allowedWait[p]; };
  for (int h = 0; h < (int)ha.hazards.size(); ++h) {
    auto& hz = ha.hazards[h];
    if (hz.crossThread || !hz.async) continue;
    int coveredBy = -1;  // recorded, so that dropping that wait later accounts for this read
    for (auto& [p, w] : plan.wait)
      if (covers(p, w, hz)) {
        coveredBy = p;
        break;
      }
    if (coveredBy >= 0) {
      plan.served[coveredBy].push_back(h);
      continue;
    }
    int best = -1;
    for (int p = 0; p < (int)ha.points.size(); ++p)
      if (hz.latestInstance[p] >= 0 && (best < 0 || hz.latestInstance[p] > hz.latestInstance[best])) best = p;
    if (best < 0)
      fail<HeddleError>(
          "sync planner: ", kir::describe(*hz.consumer), " touches ", hz.buffer, " while the async copy ",
          kir::describe(*hz.producer),
          " into the same stage is not yet committed, so no wait can "
          "retire it first: commit the copy's group before that access, or move the access after the commit");
    plan.wait[best] = std::min(plan.wait.count(best) ? plan.wait[best] : kNoWait, hz.allowedWait[best]);
    plan.served[best].push_back(h);
  }
}

// Targets without BackOffBarrier: a drain (vmcnt(0) before a barrier that an LDS DMA may precede)
// goes when every barrier still runs with no DMA in flight on every walked trace without it (a wait
// placed earlier already drained the counter; then every interval the drain served is retired too,
// since nothing is in flight there). Drains are tried in program order; each removal is checked on
// the whole kernel. (Loosening instead cannot pass: a barrier right after vmcnt(n > 0) may see n.)
void relaxDrains(kir::Kernel& k, const HazardAnalysis& ha, Plan& plan, const std::map<int, kir::Sync*>& nodes,
                 const PipelineLoop& loop) {
  for (auto& [p, node] : nodes) {
    kir::Block* blk = ha.points[p].block;
    auto at =
        std::find_if(blk->stmts.begin(), blk->stmts.end(), [&](const kir::NodePtr& n) { return n.get() == node; });
    const size_t index = at - blk->stmts.begin();
    kir::NodePtr held = std::move(*at);
    blk->stmts.erase(at);
    if (vmDrainedAtBarriers(k, loop)) {
      plan.wait.erase(p);
      continue;
    }
    blk->stmts.insert(blk->stmts.begin() + index, std::move(held));
  }
}

// Fills the reason of a sync op from the hazards it serves.
void describeHazards(const HazardAnalysis& ha, const std::vector<int>& hs, kir::SyncReason& r) {
  std::set<std::string> kinds, bufs, stages, prods, cons, pairs;
  // a point serves many instances of few (kind, buffer, stage, producer, consumer) tuples (one per
  // walked trace and k-tile): each tuple is described once, each node once
  std::set<std::tuple<int, std::string_view, std::string_view, const kir::Node*, const kir::Node*>> seen;
  std::map<const kir::Node*, std::string> described;
  auto describe = [&](const kir::Node* n) -> const std::string& {
    auto it = described.find(n);
    return it != described.end() ? it->second : described.emplace(n, kir::describe(*n)).first->second;
  };
  for (int h : hs) {
    auto& z = ha.hazards[h];
    if (!seen.insert({int(z.kind), z.buffer, z.stageExpr, z.producer, z.consumer}).second) continue;
    pairs.insert(std::string(hazardKindName(z.kind)) + " " + z.buffer + ": " + describe(z.producer) + "  ->  " +
                 describe(z.consumer));
    kinds.insert(std::string(hazardKindName(z.kind)) + " " + z.buffer);
    bufs.insert(z.buffer);
    stages.insert(z.stageExpr);
    prods.insert(describe(z.producer));
    cons.insert(describe(z.consumer));
  }
  auto join = [](const std::set<std::string>& s, size_t maxN = 4) {
    std::string o;
    size_t i = 0;
    for (auto& x : s) {
      if (i == maxN) {
        o += ", ...";
        break;
      }
      o += (i++ ? ", " : "") + x;
    }
    return o;
  };
  r.hazards = join(kinds, 8);
  r.buffer = join(bufs);
  r.stage = join(stages);
  r.producer = join(prods, 3);
  r.consumer = join(cons, 3);
  r.pairs.assign(pairs.begin(), pairs.end());
}

}  // namespace

PipelineLoop pipelineLoop(const kir::Kernel& k) {
  const kir::ForLoop* found = nullptr;
  kir::walk(k.body, [&](const kir::Node& n) {
    if (!found && n.kind == kir::NodeKind::For && !static_cast<const kir::ForLoop&>(n).tripsVar.empty())
      found = static_cast<const kir::ForLoop*>(&n);
  });
  if (!found)
    fail<HeddleError>("sync planner: kernel ", k.name,
                      " has no loop over a runtime extent (ForLoop::tripsVar) to walk; "
                      "the loop builder records it (build_matmul_loops, split_k)");
  return {found->tripsVar, found->tileK, std::max(1, found->cbStages)};
}

void planSyncs(kir::Kernel& k, const TargetInfo& target, int64_t searchBudget) {
  planSyncs(k, pipelineLoop(k), target, searchBudget);
}

void planSyncs(kir::Kernel& k, const PipelineLoop& loop, const TargetInfo& target, int64_t searchBudget) {
  HazardAnalysis ha = analyzeHazards(k, loop);
  std::set<int> fixed;
  for (int p = 0; p < (int)ha.points.size(); ++p)
    if (ha.points[p].hasBarrier) fixed.insert(p);
  Plan plan;
  BarrierChoice choice = chooseBarriers(ha, fixed, searchBudget);
  plan.barriers = choice.points;
  assignWaits(ha, plan, target.backOffBarrier);
  // a drain added at a loop exit can make a chosen barrier serve nothing (every interval it stabs has
  // a later barrier inside): such a barrier goes
  // (a drain may come back when the barrier it replaced goes: a few rounds, then the plan as it is)
  for (int round = 0; round < 4; ++round) {
    Plan before = plan;
    bool dropped = false;
    for (auto it = plan.barriers.begin(); it != plan.barriers.end();)
      if (!fixed.count(*it) && plan.served[*it].empty()) it = plan.barriers.erase(it), dropped = true;
      else ++it;
    if (!dropped) break;
    assignWaits(ha, plan, target.backOffBarrier);
    if (plan.barriers.size() >= before.barriers.size()) {  // no progress: keep the earlier plan
      plan = before;
      break;
    }
  }
  dropCoveredWaits(ha, plan, {});
  // AMD without BackOffBarrier: vector-memory counters drain before every barrier that may have
  // LDS DMA in flight (LLVM's rule for such targets), so the wait there is vmcnt(0) -- and serves
  // the same-thread reads after it.
  std::set<int> drained;
  if (!target.backOffBarrier)
    for (int p : plan.barriers)
      if (ha.points[p].vmIssuedBefore) {
        plan.wait[p] = 0;
        drained.insert(p);
      }
  assignSameThreadWaits(ha, plan);
  dropCoveredWaits(ha, plan, drained);        // same-thread waits may retire what a barrier's wait was for
  std::set<const kir::Sync*> placedBarriers;  // for split barriers
  std::map<int, kir::Sync*> drainNodes;

  // Insert: per point, [wait_group(n)] then [block_sync]. Process blocks back to front so indices hold.
  // (keyed by the block's first point id, not its address, so the output is deterministic)
  std::map<int, std::vector<int>> byBlock;
  std::set<int> all(plan.barriers.begin(), plan.barriers.end());
  for (auto& [p, w] : plan.wait) all.insert(p);
  std::map<const kir::Block*, int> firstPoint;
  for (int p = (int)ha.points.size() - 1; p >= 0; --p)
    if (ha.points[p].index == 0) firstPoint[ha.points[p].block] = p;
  for (int p : all) byBlock[firstPoint.at(ha.points[p].block)].push_back(p);
  for (auto& [first, ps] : byBlock) {
    kir::Block* blk = ha.points[first].block;
    std::sort(ps.begin(), ps.end(), [&](int a, int b) { return ha.points[a].index > ha.points[b].index; });
    for (int p : ps) {
      std::vector<kir::NodePtr> ins;
      auto& pt = ha.points[p];
      bool barrier = plan.barriers.count(p) && !pt.hasBarrier;
      kir::SyncReason base;
      base.origin.builder = "hazard planner";
      describeHazards(ha, plan.served[p], base);
      bool vm = drained.count(p) > 0;
      for (int h : plan.served[p]) vm |= ha.hazards[h].vmcnt;
      if (plan.wait.count(p) && plan.wait[p] < kNoWait) {
        int n = plan.wait[p];
        kir::SyncReason r = base;
        std::ostringstream why;
        if (vm) {
          n = std::min(n, std::max(0, target.vmcntMax));
          why << "s_waitcnt vmcnt(" << n << "): the producing LDS DMA ops must land before "
              << (plan.barriers.count(p) ? "the barrier publishes them" : "this thread reads them") << "; " << n
              << " newer vector-memory op(s) may stay in flight (the largest count every path allows"
              << (n == target.vmcntMax ? ", capped at the counter's maximum" : "") << ")";
          if (drained.count(p)) why << "; " << target.name << " has no BackOffBarrier: counters drain before s_barrier";
        } else {
          why << "cp.async.wait_group(" << n << "): the producing copies' group must retire before "
              << (plan.barriers.count(p) ? "the barrier publishes it" : "this thread reads it") << "; " << n
              << " newer group(s) may stay in flight (the largest count every path allows)";
        }
        r.mechanism = why.str();
        k.syncPlan.entries.push_back(r);
        auto s = std::make_unique<kir::Sync>(vm ? kir::SyncKind::VmcntWait : kir::SyncKind::CpAsyncWait, n);
        s->reason = (int)k.syncPlan.entries.size() - 1;
        if (drained.count(p)) drainNodes[p] = s.get();
        ins.push_back(std::move(s));
      }
      if (barrier) {
        kir::SyncReason r = base;
        r.mechanism =
            "block barrier: producer and consumer are different threads (copy chunks vs warp fragments); "
            "one barrier here serves " +
            std::to_string(plan.served[p].size()) + " hazard interval(s) of the walked traces";
        k.syncPlan.entries.push_back(r);
        auto s = std::make_unique<kir::Sync>(kir::SyncKind::BlockSync);
        s->reason = (int)k.syncPlan.entries.size() - 1;
        placedBarriers.insert(s.get());
        ins.push_back(std::move(s));
      }
      blk->stmts.insert(blk->stmts.begin() + pt.index, std::make_move_iterator(ins.begin()),
                        std::make_move_iterator(ins.end()));
    }
  }
  if (!drainNodes.empty()) relaxDrains(k, ha, plan, drainNodes, loop);
  if (target.splitBarrier)  // GFX12: signal early, wait late, checked against the hazard intervals
    splitBarriers(k, placedBarriers, [&] { return unorderedInterval(k, loop).empty(); });
  numberReasons(k);
  // summary
  int perMain = 0;
  kir::walk(k.body, [&](const kir::Node& n) {
    if (n.kind != kir::NodeKind::For) return;
    auto& f = static_cast<const kir::ForLoop&>(n);
    if (f.stage != kir::LoopStage::Main && !(f.stage == kir::LoopStage::Serial && loop.stages <= 1)) return;
    for (auto& s : f.body.stmts)
      if (s->kind == kir::NodeKind::Sync && (static_cast<kir::Sync&>(*s).sync == kir::SyncKind::BlockSync ||
                                             static_cast<kir::Sync&>(*s).sync == kir::SyncKind::BarrierSignal))
        ++perMain;
  });
  k.syncPlan.barriersPerMainIteration = perMain;
  std::ostringstream os;
  os << ha.hazards.size() << " hazard intervals over trip counts {";
  for (size_t i = 0; i < ha.tripCounts.size(); ++i) os << (i ? ", " : "") << ha.tripCounts[i];
  os << "}";
  if (ha.enumeratedBranches || ha.mergedBranches)
    os << ", " << ha.paths << " path(s) per trip count (" << ha.enumeratedBranches
       << " uniform condition(s) enumerated, " << ha.mergedBranches << " branch(es) walked as alternatives)";
  os << "; " << plan.barriers.size() << " barrier point(s), " << perMain << " barrier(s) per main-loop iteration; ";
  if (choice.proven) os << "placement proven minimal (exact search, " << choice.searched << " node(s))";
  else
    os << "placement valid, not proven minimal: " << choice.executions
       << " barrier execution(s) per trace, lower bound " << choice.lowerBound << " (exact search stopped after "
       << choice.searched << " nodes)";
  k.syncPlan.summary = os.str();
}

}  // namespace heddle::sync
