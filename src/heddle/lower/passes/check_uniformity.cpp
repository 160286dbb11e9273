// check_uniformity: every collective op sits in control flow uniform over the threads that execute it
// together. Changes nothing; refuses the kernel naming the branch otherwise.
//
// Before == after. The kernel IR as every earlier pass left it, e.g. a warp-specialized sm_90a kernel:
//   if (warp >= 4) {                          # 128-thread aligned: uniform per warpgroup
//     for tl ... { wgmma.fence; mma (wgmma); wgmma.commit_group; wgmma.wait_group(1); ... }
//   } else if (warp == 0 && elect.sync) {     # warp-uniform test, then one elected lane
//     mbarrier.arrive.expect_tx ...; tma ...
//   }
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
// with thread-dependent bounds count like a branch. The insert_syncs planner places only uniform
// barriers on its own (hazards.h); this pass checks the ops the Hopper passes place by
// construction and everything the lowering emitted, so a role branch that splits a warpgroup or a
// block barrier inside a role fails here, at lowering, not as a hang on the GPU.
#include <sstream>

#include "heddle/lower/lower.h"

namespace heddle::passes {

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
  std::vector<std::pair<IExpr, bool>> guards;  // enclosing conditions (and whether negated): who gets here

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
  // the enclosing conditions let through.
  int granularity(const IExpr& raw) const {
    IExpr e = expand(raw);
    if (!e.usesThread()) return T;
    std::set<std::string> vs;
    e.collectVars(vs);
    std::vector<IExpr> gs;
    for (auto& [g, neg] : guards) gs.push_back(expand(g)), gs.back().collectVars(vs);
    std::vector<std::string> others;
    for (auto& v : vs)
      if (!kir::isThreadBuiltin(v)) others.push_back(v);
    static const int64_t kSamples[] = {0, 1, 2, 5, 64, 1000};
    constexpr int64_t kOff = INT64_MIN;  // thread not here
    const int combos = others.empty() ? 1 : 12;
    std::vector<std::vector<int64_t>> values(T, std::vector<int64_t>(combos, kOff));
    for (int c = 0; c < combos; ++c) {
      std::map<std::string, int64_t> env;
      for (size_t i = 0; i < others.size(); ++i) env[others[i]] = kSamples[(c + i * 3 + (c / 6) * i) % 6];
      for (int t = 0; t < T; ++t) {
        env["tid"] = t, env["warp"] = t / W, env["lane"] = t % W;
        try {
          bool here = true;
          for (size_t j = 0; j < gs.size() && here; ++j) here = (gs[j].eval(env) != 0) != guards[j].second;
          if (here) values[t][c] = e.eval(env);
        } catch (const HeddleError&) {
        }
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
      return m.tcgen05 ? 1 : m.wgmma ? 128 : W;
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
      case kir::SyncKind::TmemAlloc:       // tcgen05.alloc / relinquish / dealloc: .sync.aligned, a whole warp
      case kir::SyncKind::TmemRelinquish:
      case kir::SyncKind::TmemDealloc: return W;
      default: return 1;
    }
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
                          "uniform over ", scopeName(need, T), " or move the op out of the branch");
      switch (n.kind) {
        case kir::NodeKind::For: {
          auto& f = static_cast<const kir::ForLoop&>(n);
          int lg = std::min(granularity(f.start), granularity(f.stop));
          bool narrower = lg < g;
          walk(f.body, std::min(g, lg), narrower ? "for " + f.var + " in [" + f.start.str() + ", " + f.stop.str() + ")" : where);
          break;
        }
        case kir::NodeKind::If: {
          auto& c = static_cast<const kir::IfThenElse&>(n);
          // an elected issue: a warp-uniform test, then one lane of that warp
          int cg = c.electWarp >= 0 ? 1 : granularity(c.cond);
          std::string w = cg < g ? "if (" + c.cond.str() + ")" : where;
          guards.push_back({c.cond, false});
          walk(c.thenBody, std::min(g, cg), w);
          guards.back().second = true;
          walk(c.elseBody, std::min(g, cg), cg < g ? "the else branch of if (" + c.cond.str() + ")" : where);
          guards.pop_back();
          break;
        }
        case kir::NodeKind::Let: {
          auto& l = static_cast<const kir::Let&>(n);
          lets[l.var] = l.value;
          break;
        }
        default: break;
      }
    }
  }
};

}  // namespace

void checkUniformity(LowerContext& c) {
  Checker ch{std::max(1, c.kernel.launch.threads), std::max(1, c.target.warpSize), c.target.waveBarrier,
             {}, {}};
  ch.walk(c.kernel.body, ch.T, "the kernel body");
}

}  // namespace heddle::passes
