// Hazard analysis: symbolic execution of the kernel IR over representative trip counts, then
// RAW/WAR/WAW intervals between accesses of the same buffer stage. See hazards.h.
#include "heddle/lower/analysis/hazards.h"

#include <algorithm>
#include <map>

namespace heddle {

const char* hazardKindName(Hazard::Kind k) {
  switch (k) {
    case Hazard::RAW: return "RAW";
    case Hazard::WAR: return "WAR";
    case Hazard::WAW: return "WAW";
  }
  return "?";
}

namespace {

struct DynAccess {
  const kir::Node* node;
  kir::Access acc;
  int64_t stage;
  int64_t iter;
  int event;        // event index of the access
  int group = -1;   // commit group (1-based) for cp.async writes
  int commitEvent = -1;
  const kir::ForLoop* loop;
};

struct Tracer {
  std::map<std::pair<const kir::Block*, int>, int> pointId;
  std::vector<ProgramPoint>* points;
  // per trace
  std::vector<int> eventPoint;        // point id or -1 for an access event
  std::vector<int> commitsAt;         // commit count at each event
  std::vector<DynAccess> accesses;
  std::vector<int> pendingAsync;      // accesses waiting for their commit
  int commits = 0;
  // AMD: every LDS DMA instruction is its own vmcnt entry (no commit); vmAt[e] = ops issued so far
  std::vector<int> vmAt;
  int vmOps = 0, threads = 1;
  // a branch whose condition depends on the thread (or is unknown) is walked one way per trace:
  // elseWay picks the else side, so two traces cover both paths and the waits take their minimum
  bool elseWay = false, sawUnknownBranch = false;
  bool countExecutions = false;

  void collect(kir::Block& b, const std::string& where, int depth, const kir::ForLoop* loop) {
    for (int j = 0; j <= (int)b.stmts.size(); ++j) {
      ProgramPoint p;
      p.block = &b;
      p.index = j;
      p.loopDepth = depth;
      p.loop = loop;
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
        collect(f.body, std::string(kir::loopStageName(f.stage)) + " loop body", depth + 1, &f);
      } else if (s.kind == kir::NodeKind::If) {
        auto& i = static_cast<kir::IfThenElse&>(s);
        collect(i.thenBody, "if-branch", depth, loop);
        collect(i.elseBody, "else-branch", depth, loop);
      }
    }
  }

  void point(const kir::Block& b, int j) {
    int id = pointId.at({&b, j});
    eventPoint.push_back(id);
    commitsAt.push_back(commits);
    vmAt.push_back(vmOps);
    if (vmOps > 0) (*points)[id].vmIssuedBefore = true;
    if (countExecutions) (*points)[id].executions++;
  }

  void exec(const kir::Block& b, std::map<std::string, int64_t>& env, const kir::ForLoop* loop) {
    for (int j = 0; j < (int)b.stmts.size(); ++j) {
      point(b, j);
      auto& s = *b.stmts[j];
      switch (s.kind) {
        case kir::NodeKind::For: {
          auto& f = static_cast<const kir::ForLoop&>(s);
          int64_t lo = f.start.eval(env), hi = f.stop.eval(env);
          for (int64_t i = lo; i < hi; ++i) {
            env[f.var] = i;
            exec(f.body, env, &f);
          }
          env.erase(f.var);
          break;
        }
        case kir::NodeKind::If: {
          auto& c = static_cast<const kir::IfThenElse&>(s);
          bool taken = true;
          try {
            taken = c.cond.eval(env) != 0;
          } catch (const HeddleError&) {  // thread-dependent predicate: both sides may run
            taken = !elseWay;
            sawUnknownBranch = true;
          }
          exec(taken ? c.thenBody : c.elseBody, env, loop);
          break;
        }
        case kir::NodeKind::Sync: {
          auto& sy = static_cast<const kir::Sync&>(s);
          if (sy.sync == kir::SyncKind::CpAsyncCommit) {
            ++commits;
            for (int a : pendingAsync) {
              accesses[a].group = commits;
              accesses[a].commitEvent = (int)eventPoint.size() - 1;  // the point event before the commit
            }
            pendingAsync.clear();
          }
          break;
        }
        default:
          for (auto& acc : kir::accessesOf(s)) {
            DynAccess d{&s, acc, acc.stage.eval(env), -1, (int)eventPoint.size(), -1, -1, loop};
            if (s.kind == kir::NodeKind::TileLoad) d.iter = static_cast<const kir::TileLoad&>(s).iter.eval(env);
            if (s.kind == kir::NodeKind::MmaStep) d.iter = static_cast<const kir::MmaStep&>(s).iter.eval(env);
            if (s.kind == kir::NodeKind::SmemAccess) d.iter = static_cast<const kir::SmemAccess&>(s).iter.eval(env);
            eventPoint.push_back(-1);
            if (acc.write && acc.async == kir::AsyncKind::Vmcnt) {  // its own counter entry, from its issue
              vmOps += kir::vmemOpsPerThread(s, threads);
              d.group = vmOps;
              d.commitEvent = (int)eventPoint.size() - 1;
            }
            commitsAt.push_back(commits);
            vmAt.push_back(vmOps);
            if (acc.write && acc.async == kir::AsyncKind::CpAsync) pendingAsync.push_back((int)accesses.size());
            accesses.push_back(d);
          }
      }
    }
    point(b, (int)b.stmts.size());
  }
};

}  // namespace

HazardAnalysis analyzeHazards(kir::Kernel& k, const std::string& tripsVar, int64_t tileK, int minTrips, int stages) {
  HazardAnalysis r;
  Tracer t;
  t.points = &r.points;
  t.collect(k.body, "kernel body", 0, nullptr);
  if (stages > 1) r.tripCounts = {stages, stages + 1, 3 * stages + 1};
  else r.tripCounts = {std::max(1, minTrips), std::max(1, minTrips) + 1, std::max(1, minTrips) + 3};

  t.threads = std::max(1, k.launch.threads);
  for (size_t ti = 0; ti < 2 * r.tripCounts.size(); ++ti) {
    const size_t tc = ti / 2;
    const bool elseWay = ti % 2;
    if (elseWay && !t.sawUnknownBranch) continue;  // the other side of unknown branches, when there were any
    t.elseWay = elseWay;
    t.sawUnknownBranch = false;
    t.eventPoint.clear();
    t.commitsAt.clear();
    t.vmAt.clear();
    t.vmOps = 0;
    t.accesses.clear();
    t.pendingAsync.clear();
    t.commits = 0;
    t.countExecutions = tc + 1 == r.tripCounts.size() && !elseWay;
    std::map<std::string, int64_t> env = {{tripsVar, r.tripCounts[tc] * tileK}};
    t.exec(k.body, env, nullptr);
    if (!t.pendingAsync.empty())
      fail<HeddleError>("hazard analysis: ", kir::describe(*t.accesses[t.pendingAsync[0]].node),
                        " is never committed to a cp.async group; every async copy must be followed by a commit");

    // per point: its event indices, in order
    std::vector<std::vector<int>> pointEvents(r.points.size());
    for (int e = 0; e < (int)t.eventPoint.size(); ++e)
      if (t.eventPoint[e] >= 0) pointEvents[t.eventPoint[e]].push_back(e);

    auto addHazard = [&](Hazard::Kind kind, const DynAccess& p, const DynAccess& c) {
      Hazard h;
      h.kind = kind;
      h.crossThread = p.acc.mapping != c.acc.mapping;
      h.vmcnt = p.acc.write && p.acc.async == kir::AsyncKind::Vmcnt;
      h.async = (p.acc.write && p.acc.async == kir::AsyncKind::CpAsync) || h.vmcnt;
      if (!h.crossThread && !h.async) return;  // same threads, synchronous: program order suffices
      h.producer = p.node;
      h.consumer = c.node;
      h.buffer = p.acc.buf->name;
      h.stage = p.stage;
      h.stageExpr = p.acc.stage.str();
      h.producerIter = p.iter;
      h.consumerIter = c.iter;
      h.trace = (int)ti;
      h.consumerLoop = c.loop;
      int left = h.async ? p.commitEvent : p.event, right = c.event;
      h.latestInstance.assign(r.points.size(), -1);
      h.allowedWait.assign(r.points.size(), -1);
      for (size_t pt = 0; pt < r.points.size(); ++pt) {
        auto& ev = pointEvents[pt];
        auto it = std::lower_bound(ev.begin(), ev.end(), right);  // first event >= right
        if (it == ev.begin()) continue;
        int inst = *(it - 1);
        if (inst <= left) continue;
        h.latestInstance[pt] = inst;
        h.allowedWait[pt] = !h.async ? 1 << 20 : h.vmcnt ? t.vmAt[inst] - p.group : t.commitsAt[inst] - p.group;
      }
      r.hazards.push_back(std::move(h));
    };

    // Hazards are found on byte ranges, not buffer names, so buffers that the smem planner made share
    // bytes (aliasing of dead buffers) conflict like one buffer does. Unplanned buffers get a range
    // of their own.
    struct Region {
      int64_t lo, hi;
      int lastWrite = -1;
      std::vector<int> reads;
    };
    std::vector<Region> regions;
    std::map<const kir::Buffer*, int64_t> pseudo;
    auto rangeOf = [&](const DynAccess& a) {
      const kir::Buffer* b = a.acc.buf;
      int64_t per = std::max<int64_t>(1, b->bytesPerStage());
      int64_t base = b->offset;
      if (base < 0) {
        auto it = pseudo.find(b);
        if (it == pseudo.end()) it = pseudo.emplace(b, (int64_t(pseudo.size()) + 1) << 40).first;
        base = it->second;
      }
      return std::make_pair(base + a.stage * per, base + (a.stage + 1) * per);
    };
    for (int ai = 0; ai < (int)t.accesses.size(); ++ai) {
      auto& a = t.accesses[ai];
      auto [lo, hi] = rangeOf(a);
      bool exact = false;
      for (auto& g : regions) {
        if (g.hi <= lo || hi <= g.lo) continue;
        bool inside = lo <= g.lo && g.hi <= hi;
        exact |= g.lo == lo && g.hi == hi;
        if (!a.acc.write) {
          if (g.lastWrite >= 0) addHazard(Hazard::RAW, t.accesses[g.lastWrite], a);
          if (g.lo == lo && g.hi == hi) g.reads.push_back(ai);
        } else {
          for (int rd : g.reads) addHazard(Hazard::WAR, t.accesses[rd], a);
          if (g.reads.empty() && g.lastWrite >= 0) addHazard(Hazard::WAW, t.accesses[g.lastWrite], a);
          if (inside) {  // fully overwritten: its history ends here
            g.reads.clear();
            g.lastWrite = ai;
          }
        }
      }
      if (!exact) {
        Region g{lo, hi};
        if (a.acc.write) g.lastWrite = ai;
        else g.reads.push_back(ai);
        regions.push_back(g);
      }
    }
  }
  return r;
}

}  // namespace heddle
