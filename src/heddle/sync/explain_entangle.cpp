// Warp entanglement notes for explain(): a cp.async commit in control flow that diverges within a warp.
//
// CUDA C++ Programming Guide, "Asynchronous Data Copies" / "Warp Entanglement" (commit, wait, arrive-on;
// "Keep Commit and Arrive-On Operations Converged"): the asynchronous-copy batches of a warp form one
// warp-shared sequence; the commits of the warp's converged threads are coalesced into one step of it,
// while threads that diverged commit one step each (a fully diverged warp advances it 32 times). A later
// wait_group(N) then counts the extra batches and waits for more copies than the schedule meant
// (over-waiting), and the divergent paths issue their copies and commits one after another. The same
// holds for an arrive-on (cp.async.mbarrier.arrive): diverged threads update the barrier once each. PTX
// ISA (cp.async.commit_group, cp.async.wait_group): commit and wait are per thread, so this costs
// throughput, never correctness -- a note, not an error. The kernel IR has no arrive-on op (heddle's
// cp.async completes through commit / wait groups), so commits are what this walk names.
//
// A condition (or a loop bound) diverges within a warp when two lanes of one warp (32 threads: cp.async
// is a CUDA instruction) evaluate it differently for some sample of the kernel's other, uniform values;
// values the kernel computes with `Let` are substituted first.
#include <set>
#include <sstream>

#include "heddle/sync/explain.h"

namespace heddle::sync {

namespace {

constexpr int kWarp = 32;

struct Walk {
  const kir::Kernel& k;
  std::map<std::string, kir::IExpr> lets;
  std::vector<std::pair<kir::IExpr, std::string>> enclosing;  // conditions / loop bounds, and how to name them
  std::ostringstream os;
  int notes = 0, commits = 0;

  kir::IExpr expand(kir::IExpr e) const {
    for (int i = 0; i < 8; ++i) {
      std::set<std::string> vs;
      e.collectVars(vs);
      std::map<std::string, kir::IExpr> sub;
      for (auto& v : vs)
        if (lets.count(v)) sub.emplace(v, lets.at(v));
      if (sub.empty()) break;
      e = e.substitute(sub);
    }
    return e;
  }

  // the first warp two of whose lanes see different values of `raw`, or -1
  int splitWarp(const kir::IExpr& raw) const {
    const kir::IExpr e = expand(raw);
    if (!e.usesThread()) return -1;
    std::set<std::string> vs;
    e.collectVars(vs);
    static const int64_t kSamples[] = {0, 1, 2, 5, 64, 1000};
    for (int c = 0; c < 6; ++c) {
      std::map<std::string, int64_t> env;
      int i = 0;
      for (auto& v : vs)
        if (!kir::isThreadBuiltin(v)) env[v] = kSamples[(c + 2 * i++) % 6];
      for (int w = 0; w * kWarp < k.launch.threads; ++w) {
        int64_t first = 0;
        for (int l = 0; l < kWarp && w * kWarp + l < k.launch.threads; ++l) {
          env["tid"] = w * kWarp + l, env["warp"] = w, env["lane"] = l;
          int64_t v = 0;
          try {
            v = e.eval(env);
          } catch (const std::exception&) {
            return -1;  // not evaluable here (a division by a zero sample): no claim
          }
          if (l == 0) first = v;
          else if (v != first) return w;
        }
      }
    }
    return -1;
  }

  void note(const kir::Sync& s) {
    ++commits;
    for (auto& [cond, name] : enclosing) {
      const int w = splitWarp(cond);
      if (w < 0) continue;
      os << "[entanglement " << notes++ << "] " << kir::describe(s) << " (node " << s.id << ") sits under " << name
         << ", which diverges within a warp (warp " << w << "'s lanes take both sides).\n"
         << "    cost:      a warp's async-copy batches are one warp-shared sequence: converged threads commit one "
            "batch together, diverged threads one each (up to 32 per warp), so a later cp.async.wait_group waits "
            "for more copies than planned and the divergent paths issue their copies and commits one after "
            "another (CUDA C++ Programming Guide, \"Warp Entanglement\"); throughput only, not correctness.\n"
         << "    change:    commit where the whole warp is converged (move the commit out of the branch: an empty "
            "group is legal) and predicate only the copies, or make the condition warp-uniform (whole warps "
            "take one side).\n";
      return;
    }
  }

  void walk(const kir::Block& b) {
    for (auto& np : b.stmts) {
      const kir::Node& n = *np;
      if (n.kind == kir::NodeKind::Let) {
        auto& l = static_cast<const kir::Let&>(n);
        lets[l.var] = l.value;
      } else if (n.kind == kir::NodeKind::For) {
        auto& f = static_cast<const kir::ForLoop&>(n);
        enclosing.push_back({f.start, "the loop start '" + f.var + " = " + f.start.str() + "'"});
        enclosing.push_back({f.stop, "the loop bound '" + f.var + " < " + f.stop.str() + "'"});
        walk(f.body);
        enclosing.resize(enclosing.size() - 2);
      } else if (n.kind == kir::NodeKind::If) {
        auto& c = static_cast<const kir::IfThenElse&>(n);
        enclosing.push_back({c.cond, "'if (" + c.cond.str() + ")'"});  // (an elected issue: tid == 32 * w)
        walk(c.thenBody);
        enclosing.back().second = "the else of 'if (" + c.cond.str() + ")'";
        walk(c.elseBody);
        enclosing.pop_back();
      } else if (n.kind == kir::NodeKind::Sync &&
                 static_cast<const kir::Sync&>(n).sync == kir::SyncKind::CpAsyncCommit) {
        note(static_cast<const kir::Sync&>(n));
      }
    }
  }
};

}  // namespace

std::string explainEntanglement(const kir::Kernel& k) {
  Walk w{k, {}, {}, {}, 0, 0};
  w.walk(k.body);
  if (w.commits && !w.notes)
    w.os << "warp entanglement: all " << w.commits
         << " cp.async.commit_group op(s) sit in warp-converged control flow\n";
  return w.os.str();
}

}  // namespace heddle::sync
