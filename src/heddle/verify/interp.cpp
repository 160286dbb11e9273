// The per-thread interpreter: an explicit stack of (block, next statement, loop) frames, so that a
// thread can be suspended after any statement and the scheduler can interleave threads freely.
// One step = one statement (a leaf op, a sync op, entering a loop or branch) or one loop back-edge.
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

void Cta::step(Thread& t) {
  ++t.pos;
  curRank = t.rank;  // cellOf / mbarId address this thread's CTA
  if (t.stack.empty()) {
    t.status = Status::Done;
    threadExited(t);
    return;
  }
  Frame& f = t.stack.back();
  if (f.idx >= f.blk->stmts.size()) {
    if (f.loop) {
      int64_t v = ++t.env[f.loop->var];
      if (v < f.stop) {
        f.idx = 0;
        return;
      }
      if (f.hadOld) t.env[f.loop->var] = f.old;
      else t.env.erase(f.loop->var);
    }
    t.stack.pop_back();
    if (t.stack.empty()) {
      t.status = Status::Done;
      threadExited(t);
    }
    return;
  }
  const kir::Node& n = *f.blk->stmts[f.idx++];
  switch (n.kind) {
    case kir::NodeKind::For: {
      auto& l = static_cast<const kir::ForLoop&>(n);
      int64_t lo = l.start.eval(t.env), hi = l.stop.eval(t.env);
      if (lo >= hi) return;
      auto it = t.env.find(l.var);
      Frame nf{&l.body, 0, &l, hi, it != t.env.end(), it != t.env.end() ? it->second : 0};
      t.env[l.var] = lo;
      t.stack.push_back(nf);  // invalidates f
      return;
    }
    case kir::NodeKind::If: {
      auto& c = static_cast<const kir::IfThenElse&>(n);
      divergent |= c.cond.usesThread();
      const kir::Block* b = c.cond.eval(t.env) ? &c.thenBody : &c.elseBody;
      if (!b->stmts.empty()) t.stack.push_back(Frame{b, 0, nullptr, 0, false, 0});
      return;
    }
    case kir::NodeKind::Block: {
      auto& b = static_cast<const kir::Block&>(n);
      if (!b.stmts.empty()) t.stack.push_back(Frame{&b, 0, nullptr, 0, false, 0});
      return;
    }
    case kir::NodeKind::Sync: execSync(t, static_cast<const kir::Sync&>(n)); return;
    default: execLeaf(t, n); return;
  }
}

std::string Cta::where(const Thread& t) const {
  std::ostringstream os;
  bool first = true;
  for (auto& f : t.stack) {
    if (!f.loop) continue;
    auto it = t.env.find(f.loop->var);
    os << (first ? "" : ", ") << kir::loopStageName(f.loop->stage) << " loop " << f.loop->var << "="
       << (it == t.env.end() ? -1 : it->second);
    first = false;
  }
  return first ? "outside loops" : os.str();
}

}  // namespace heddle::verify
