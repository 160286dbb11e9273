// named_barrier_roles: a producer/consumer split of waves synchronised on GFX12.5 named barriers, the
// AMD counterpart of warp specialization (docs/backends.md, "Barrier objects"). Not in the matmul pass
// list (heddle has no gfx1250 matmul path); sync_lab(roles=True) runs it on hand-built role programs.
//
// Before (a role split over whole waves, no syncs; S stages, stage expression i % S):
//   if (warp < 2) { for i in [0, N) { write X[i % S] (copy) } }
//   else          { for i in [0, N) { read X[i % S] (mma) } }
// After (full[s] = barrier 1 + s, empty[s] = barrier 1 + S + s; every wave arrives on both per phase):
//   if (warp == 0) { s_barrier_init 1, 4 wave(s); ... s_barrier_init 2S, 4 wave(s) }
//   s_barrier_signal; s_barrier_wait                    # every init before every other use
//   if (warp < 2) { for i { if (i % S == 0) {           # ids are immediates: one copy per stage
//       if (S <= i) { s_barrier_join 1+S; s_barrier_signal 1+S; s_barrier_wait 1+S }  # stage freed
//       write X[i % S]; s_barrier_signal 1 }            # stage filled
//     else if ... } }
//   else { for i { if (i % S == 0) {
//       s_barrier_join 1; s_barrier_signal 1; s_barrier_wait 1; read X[i % S]
//       if (i + S < N) { s_barrier_signal 1+S } }       # the producers wait for this one
//     else if ... } }
// A wave joins the barrier it is about to wait on (s_barrier_wait waits on the barrier joined last).
// Phase n of full[s] is k-tile s + nS: the producers arrive after writing it, the consumers before
// reading it; phase n of empty[s]: the consumers arrive after reading k-tile s + nS, the producers
// before overwriting the stage with k-tile s + (n+1)S. The simulator checks the protocol
// (verify/barrier_objects.cpp) with every mutant flagged (tests/sync/test_barrier_objects.py).
#include "heddle/lower/lower.h"
#include "heddle/sync/plan.h"
#include "heddle/sync/ring.h"

namespace heddle::passes {

namespace {

// Every op carries its reason into the SyncPlan (builder "split / named barrier objects"; the pass is
// stamped "named_barrier_roles" at the end), so explain() names who placed it.
kir::NodePtr barrierOp(kir::Kernel& k, kir::SyncKind kind, int id, const sync::Why& why, int count = 0) {
  auto s = sync::makeSync(k, kind, why, id);
  s->count = count;
  return s;
}

// join, arrive, wait: the wave waits for the barrier's current phase (s_barrier_wait waits on the
// barrier joined last)
void addJoinArriveWait(kir::Kernel& k, kir::Block& b, int id, const sync::Why& why) {
  b.stmts.push_back(barrierOp(k, kir::SyncKind::BarrierJoin, id, why));
  b.stmts.push_back(barrierOp(k, kir::SyncKind::BarrierSignal, id, why));
  b.stmts.push_back(barrierOp(k, kir::SyncKind::BarrierWait, id, why));
}

// One copy of `body` per stage s, each under `if (i % S == s)`, built by `wrap(s, copy)`.
void perStage(kir::ForLoop& f, int S, const std::function<void(int, kir::Block&, kir::Block&)>& wrap) {
  kir::Block body;
  body.stmts = std::move(f.body.stmts);
  kir::Block* into = &f.body;
  for (int s = 0; s < S; ++s) {
    kir::Block* dst = into;
    if (s + 1 < S) {
      auto* c = into->add<kir::IfThenElse>();
      c->cond = eq(kir::IExpr::var(f.var) % S, s);
      dst = &c->thenBody;
      into = &c->elseBody;
    }
    kir::Block copy;
    for (auto& st : body.stmts) copy.stmts.push_back(kir::clone(*st, {}));
    wrap(s, *dst, copy);
  }
}

kir::ForLoop* onlyLoop(kir::Block& b, const char* role) {
  if (b.stmts.size() != 1 || b.stmts[0]->kind != kir::NodeKind::For)
    fail<ScheduleError>("named_barrier_roles: the ", role, " role must be one loop over the k-tiles");
  return static_cast<kir::ForLoop*>(b.stmts[0].get());
}

}  // namespace

void namedBarrierRoles(kir::Kernel& k, const TargetInfo& t, int stages) {
  if (!t.namedBarriers)
    fail<ScheduleError>("named_barrier_roles: target ", t.describe(), " has no named barriers (gfx1250 has)");
  if (2 * stages > t.namedBarriers)
    fail<ScheduleError>("named_barrier_roles: ", stages, " stages need ", 2 * stages, " named barriers; ", t.name,
                        " has ", t.namedBarriers);
  kir::IfThenElse* split = nullptr;
  for (auto& s : k.body.stmts)
    if (s->kind == kir::NodeKind::If) split = static_cast<kir::IfThenElse*>(s.get());
  if (!split || !split->cond.usesThread())
    fail<ScheduleError>("named_barrier_roles: no role split (if (warp < P) { producer } else { consumer })");
  const int W = t.warpSize, waves = std::max(1, k.launch.threads / W);
  for (int w = 0; w < waves; ++w)
    for (int lane = 1; lane < W; ++lane) {
      std::map<std::string, int64_t> a{{"tid", w * W}, {"warp", w}, {"lane", 0}};
      std::map<std::string, int64_t> b{{"tid", w * W + lane}, {"warp", w}, {"lane", lane}};
      if (split->cond.eval(a) != split->cond.eval(b))
        fail<ScheduleError>("named_barrier_roles: the role condition '", split->cond.str(), "' splits wave ", w,
                            "; roles must be whole waves (named-barrier ops are scalar instructions)");
    }
  kir::ForLoop* prod = onlyLoop(split->thenBody, "producer");
  kir::ForLoop* cons = onlyLoop(split->elseBody, "consumer");
  const kir::IExpr i = kir::IExpr::var(cons->var);
  auto full = [](int s) { return 1 + s; };
  auto empty = [&](int s) { return 1 + stages + s; };
  const std::string sS = std::to_string(stages);
  auto raw = [&](int s) {
    return sync::Why{"RAW stage " + std::to_string(s) + " (producer -> consumer)",
                     "producer writes of the stage",
                     "consumer reads of the stage",
                     "stage " + std::to_string(s),
                     std::to_string(s),
                     "named barrier full[" + std::to_string(s) + "] = " + std::to_string(full(s)) +
                         ": the producers arrive after writing k-tile s + nS, the consumers join, arrive and "
                         "wait before reading it (phase n)"};
  };
  auto war = [&](int s) {
    return sync::Why{"WAR stage " + std::to_string(s) + " (consumer -> producer)",
                     "consumer reads of the stage",
                     "producer writes of the stage",
                     "stage " + std::to_string(s),
                     std::to_string(s),
                     "named barrier empty[" + std::to_string(s) + "] = " + std::to_string(empty(s)) +
                         ": the consumers arrive after reading k-tile s + nS (not after the last " + sS +
                         "), the producers join, arrive and wait before overwriting the stage"};
  };
  const sync::Why inits{"barrier init -> every use",
                        "s_barrier_init by warp 0",
                        "every wave's named-barrier ops",
                        "",
                        "",
                        "the workgroup barrier orders warp 0's inits of the " + std::to_string(2 * stages) +
                            " named barriers before any wave joins or signals one"};
  perStage(*prod, stages, [&](int s, kir::Block& dst, kir::Block& body) {
    auto* free = dst.add<kir::IfThenElse>();
    free->cond = kir::IExpr(stages) <= kir::IExpr::var(prod->var);
    addJoinArriveWait(k, free->thenBody, empty(s), war(s));
    for (auto& st : body.stmts) dst.stmts.push_back(std::move(st));
    dst.stmts.push_back(barrierOp(k, kir::SyncKind::BarrierSignal, full(s), raw(s)));
  });
  perStage(*cons, stages, [&](int s, kir::Block& dst, kir::Block& body) {
    addJoinArriveWait(k, dst, full(s), raw(s));
    for (auto& st : body.stmts) dst.stmts.push_back(std::move(st));
    auto* more = dst.add<kir::IfThenElse>();
    more->cond = i + stages < cons->stop;
    more->thenBody.stmts.push_back(barrierOp(k, kir::SyncKind::BarrierSignal, empty(s), war(s)));
  });
  // warp 0 initialises every barrier; the workgroup barrier orders the inits before every other use
  std::vector<kir::NodePtr> head;
  auto init = std::make_unique<kir::IfThenElse>();
  init->cond = eq(kir::IExpr::var("warp"), 0);
  for (int id = 1; id <= 2 * stages; ++id)
    init->thenBody.stmts.push_back(barrierOp(k, kir::SyncKind::BarrierInit, id, inits, waves));
  head.push_back(std::move(init));
  head.push_back(barrierOp(k, kir::SyncKind::BarrierSignal, kir::kWorkgroupBarrier, inits));
  head.push_back(barrierOp(k, kir::SyncKind::BarrierWait, kir::kWorkgroupBarrier, inits));
  size_t at = 0;
  while (k.body.stmts[at].get() != split) ++at;
  k.body.stmts.insert(k.body.stmts.begin() + (long)at, std::make_move_iterator(head.begin()),
                      std::make_move_iterator(head.end()));
  k.syncsPlanned = true;
  sync::numberReasons(k);  // program order
  sync::stampPass(k, "named_barrier_roles");
}

}  // namespace heddle::passes
