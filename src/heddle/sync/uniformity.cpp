// The uniformity check (sync/plan.h; run by the check_uniformity pass, lower/passes/check_uniformity.cpp):
// every collective op sits in control flow uniform over the threads that execute it together.
//
// What each op needs (threads that must execute it together):
//   block_sync, s_barrier_signal / _wait -1        the block (AMD: a wavefront, see waveBarriers)
//   AMD named-barrier ops (s_barrier_init / join / leave, s_barrier_signal / _isfirst / _wait id >= 0):
//                                                    a wavefront (scalar instructions: wave-uniform
//                                                    control flow; which waves take part is the
//                                                    barrier's expected count, checked by the simulator)
//   wgmma.fence / commit / wait, setmaxnreg, wgmma   a warpgroup (128 aligned threads)
//   bar.sync id, count; mma.sync / MFMA; elect       a warp (TargetInfo::warpSize threads: 64 on CDNA)
//   mbarrier ops, cp.async, waits of one thread      one thread
// A condition's granularity is found by evaluating it for every thread (tid, warp, lane; values the
// kernel computes from them are substituted) at sample values of its other variables, which are
// uniform: the largest of {block, 128, warp} over whose aligned chunks it never varies, else 1. Loops
// with thread-dependent bounds count like a branch; a loop or branch with no collective op inside is
// not evaluated (nothing in it can be refused), nor is a condition whose let chain names no thread.
// The hazard planner places only uniform barriers on its own (hazards.h); this check covers the ops
// the Hopper passes place by construction and everything the lowering emitted, so a role branch that
// splits a warpgroup or a block barrier inside a role fails here, at lowering, not as a hang on the GPU.
#include <sstream>

#include "heddle/sync/plan.h"

namespace heddle::sync {

namespace {

using kir::IExpr;

struct Checker {
  int T;
  int W;  // threads per warp / wavefront (TargetInfo::warpSize)
  // AMD: s_barrier and the split barrier -1 are scalar instructions, convergent within a wave: they
  // need wave-uniform control flow (LLVM AMDGPUExecutionSynchronization). A wave that skips one and
  // ends drops the barrier (the simulator runs that); one that skips it and goes on is a deadlock
  // the simulator reports. CUDA's bar.sync 0 needs the block.
  bool waveBarriers = false;
  std::map<std::string, IExpr> lets;  // values computed in the kernel (substituted before evaluation)
  // enclosing conditions (the kernel IR's own, by address; and whether negated): who gets here
  std::vector<std::pair<const IExpr*, bool>> guards;
  // expand() of the kernel IR's expressions under the current `lets`, by address: every condition
  // nested in a branch expands that branch's guard again, and a let chain is rebuilt round by round
  // each time. A let changes what expand() gives, so each one clears it.
  std::map<const IExpr*, IExpr> expanded;

  const IExpr& expandOnce(const IExpr& e) {
    auto it = expanded.find(&e);
    return it != expanded.end() ? it->second : expanded.emplace(&e, expand(e)).first->second;
  }

  IExpr expand(IExpr e) const {
    for (int i = 0; i < 8; ++i) {
      std::set<std::string> vs;
      e.collectVars(vs);
      std::map<std::string, IExpr> sub;
      for (auto& v : vs)
        if (lets.count(v)) sub.emplace(v, lets.at(v));
      if (sub.empty()) break;
      e = e.substitute(sub);
    }
    return e;
  }

  // Largest of {T, 128, W, 1} over whose aligned thread chunks `e` never changes, among the threads
  // the enclosing conditions let through. The condition and the guards are evaluated for every
  // thread at each sample, flattened once (IExpr::Program: slots, no exceptions): a thread whose
  // guard or value cannot be evaluated (a divisor sampled as 0) counts as not here.
  // Whether expand(e) can name a thread built-in, from expand()'s rounds run on variable sets rather
  // than trees: substitution maps a tree's variables exactly so and simplification only drops some, so
  // the set holds every variable of the expansion and `false` is exact. A loop bound or condition in
  // a long let chain (stream-K's tile range) is thread-independent, and its expansion is not built.
  bool mayUseThread(const IExpr& e) const {
    std::set<std::string> vs;
    e.collectVars(vs);
    for (int i = 0; i < 8; ++i) {
      std::set<std::string> next;
      bool substituted = false;
      for (auto& v : vs) {
        auto it = lets.find(v);
        if (it == lets.end()) {
          next.insert(v);
          continue;
        }
        substituted = true;
        it->second.collectVars(next);
      }
      if (!substituted) break;
      vs.swap(next);
    }
    for (auto& v : vs)
      if (kir::isThreadBuiltin(v)) return true;
    return false;
  }

  int granularity(const IExpr& raw) {
    if (!mayUseThread(raw)) return T;
    const IExpr& e = expandOnce(raw);
    if (!e.usesThread()) return T;
    std::set<std::string> vs;
    e.collectVars(vs);
    std::vector<const IExpr*> gs;
    for (auto& [g, neg] : guards) gs.push_back(&expandOnce(*g)), gs.back()->collectVars(vs);
    std::vector<std::string> slots = {"tid", "warp", "lane"};
    const size_t nThread = slots.size();
    for (auto& v : vs)
      if (!kir::isThreadBuiltin(v)) slots.push_back(v);
    const size_t nOthers = slots.size() - nThread;
    const IExpr::Program pe = e.compile(slots);
    std::vector<IExpr::Program> pg;
    for (auto* g : gs) pg.push_back(g->compile(slots));
    static const int64_t kSamples[] = {0, 1, 2, 5, 64, 1000};
    constexpr int64_t kOff = INT64_MIN;  // thread not here
    const int combos = nOthers == 0 ? 1 : 12;
    std::vector<std::vector<int64_t>> values(T, std::vector<int64_t>(combos, kOff));
    std::vector<int64_t> env(slots.size(), 0);
    // naming the warp alone (role conditions such as warp < 4), the condition and the guards read no
    // input that differs inside a warp: each warp's first thread stands for the others
    const bool perWarp = !vs.count("tid") && !vs.count("lane");
    for (int c = 0; c < combos; ++c) {
      for (size_t i = 0; i < nOthers; ++i) env[nThread + i] = kSamples[(c + i * 3 + (c / 6) * i) % 6];
      for (int t = 0; t < T; ++t) {
        if (perWarp && t % W) {
          values[t][c] = values[t - t % W][c];
          continue;
        }
        env[0] = t, env[1] = t / W, env[2] = t % W;
        bool here = true;
        for (size_t j = 0; j < pg.size() && here; ++j) {
          int64_t gv;
          here = pg[j].run(env.data(), gv) && (gv != 0) != guards[j].second;
        }
        int64_t v;
        if (here && pe.run(env.data(), v)) values[t][c] = v;
      }
    }
    for (int g : {T, 128, W}) {
      if (g > T || T % g) continue;
      bool same = true;
      for (int c = 0; c < combos && same; ++c)
        for (int c0 = 0; c0 < T && same; c0 += g) {
          int64_t v = kOff;
          for (int t = c0; t < c0 + g && same; ++t) {
            if (values[t][c] == kOff) continue;
            if (v == kOff) v = values[t][c];
            same = values[t][c] == v;
          }
        }
      if (same) return g;
    }
    return 1;
  }

  static std::string scopeName(int g, int T) {
    return g >= T ? "the whole block" : g == 128 ? "a warpgroup (128 threads)" : g > 1 ? "a warp" : "one thread";
  }

  int needs(const kir::Node& n) const {
    if (n.kind == kir::NodeKind::MmaStep) {  // tcgen05.mma: issued by one thread
      auto& m = static_cast<const kir::MmaStep&>(n);
      return m.kind == MmaKind::Tcgen05 ? 1 : m.kind == MmaKind::Wgmma ? 128 : W;
    }
    if (n.kind == kir::NodeKind::If) return static_cast<const kir::IfThenElse&>(n).electWarp >= 0 ? W : 1;
    if (n.kind != kir::NodeKind::Sync) return 1;
    auto& sy = static_cast<const kir::Sync&>(n);
    switch (sy.sync) {
      case kir::SyncKind::BlockSync: return waveBarriers ? W : T;
      case kir::SyncKind::ClusterSync: return T;  // barrier.cluster.*.aligned: every thread of the CTA
      case kir::SyncKind::BarrierSignal:
      case kir::SyncKind::BarrierWait: return sy.arg == kir::kWorkgroupBarrier && !waveBarriers ? T : W;
      case kir::SyncKind::BarrierInit:
      case kir::SyncKind::BarrierJoin:
      case kir::SyncKind::BarrierLeave:
      case kir::SyncKind::BarrierSignalIsFirst: return W;
      case kir::SyncKind::WgmmaFence:
      case kir::SyncKind::WgmmaCommit:
      case kir::SyncKind::WgmmaWait:
      case kir::SyncKind::SetMaxNReg: return std::min(T, 128);
      case kir::SyncKind::NamedBarrier:
      case kir::SyncKind::TmemAlloc:  // tcgen05.alloc / relinquish / dealloc: .sync.aligned, a whole warp
      case kir::SyncKind::TmemRelinquish:
      case kir::SyncKind::TmemDealloc: return W;
      default: return 1;
    }
  }

  // The widest scope any op in b (nested loops and branches included) needs: a loop or branch
  // whose body needs one thread at most cannot be refused, so its condition is not evaluated.
  // Memoized per block: the walk stays linear in the kernel's size.
  std::map<const kir::Block*, int> maxNeedOf;
  int maxNeed(const kir::Block& b) {
    auto it = maxNeedOf.find(&b);
    if (it != maxNeedOf.end()) return it->second;
    int m = 1;
    for (auto& sp : b.stmts) {
      m = std::max(m, std::min(needs(*sp), T));
      if (sp->kind == kir::NodeKind::For) m = std::max(m, maxNeed(static_cast<const kir::ForLoop&>(*sp).body));
      if (sp->kind == kir::NodeKind::If) {
        auto& c = static_cast<const kir::IfThenElse&>(*sp);
        m = std::max({m, maxNeed(c.thenBody), maxNeed(c.elseBody)});
      }
    }
    return maxNeedOf[&b] = m;
  }

  // `g`: the granularity of the control flow around b; `where`: its innermost narrowing construct
  void walk(const kir::Block& b, int g, const std::string& where) {
    for (auto& sp : b.stmts) {
      auto& n = *sp;
      const int need = std::min(needs(n), T);
      if (need > g)
        fail<HeddleError>("check_uniformity: '", kir::describe(n), "' must be executed by ", scopeName(need, T),
                          " together, but it sits inside ", where, ", which differs between threads of ",
                          scopeName(need, T),
                          " (some would skip it: a hang or undefined result on the GPU). Keep the condition "
                          "uniform over ",
                          scopeName(need, T), " or move the op out of the branch");
      switch (n.kind) {
        case kir::NodeKind::For: {
          auto& f = static_cast<const kir::ForLoop&>(n);
          int lg = maxNeed(f.body) > 1 ? std::min(granularity(f.start), granularity(f.stop)) : g;
          bool narrower = lg < g;
          walk(f.body, std::min(g, lg),
               narrower ? "for " + f.var + " in [" + f.start.str() + ", " + f.stop.str() + ")" : where);
          break;
        }
        case kir::NodeKind::If: {
          auto& c = static_cast<const kir::IfThenElse&>(n);
          // an elected issue: a warp-uniform test, then one lane of that warp
          const bool matters = std::max(maxNeed(c.thenBody), maxNeed(c.elseBody)) > 1;
          int cg = c.electWarp >= 0 ? 1 : matters ? granularity(c.cond) : g;
          std::string w = cg < g ? "if (" + c.cond.str() + ")" : where;
          guards.push_back({&c.cond, false});
          walk(c.thenBody, std::min(g, cg), w);
          guards.back().second = true;
          walk(c.elseBody, std::min(g, cg), cg < g ? "the else branch of if (" + c.cond.str() + ")" : where);
          guards.pop_back();
          break;
        }
        case kir::NodeKind::Let: {
          auto& l = static_cast<const kir::Let&>(n);
          lets[l.var] = l.value;
          expanded.clear();
          break;
        }
        default: break;
      }
    }
  }
};

}  // namespace

void checkUniformity(const kir::Kernel& k, const TargetInfo& target) {
  Checker ch{std::max(1, k.launch.threads), std::max(1, target.warpSize), target.waveBarrier, {}, {}, {}};
  ch.walk(k.body, ch.T, "the kernel body");
}

}  // namespace heddle::sync
