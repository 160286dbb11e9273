// Hazard analysis: symbolic execution of the kernel IR over representative trip counts, then
// RAW/WAR/WAW intervals between accesses of the same buffer stage. See hazards.h.
#include "heddle/sync/hazards.h"

#include <algorithm>
#include <map>
#include <set>

namespace heddle::sync {

const char* hazardKindName(Hazard::Kind k) {
  switch (k) {
    case Hazard::RAW: return "RAW";
    case Hazard::WAR: return "WAR";
    case Hazard::WAW: return "WAW";
  }
  return "?";
}

namespace {

// Which paths a dynamic event lies on: the (branch instance, side) pairs of the merged branches
// around it, innermost last. Context 0 is "every path".
struct Ctx {
  std::vector<std::pair<int, int>> sides;  // (instance, 0 then / 1 else)
  std::vector<bool> threadDep;             // per entry: the branch depends on the thread
};

// A node's shared-memory accesses and their stage expressions as text, found once per analysis
// (every dynamic instance of the node points at them).
struct NodeAccesses {
  std::vector<kir::Access> acc;
  std::vector<std::string> stageText;
};

struct DynAccess {
  const kir::Node* node;
  const kir::Access* accp;
  const std::string* stageText;
  int64_t stage;
  int64_t iter;
  int event;       // event index of the access
  int group = -1;  // commit group (1-based) for cp.async writes
  int commitEvent = -1;
  const kir::ForLoop* loop;
  int ctx = 0;
};

struct Tracer {
  std::map<std::pair<const kir::Block*, int>, int> pointId;
  std::vector<ProgramPoint>* points;
  std::set<std::string> threadVars;  // tid, warp, lane and names computed from them
  // per trace
  std::vector<int> eventPoint;  // point id or -1 for an access event
  std::vector<int> commitsAt;   // commit count at each event
  std::vector<int> eventCtx;
  std::vector<DynAccess> accesses;
  std::vector<int> pendingAsync;  // accesses waiting for their commit
  int commits = 0;
  // AMD: every LDS DMA instruction is its own vmcnt entry (no commit); vmAt[e] = ops issued so far
  std::vector<int> vmAt;
  int vmOps = 0, threads = 1;
  bool vmAnyPath = false;    // some path issued an LDS DMA (vmOps counts the fewest)
  int vmOut = 0;             // LDS DMA ops possibly in flight (most over paths), after the waits
  bool vmAtBarrier = false;  // a barrier ran with vmOut > 0
  bool countExecutions = false;
  // unknown conditions: the enumerated ones and this trace's outcome for each
  std::set<std::string> enumerable;  // uniform, loop-invariant conditions (by text), at most kMaxEnumerated
  std::map<std::string, bool> decide;
  std::vector<std::string> defaulted;    // enumerated conditions this trace met undecided (walked "then")
  std::set<std::string> unknownUniform;  // discovery: uniform loop-invariant conditions met
  int mergedInstances = 0;
  std::set<const kir::IfThenElse*> merged;
  std::vector<Ctx> ctxs{Ctx{}};
  int ctx = 0;
  std::set<std::string> activeLoopVars;
  std::map<const kir::Node*, NodeAccesses> nodeAccesses;  // kept across traces

  const NodeAccesses& accessesOf(const kir::Node& s) {
    auto it = nodeAccesses.find(&s);
    if (it != nodeAccesses.end()) return it->second;
    NodeAccesses na;
    na.acc = kir::accessesOf(s);
    for (auto& a : na.acc) na.stageText.push_back(a.stage.str());
    return nodeAccesses.emplace(&s, std::move(na)).first->second;
  }

  bool threadDependent(const kir::IExpr& e) const {
    std::set<std::string> vs;
    e.collectVars(vs);
    for (auto& v : vs)
      if (kir::isThreadBuiltin(v) || threadVars.count(v)) return true;
    return false;
  }

  void collect(kir::Block& b, const std::string& where, int depth, const kir::ForLoop* loop,
               const std::string& nonUniform) {
    for (int j = 0; j <= (int)b.stmts.size(); ++j) {
      ProgramPoint p;
      p.block = &b;
      p.index = j;
      p.loopDepth = depth;
      p.loop = loop;
      p.uniform = nonUniform.empty();
      p.nonUniformBranch = nonUniform;
      p.where = where + (j < (int)b.stmts.size() ? ", before " + kir::describe(*b.stmts[j]) : ", at its end");
      if (j < (int)b.stmts.size() && b.stmts[j]->kind == kir::NodeKind::Sync &&
          static_cast<kir::Sync&>(*b.stmts[j]).sync == kir::SyncKind::BlockSync)
        p.hasBarrier = true;
      pointId[{&b, j}] = (int)points->size();
      points->push_back(p);
      if (j == (int)b.stmts.size()) break;
      auto& s = *b.stmts[j];
      if (s.kind == kir::NodeKind::For) {
        auto& f = static_cast<kir::ForLoop&>(s);
        std::string nu = nonUniform;
        if (threadDependent(f.start) || threadDependent(f.stop)) {
          threadVars.insert(f.var);
          if (nu.empty()) nu = "for " + f.var + " in [" + f.start.str() + ", " + f.stop.str() + ")";
        }
        collect(f.body, std::string(kir::loopStageName(f.stage)) + " loop body", depth + 1, &f, nu);
      } else if (s.kind == kir::NodeKind::If) {
        auto& i = static_cast<kir::IfThenElse&>(s);
        std::string nu = nonUniform.empty() && threadDependent(i.cond) ? "if (" + i.cond.str() + ")" : nonUniform;
        collect(i.thenBody, "if-branch", depth, loop, nu);
        collect(i.elseBody, "else-branch", depth, loop, nu);
      } else if (s.kind == kir::NodeKind::Let) {
        auto& l = static_cast<kir::Let&>(s);
        if (threadDependent(l.value)) threadVars.insert(l.var);
      }
    }
  }

  void event(int pointOrMinusOne) {
    eventPoint.push_back(pointOrMinusOne);
    commitsAt.push_back(commits);
    vmAt.push_back(vmOps);
    eventCtx.push_back(ctx);
  }

  void point(const kir::Block& b, int j) {
    int id = pointId.at({&b, j});
    event(id);
    if (vmOps > 0 || vmAnyPath) (*points)[id].vmIssuedBefore = true;
    if (countExecutions && ctx == 0) (*points)[id].executions++;
  }

  // Both sides of an unknown branch as alternatives of one trace (see hazards.h).
  void execMerged(const kir::IfThenElse& c, std::map<std::string, int64_t>& env, const kir::ForLoop* loop,
                  bool threadDep) {
    merged.insert(&c);
    const int inst = mergedInstances++;
    const int outer = ctx, c0 = commits, v0 = vmOps, o0 = vmOut;
    const std::vector<int> pending0 = pendingAsync;
    int cSide[2], vSide[2], oSide[2];
    std::vector<int> pendSide[2];
    for (int side = 0; side < 2; ++side) {
      Ctx nc = ctxs[outer];
      nc.sides.push_back({inst, side});
      nc.threadDep.push_back(threadDep);
      ctxs.push_back(nc);
      ctx = (int)ctxs.size() - 1;
      commits = c0;
      vmOps = v0;
      vmOut = o0;
      pendingAsync = pending0;
      exec(side == 0 ? c.thenBody : c.elseBody, env, loop);
      cSide[side] = commits;
      vSide[side] = vmOps;
      oSide[side] = vmOut;
      pendSide[side] = pendingAsync;
    }
    ctx = outer;
    commits = std::min(cSide[0], cSide[1]);  // the path with fewer newer groups bounds every wait
    vmOps = std::min(vSide[0], vSide[1]);
    vmOut = std::max(oSide[0], oSide[1]);  // in flight: the path with more
    std::set<int> pend(pendSide[0].begin(), pendSide[0].end());
    pend.insert(pendSide[1].begin(), pendSide[1].end());
    pendingAsync.assign(pend.begin(), pend.end());
  }

  void exec(const kir::Block& b, std::map<std::string, int64_t>& env, const kir::ForLoop* loop) {
    for (int j = 0; j < (int)b.stmts.size(); ++j) {
      point(b, j);
      auto& s = *b.stmts[j];
      switch (s.kind) {
        case kir::NodeKind::For: {
          auto& f = static_cast<const kir::ForLoop&>(s);
          int64_t lo = 0, hi = 0;
          try {
            lo = f.start.eval(env), hi = f.stop.eval(env);
          } catch (const HeddleError& e) {
            fail<HeddleError>(
                "sync planner: the bounds of for ", f.var, " in [", f.start.str(), ", ", f.stop.str(), ") ",
                threadDependent(f.start) || threadDependent(f.stop) ? "depend on the thread"
                                                                    : "name a value the planner cannot bind",
                " (", e.what(),
                "); a loop holding shared-memory accesses needs bounds every thread "
                "agrees on, in the trip-count variable and constants");
          }
          activeLoopVars.insert(f.var);
          for (int64_t i = lo; i < hi; ++i) {
            env[f.var] = i;
            exec(f.body, env, &f);
          }
          activeLoopVars.erase(f.var);
          env.erase(f.var);
          break;
        }
        case kir::NodeKind::If: {
          auto& c = static_cast<const kir::IfThenElse&>(s);
          bool taken = true;
          try {
            taken = c.cond.eval(env) != 0;
          } catch (const HeddleError&) {
            std::set<std::string> vs;
            c.cond.collectVars(vs);
            const bool threadDep = threadDependent(c.cond);
            bool loopVariant = false;
            for (auto& v : vs) loopVariant |= activeLoopVars.count(v) > 0;
            const std::string text = c.cond.str();
            if (!threadDep && !loopVariant) unknownUniform.insert(text);
            if (threadDep || loopVariant || !enumerable.count(text)) {
              execMerged(c, env, loop, threadDep);
              break;
            }
            auto it = decide.find(text);
            if (it == decide.end()) {
              defaulted.push_back(text);
              it = decide.emplace(text, true).first;
            }
            taken = it->second;
          }
          exec(taken ? c.thenBody : c.elseBody, env, loop);
          break;
        }
        case kir::NodeKind::Let: {
          auto& l = static_cast<const kir::Let&>(s);
          try {
            env[l.var] = l.value.eval(env);
          } catch (const HeddleError&) {  // depends on the thread or a kernel scalar: stays unknown
          }
          break;
        }
        case kir::NodeKind::Sync: {
          auto& sy = static_cast<const kir::Sync&>(s);
          if (sy.sync == kir::SyncKind::CpAsyncCommit) {
            ++commits;
            for (int a : pendingAsync) {  // merged branches: the latest commit that can close it
              accesses[a].group = std::max(accesses[a].group, commits);
              accesses[a].commitEvent = std::max(accesses[a].commitEvent, (int)eventPoint.size() - 1);
            }
            pendingAsync.clear();
          } else if (sy.sync == kir::SyncKind::VmcntWait) {
            vmOut = std::min(vmOut, sy.arg);
          } else if (sy.sync == kir::SyncKind::BlockSync || sy.sync == kir::SyncKind::BarrierSignal) {
            vmAtBarrier |= vmOut > 0;
          }
          break;
        }
        default:
          const NodeAccesses& na = accessesOf(s);
          for (size_t ai = 0; ai < na.acc.size(); ++ai) {
            const kir::Access& acc = na.acc[ai];
            DynAccess d{&s,   &acc, &na.stageText[ai], acc.stage.eval(env), -1, (int)eventPoint.size(), -1, -1,
                        loop, ctx};
            if (s.kind == kir::NodeKind::TileLoad) d.iter = static_cast<const kir::TileLoad&>(s).iter.eval(env);
            if (s.kind == kir::NodeKind::MmaStep) d.iter = static_cast<const kir::MmaStep&>(s).iter.eval(env);
            if (s.kind == kir::NodeKind::SmemAccess) d.iter = static_cast<const kir::SmemAccess&>(s).iter.eval(env);
            if (acc.write && acc.async == kir::AsyncKind::Vmcnt) {  // its own counter entry, from its issue
              const int ops = kir::vmemOpsPerThread(s, threads);
              vmOps += ops;
              vmOut += ops;
              vmAnyPath = true;
              d.group = vmOps;
              d.commitEvent = (int)eventPoint.size();
            }
            event(-1);
            if (acc.write && acc.async == kir::AsyncKind::CpAsync) pendingAsync.push_back((int)accesses.size());
            accesses.push_back(d);
          }
      }
    }
    point(b, (int)b.stmts.size());
  }

  // ---- relations between contexts ----
  bool has(int c, std::pair<int, int> x) const {
    for (auto& y : ctxs[c].sides)
      if (y == x) return true;
    return false;
  }
  // e lies on every path through a and b
  bool onPathsOf(int e, int a, int b) const {
    for (auto& x : ctxs[e].sides)
      if (!has(a, x) && !has(b, x)) return false;
    return true;
  }
  // a and b never both run on one thread (opposite sides of one merged branch instance); for
  // accesses of different threads only uniform branches exclude each other
  bool exclusive(int a, int b, bool sameThread) const {
    auto& A = ctxs[a];
    for (size_t i = 0; i < A.sides.size(); ++i)
      for (auto& y : ctxs[b].sides)
        if (y.first == A.sides[i].first && y.second != A.sides[i].second && (sameThread || !A.threadDep[i]))
          return true;
    return false;
  }
};

void resetTrace(Tracer& t) {
  t.eventPoint.clear();
  t.commitsAt.clear();
  t.vmAt.clear();
  t.eventCtx.clear();
  t.vmOps = 0;
  t.vmAnyPath = false;
  t.vmOut = 0;
  t.vmAtBarrier = false;
  t.accesses.clear();
  t.pendingAsync.clear();
  t.commits = 0;
  t.defaulted.clear();
  t.ctxs.assign(1, Ctx{});
  t.ctx = 0;
  t.mergedInstances = 0;
}

// The hazards of one walked trace.
void collectHazards(Tracer& t, HazardAnalysis& r, int traceIndex) {
  std::vector<std::vector<int>> pointEvents(r.points.size());
  for (int e = 0; e < (int)t.eventPoint.size(); ++e)
    if (t.eventPoint[e] >= 0) pointEvents[t.eventPoint[e]].push_back(e);

  auto addHazard = [&](Hazard::Kind kind, const DynAccess& p, const DynAccess& c) {
    Hazard h;
    h.kind = kind;
    h.crossThread = p.accp->mapping != c.accp->mapping;
    h.vmcnt = p.accp->write && p.accp->async == kir::AsyncKind::Vmcnt;
    h.async = (p.accp->write && p.accp->async == kir::AsyncKind::CpAsync) || h.vmcnt;
    if (!h.crossThread && !h.async) return;                 // same threads, synchronous: program order suffices
    if (t.exclusive(p.ctx, c.ctx, !h.crossThread)) return;  // never on one path
    h.producer = p.node;
    h.consumer = c.node;
    h.buffer = p.accp->buf->name;
    h.stage = p.stage;
    h.stageExpr = *p.stageText;
    h.producerIter = p.iter;
    h.consumerIter = c.iter;
    h.trace = traceIndex;
    h.consumerLoop = c.loop;
    int left = h.async ? p.commitEvent : p.event, right = c.event;
    h.latestInstance.assign(r.points.size(), -1);
    h.allowedWait.assign(r.points.size(), -1);
    h.earliestInstance.assign(r.points.size(), -1);
    for (size_t pt = 0; pt < r.points.size(); ++pt) {
      auto& ev = pointEvents[pt];
      for (auto e = std::upper_bound(ev.begin(), ev.end(), left); e != ev.end() && *e < right; ++e)
        if (t.onPathsOf(t.eventCtx[*e], p.ctx, c.ctx)) {
          h.earliestInstance[pt] = *e;
          break;
        }
      auto it = std::lower_bound(ev.begin(), ev.end(), right);  // first event >= right
      int inst = -1;
      while (it != ev.begin()) {  // the latest instance inside that lies on the interval's paths
        int e = *--it;
        if (e <= left) break;
        if (t.onPathsOf(t.eventCtx[e], p.ctx, c.ctx)) {
          inst = e;
          break;
        }
      }
      if (inst < 0) continue;
      h.latestInstance[pt] = inst;
      int newer = h.vmcnt ? t.vmAt[inst] - p.group : t.commitsAt[inst] - p.group;
      h.allowedWait[pt] = !h.async ? 1 << 20 : std::max(0, newer);
    }
    r.hazards.push_back(std::move(h));
  };

  // Hazards are found on byte ranges, not buffer names, so buffers that the smem planner made share
  // bytes (aliasing of dead buffers) conflict like one buffer does. Unplanned buffers get a range
  // of their own. A region keeps the writes and reads that may still be the latest on some path.
  struct Region {
    int64_t lo, hi;
    std::vector<int> writes, reads;
  };
  std::vector<Region> regions;
  std::map<const kir::Buffer*, int64_t> pseudo;
  auto rangeOf = [&](const DynAccess& a) {
    const kir::Buffer* b = a.accp->buf;
    int64_t per = std::max<int64_t>(1, b->bytesPerStage());
    int64_t base = b->offset;
    if (base < 0) {
      auto it = pseudo.find(b);
      if (it == pseudo.end()) it = pseudo.emplace(b, (int64_t(pseudo.size()) + 1) << 40).first;
      base = it->second;
    }
    return std::make_pair(base + a.stage * per, base + (a.stage + 1) * per);
  };
  auto& acc = t.accesses;
  auto subset = [&](int small, int big) { return t.onPathsOf(small, big, big); };
  for (int ai = 0; ai < (int)acc.size(); ++ai) {
    auto& a = acc[ai];
    auto [lo, hi] = rangeOf(a);
    bool exact = false;
    for (auto& g : regions) {
      if (g.hi <= lo || hi <= g.lo) continue;
      bool inside = lo <= g.lo && g.hi <= hi;
      exact |= g.lo == lo && g.hi == hi;
      if (!a.accp->write) {
        for (int w : g.writes) addHazard(Hazard::RAW, acc[w], a);
        if (g.lo == lo && g.hi == hi) g.reads.push_back(ai);
      } else {
        for (int rd : g.reads) addHazard(Hazard::WAR, acc[rd], a);
        for (int w : g.writes) {  // no read on every path between them orders the two writes
          bool readBetween = false;
          for (int rd : g.reads)
            readBetween |= acc[rd].event > acc[w].event && t.onPathsOf(acc[rd].ctx, acc[w].ctx, a.ctx);
          if (!readBetween) addHazard(Hazard::WAW, acc[w], a);
        }
        if (inside) {  // fully overwritten on every path through the older accesses: their history ends
          auto killed = [&](int o) { return subset(a.ctx, acc[o].ctx); };
          g.reads.erase(std::remove_if(g.reads.begin(), g.reads.end(), killed), g.reads.end());
          g.writes.erase(std::remove_if(g.writes.begin(), g.writes.end(), killed), g.writes.end());
          g.writes.push_back(ai);
        }
      }
    }
    if (!exact) {
      Region g{lo, hi, {}, {}};
      if (a.accp->write) g.writes.push_back(ai);
      else g.reads.push_back(ai);
      regions.push_back(g);
    }
  }
}

std::vector<int64_t> representativeTrips(const kir::Kernel& k, int stages) {
  int64_t minTrips = 1;
  for (auto& c : k.tripChecks) minTrips = std::max<int64_t>(minTrips, c.minTrips);
  std::vector<int64_t> trips;
  const int64_t top = stages > 1 ? stages + 1 : minTrips + 2;
  for (int64_t n = minTrips; n <= std::max(top, minTrips + 1); ++n) trips.push_back(n);
  trips.push_back(stages > 1 ? std::max<int64_t>(3 * stages + 1, trips.back() + 1) : trips.back() + 1);
  return trips;
}

// Walks every representative trace of `k`: each trip count, and per trip count every path through
// the enumerated conditions; `onTrace(tripIndex, pathIndex)` runs after each walk.
template <class F>
void forEachTrace(Tracer& t, kir::Kernel& k, const std::string& tripsVar, int64_t tileK,
                  const std::vector<int64_t>& trips, F onTrace) {
  auto walk = [&](int64_t n, bool count) {
    resetTrace(t);
    t.countExecutions = count;
    std::map<std::string, int64_t> env = {{tripsVar, n * tileK}};
    t.exec(k.body, env, nullptr);
    if (!t.pendingAsync.empty())
      fail<HeddleError>("hazard analysis: ", kir::describe(*t.accesses[t.pendingAsync[0]].node),
                        " is never committed to a cp.async group; every async copy must be followed by a commit");
  };
  // discovery: which unknown conditions are uniform and loop-invariant (enumerated, up to the cap)
  walk(trips.back(), false);
  for (auto& c : t.unknownUniform)
    if ((int)t.enumerable.size() < kMaxEnumerated) t.enumerable.insert(c);
  t.merged.clear();
  for (size_t tc = 0; tc < trips.size(); ++tc) {
    // depth-first over the outcomes of the enumerated conditions: each walk decides the conditions
    // it meets undecided as "then" and queues the paths that take "else" there instead
    std::vector<std::map<std::string, bool>> todo{{}};
    int paths = 0;
    while (!todo.empty()) {
      t.decide = todo.back();
      todo.pop_back();
      auto given = t.decide;
      walk(trips[tc], tc + 1 == trips.size() && paths == 0);
      for (size_t i = 0; i < t.defaulted.size(); ++i) {
        auto alt = given;
        for (size_t j = 0; j < i; ++j) alt[t.defaulted[j]] = true;
        alt[t.defaulted[i]] = false;
        todo.push_back(alt);
      }
      onTrace((int)tc, paths++);
    }
  }
}

}  // namespace

HazardAnalysis analyzeHazards(kir::Kernel& k, const PipelineLoop& loop) {
  HazardAnalysis r;
  Tracer t;
  t.points = &r.points;
  t.collect(k.body, "kernel body", 0, nullptr, "");
  r.tripCounts = representativeTrips(k, loop.stages);
  t.threads = std::max(1, k.launch.threads);
  int traceIndex = 0;
  forEachTrace(t, k, loop.tripsVar, loop.tileK, r.tripCounts, [&](int, int path) {
    collectHazards(t, r, traceIndex++);
    r.paths = std::max(r.paths, path + 1);
  });
  r.enumeratedBranches = (int)t.enumerable.size();
  r.mergedBranches = (int)t.merged.size();
  return r;
}

bool vmDrainedAtBarriers(kir::Kernel& k, const PipelineLoop& loop) {
  std::vector<ProgramPoint> points;
  Tracer t;
  t.points = &points;
  t.collect(k.body, "kernel body", 0, nullptr, "");
  t.threads = std::max(1, k.launch.threads);
  bool ok = true;
  forEachTrace(t, k, loop.tripsVar, loop.tileK, representativeTrips(k, loop.stages),
               [&](int, int) { ok &= !t.vmAtBarrier; });
  return ok;
}

std::string unorderedInterval(kir::Kernel& k, const PipelineLoop& loop) {
  HazardAnalysis ha = analyzeHazards(k, loop);
  auto syncAt = [&](int p) -> const kir::Sync* {
    auto& pt = ha.points[p];
    if (pt.index >= (int)pt.block->stmts.size() || pt.block->stmts[pt.index]->kind != kir::NodeKind::Sync)
      return nullptr;
    return static_cast<const kir::Sync*>(pt.block->stmts[pt.index].get());
  };
  std::map<std::pair<const kir::Block*, int>, int> pointAt;
  for (int p = 0; p < (int)ha.points.size(); ++p) pointAt[{ha.points[p].block, ha.points[p].index}] = p;
  std::vector<int> fullBarriers;
  std::vector<std::pair<int, int>> splits;  // (signal point, its wait's point)
  for (int p = 0; p < (int)ha.points.size(); ++p) {
    auto* s = syncAt(p);
    if (!s) continue;
    if (s->sync == kir::SyncKind::BlockSync) fullBarriers.push_back(p);
    if (s->sync != kir::SyncKind::BarrierSignal || s->arg != kir::kWorkgroupBarrier) continue;  // named: not here
    auto& stmts = ha.points[p].block->stmts;
    for (int j = ha.points[p].index + 1; j < (int)stmts.size(); ++j)
      if (stmts[j]->kind == kir::NodeKind::Sync &&
          static_cast<kir::Sync&>(*stmts[j]).sync == kir::SyncKind::BarrierWait &&
          static_cast<kir::Sync&>(*stmts[j]).arg == kir::kWorkgroupBarrier) {
        splits.push_back({p, pointAt.at({ha.points[p].block, j})});
        break;
      }
  }
  for (auto& h : ha.hazards) {
    if (!h.crossThread) continue;
    bool ordered = false;
    for (int p : fullBarriers) ordered |= h.latestInstance[p] >= 0;
    for (auto [s, w] : splits) ordered |= h.earliestInstance[s] >= 0 && h.latestInstance[w] > h.earliestInstance[s];
    if (!ordered)
      return std::string(hazardKindName(h.kind)) + " " + h.buffer + ": " + kir::describe(*h.producer) + "  ->  " +
             kir::describe(*h.consumer);
  }
  return "";
}

}  // namespace heddle::sync
