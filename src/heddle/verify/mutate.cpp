// Sync mutations (see mutate.h).
#include "heddle/verify/mutate.h"

#include "heddle/verify/kernel_copy.h"

namespace heddle::verify {

namespace {

bool isSync(const kir::Node& n, std::initializer_list<kir::SyncKind> kinds) {
  if (n.kind != kir::NodeKind::Sync) return false;
  for (auto k : kinds)
    if (static_cast<const kir::Sync&>(n).sync == k) return true;
  return false;
}

// Visits every node with its parent block, index and a short description of where it stands.
void visit(const kir::Block& b, const std::string& ctx, int& counter,
           const std::function<void(const kir::Node&, const kir::Block&, size_t, int, const std::string&)>& f) {
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    const kir::Node& n = *b.stmts[i];
    std::string where =
        ctx + ", " + (i + 1 < b.stmts.size() ? "before '" + kir::describe(*b.stmts[i + 1]) + "'" : "at its end");
    f(n, b, i, counter++, where);
    if (n.kind == kir::NodeKind::For) {
      auto& l = static_cast<const kir::ForLoop&>(n);
      visit(l.body, std::string(kir::loopStageName(l.stage)) + " loop body", counter, f);
    } else if (n.kind == kir::NodeKind::If) {
      auto& c = static_cast<const kir::IfThenElse&>(n);
      visit(c.thenBody, "if (" + c.cond.str() + ") branch", counter, f);
      visit(c.elseBody, "else branch of if (" + c.cond.str() + ")", counter, f);
    }
  }
}

// The block holding `n` and its index there (null when `n` is not in `b`).
const kir::Block* parentOf(const kir::Block& b, const kir::Node* n, size_t& index) {
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    const kir::Node& s = *b.stmts[i];
    if (&s == n) return index = i, &b;
    const kir::Block* r = nullptr;
    if (s.kind == kir::NodeKind::For) r = parentOf(static_cast<const kir::ForLoop&>(s).body, n, index);
    if (s.kind == kir::NodeKind::If && !(r = parentOf(static_cast<const kir::IfThenElse&>(s).thenBody, n, index)))
      r = parentOf(static_cast<const kir::IfThenElse&>(s).elseBody, n, index);
    if (r) return r;
  }
  return nullptr;
}

// A split-barrier half whose neighbour on the side it would move to (the statement before a signal,
// after a wait) is a memory access in its block: moving it across that access is the mutant.
bool slidesOverAccess(const kir::Kernel& k, const kir::Node& n) {
  size_t i = 0;
  const kir::Block* b = parentOf(k.body, &n, i);
  const bool signal = isSync(n, {kir::SyncKind::BarrierSignal});
  if (!b || (signal ? i == 0 : i + 1 >= b->stmts.size())) return false;
  const kir::Node& next = *b->stmts[signal ? i - 1 : i + 1];
  return next.kind != kir::NodeKind::Sync && next.kind != kir::NodeKind::For && next.kind != kir::NodeKind::If &&
         !kir::accessesOf(next).empty();
}

}  // namespace

const std::vector<MutationKind>& mutationKinds() {
  static const std::vector<MutationKind> kinds = {
      {"delete_sync",
       [](const kir::Node& n) {
         return isSync(
             n,
             {kir::SyncKind::BlockSync, kir::SyncKind::CpAsyncCommit, kir::SyncKind::CpAsyncWait,
              kir::SyncKind::VmcntWait, kir::SyncKind::BarrierSignal, kir::SyncKind::BarrierWait,
              kir::SyncKind::BarrierInit, kir::SyncKind::BarrierJoin, kir::SyncKind::BarrierLeave,
              kir::SyncKind::BarrierSignalIsFirst,
              // Hopper (setmaxnreg is a register budget, not a sync: never deleted)
              kir::SyncKind::MbarInit, kir::SyncKind::MbarArrive, kir::SyncKind::MbarArriveExpectTx,
              kir::SyncKind::MbarWait, kir::SyncKind::WgmmaFence, kir::SyncKind::WgmmaCommit, kir::SyncKind::WgmmaWait,
              kir::SyncKind::FenceProxyAsync, kir::SyncKind::NamedBarrier, kir::SyncKind::BulkCommit,
              kir::SyncKind::BulkWaitRead, kir::SyncKind::TmemAlloc, kir::SyncKind::TmemDealloc,
              kir::SyncKind::TcgenCommit, kir::SyncKind::TcgenFenceBefore, kir::SyncKind::TcgenFenceAfter,
              // clusters (the peer's release, the init fence, the cluster barriers)
              kir::SyncKind::MbarArriveRemote, kir::SyncKind::FenceMbarrierInit, kir::SyncKind::ClusterSync,
              // split-K grid flags
              kir::SyncKind::GridRelease, kir::SyncKind::GridWait});
       },
       [](const kir::Node& n) { return "delete " + kir::describe(n); },
       [](kir::Block& p, size_t i) { p.stmts.erase(p.stmts.begin() + i); }},
      {"loosen_wait",
       [](const kir::Node& n) {
         return isSync(n, {kir::SyncKind::CpAsyncWait, kir::SyncKind::VmcntWait, kir::SyncKind::WgmmaWait,
                           kir::SyncKind::BulkWaitRead});
       },
       [](const kir::Node& n) {
         auto& s = static_cast<const kir::Sync&>(n);
         return "loosen " + kir::describe(n) + " to " + kir::syncKindName(s.sync) + "(" + std::to_string(s.arg + 1) +
                ")";
       },
       [](kir::Block& p, size_t i) { static_cast<kir::Sync&>(*p.stmts[i]).arg += 1; }},
      {"slide_barrier",
       [](const kir::Node& n) { return isSync(n, {kir::SyncKind::BarrierSignal, kir::SyncKind::BarrierWait}); },
       [](const kir::Node& n) {
         return std::string(isSync(n, {kir::SyncKind::BarrierSignal}) ? "hoist " : "sink ") + kir::describe(n) +
                " across the neighbouring access";
       },
       [](kir::Block& p, size_t i) {
         const bool signal = isSync(*p.stmts[i], {kir::SyncKind::BarrierSignal});
         std::swap(p.stmts[i], p.stmts[signal ? i - 1 : i + 1]);
       },
       nullptr, slidesOverAccess},
  };
  static const std::vector<MutationKind> all = [] {
    auto v = kinds;
    for (auto& k : ringMutationKinds()) v.push_back(k);  // verify/ring_mutate.cpp
    v.push_back({"shift_flag",                           // split-K: a grid release or wait names the next flag
                 [](const kir::Node& n) { return isSync(n, {kir::SyncKind::GridRelease, kir::SyncKind::GridWait}); },
                 [](const kir::Node& n) { return "shift the flag of " + kir::describe(n) + " by one"; },
                 [](kir::Block& p, size_t i) {
                   auto& s = static_cast<kir::Sync&>(*p.stmts[i]);
                   s.index = s.index + 1;
                 }});
    return v;
  }();
  return all;
}

namespace {

// drop_release_fence / drop_acquire_fence: a fence of the AMD workgroup barrier cleared (kir::Sync flags)
MutationKind dropFence(bool release) {
  const kir::SyncKind half = release ? kir::SyncKind::BarrierSignal : kir::SyncKind::BarrierWait;
  return {release ? "drop_release_fence" : "drop_acquire_fence",
          [half](const kir::Node& n) {
            return isSync(n, {kir::SyncKind::BlockSync}) ||
                   (isSync(n, {half}) && static_cast<const kir::Sync&>(n).arg == kir::kWorkgroupBarrier);
          },
          [release](const kir::Node& n) {
            return std::string("drop the workgroup ") + (release ? "release fence before " : "acquire fence after ") +
                   kir::describe(n);
          },
          [release](kir::Block& p, size_t i) {
            auto& s = static_cast<kir::Sync&>(*p.stmts[i]);
            (release ? s.noReleaseFence : s.noAcquireFence) = true;
          }};
}

}  // namespace

// promotion_interval: a block-scaled kernel's `if` around its promotion (passes/block_scale_promotion.cpp:
// `if (min((kt + 1) % P, nk - kt - 1) == 0) { wait_group(0); promote ...(first = kt < P) }`, P k-tiles per
// interval) rewritten to promote every 2P k-tiles: tmp then carries two intervals, the first of them scaled
// with the second's scales where P k-tiles make a whole 128-wide block (tests/sim/test_block_scale_simulate.py).
// The wrong numbers are what the simulator must report.
static kir::MmaPromote* promoteIn(const kir::Node& n) {
  if (n.kind != kir::NodeKind::If) return nullptr;
  for (auto& s : static_cast<const kir::IfThenElse&>(n).thenBody.stmts)
    if (s->kind == kir::NodeKind::MmaPromote) return static_cast<kir::MmaPromote*>(s.get());
  return nullptr;
}

static MutationKind promotionInterval() {
  MutationKind m{"promotion_interval", [](const kir::Node& n) { return promoteIn(n) != nullptr; },
                 [](const kir::Node& n) {
                   return "promote every other interval: 'if (" + static_cast<const kir::IfThenElse&>(n).cond.str() +
                          ")' around " + kir::describe(*promoteIn(n));
                 },
                 [](kir::Block&, size_t) {}};
  m.applyInKernel = [](kir::Kernel& k, kir::Block& parent, size_t i) {
    auto& guard = static_cast<kir::IfThenElse&>(*parent.stmts[i]);
    kir::MmaPromote* pr = promoteIn(guard);
    int64_t p = 1;  // the kernel's interval in k-tiles: first = kt < P
    while (p < 4096 && pr->first.eval({{"kt", p}}) != 0) ++p;
    const kir::IExpr kt = kir::IExpr::var("kt"), nk = ceilDiv(kir::IExpr::var("K"), k.tile.bk);
    guard.cond = eq(min((kt + 1) % (2 * p), nk - kt - 1), 0);
    pr->first = kt < 2 * p;
  };
  return m;
}

const std::vector<MutationKind>& optInMutationKinds() {
  static const std::vector<MutationKind> kinds = {
      {"unguard_sync",
       [](const kir::Node& n) {
         if (n.kind != kir::NodeKind::If) return false;
         auto& c = static_cast<const kir::IfThenElse&>(n);
         if (c.electWarp >= 0 || !c.elseBody.stmts.empty() || c.thenBody.stmts.empty()) return false;
         for (auto& s : c.thenBody.stmts)
           if (s->kind != kir::NodeKind::Sync) return false;
         return true;
       },
       [](const kir::Node& n) {
         return "drop the guard 'if (" + static_cast<const kir::IfThenElse&>(n).cond.str() + ")' around " +
                kir::describe(*static_cast<const kir::IfThenElse&>(n).thenBody.stmts[0]);
       },
       [](kir::Block& p, size_t i) {
         kir::NodePtr guard = std::move(p.stmts[i]);
         auto& body = static_cast<kir::IfThenElse&>(*guard).thenBody.stmts;
         p.stmts.erase(p.stmts.begin() + (long)i);
         p.stmts.insert(p.stmts.begin() + (long)i, std::make_move_iterator(body.begin()),
                        std::make_move_iterator(body.end()));
       }},
      promotionInterval(),
      // AMD kernels: the workgroup release fence before a block_sync / s_barrier_signal -1, or the acquire
      // fence after a block_sync / s_barrier_wait -1, deleted (verify/workgroup_fences.cpp)
      dropFence(true),
      dropFence(false),
  };
  return kinds;
}

namespace {

const MutationKind* findKind(const std::string& name) {
  for (auto* list : {&mutationKinds(), &optInMutationKinds()})
    for (auto& x : *list)
      if (x.name == name) return &x;
  return nullptr;
}

}  // namespace

std::vector<Mutant> enumerateMutants(const kir::Kernel& k) {
  std::vector<std::string> all;
  for (auto& kind : mutationKinds()) all.push_back(kind.name);
  return enumerateMutants(k, all);
}

std::vector<Mutant> enumerateMutants(const kir::Kernel& k, const std::vector<std::string>& names) {
  std::vector<const MutationKind*> kinds;
  for (auto& name : names) {
    const MutationKind* kind = findKind(name);
    if (!kind) fail<HeddleError>("mutants: unknown mutation kind '", name, "'");
    kinds.push_back(kind);
  }
  std::vector<Mutant> out;
  int counter = 0;
  visit(k.body, "kernel body", counter,
        [&](const kir::Node& n, const kir::Block&, size_t, int site, const std::string& where) {
          for (const MutationKind* kp : kinds) {
            const MutationKind& kind = *kp;
            if (!kind.applies(n) || (kind.appliesInKernel && !kind.appliesInKernel(k, n))) continue;
            std::string d = kind.verb(n) + " [" + where + "]";
            if (n.kind == kir::NodeKind::Sync) {
              int r = static_cast<const kir::Sync&>(n).reason;
              if (r >= 0 && r < (int)k.syncPlan.entries.size())
                d += " (sync " + std::to_string(r) + ": " + k.syncPlan.entries[r].hazards + ")";
            }
            out.push_back({kind.name, site, d});
          }
        });
  return out;
}

kir::Kernel applyMutant(const kir::Kernel& k, const Mutant& m) {
  const MutationKind* kind = findKind(m.kind);
  if (!kind) fail<HeddleError>("mutant: unknown mutation kind '", m.kind, "'");
  kir::Kernel c = copyKernel(k);
  kir::Block* parent = nullptr;
  size_t index = 0;
  int counter = 0;
  visit(c.body, "", counter, [&](const kir::Node& n, const kir::Block& b, size_t i, int site, const std::string&) {
    if (site == m.site && kind->applies(n)) {
      parent = const_cast<kir::Block*>(&b);
      index = i;
    }
  });
  if (!parent) fail<HeddleError>("mutant: site ", m.site, " of ", k.name, " is not a node '", m.kind, "' applies to");
  if (kind->applyInKernel) kind->applyInKernel(c, *parent, index);
  else kind->apply(*parent, index);
  c.name = k.name + "__" + m.kind + "_" + std::to_string(m.site);
  c.renumber();
  return c;
}

}  // namespace heddle::verify
