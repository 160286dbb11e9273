// fence_mbarrier_init: the initializing thread fences its mbarrier.inits for the async proxy.
//
// Every top-level init block (an elected thread's `if` holding mbarrier.init) whose barriers the async
// proxy completes -- a TMA load's complete_tx (TileLoad kind tma_load, its `mbar`) or a tcgen05.commit
// arrival -- ends with fence.mbarrier_init.release.cluster, before the block (or cluster) barrier that
// publishes the inits. A block that already has one (cluster_multicast's, for the peer CTA) is left alone;
// kernels whose barriers only threads touch (none today) get none.
//
// Before (warp_specialize, tma_pipeline, tcgen05_specialize):
//   if (warp == 0 && elect.sync) { mbarrier.init full[st] (1); mbarrier.init empty[st] (n) ... }
//   block_sync
//   ... tma -> full[g%s] (complete_tx) ...
// After:
//   if (warp == 0 && elect.sync) { mbarrier.init ...; fence.mbarrier_init.release.cluster }
//   block_sync
//
// Why (sources): the PTX ISA's fence.op_restrict (.mbarrier_init: "the synchronizing effect of the fence only
// applies to the prior mbarrier.init operations executed by the same thread"; .release, .cluster scope, sm_90);
// CUTLASS's PipelineTmaAsync::init_barriers calls cutlass::arch::fence_barrier_init() (that instruction) after
// its inits for every cluster shape, composed with __syncthreads or a cluster barrier; DeepGEMM's kernels do
// the same ("Make initialized barrier visible in async proxy"), as did the CUDA C++ Programming Guide's TMA
// example with fence.proxy.async.shared::cta. PTX ISA 9.3+ says the TMA and tcgen05.commit access their
// mbarrier operand through the generic proxy, which makes the fence one instruction of hardening inside a
// CTA; the interpreter and the simulator require it before the first async-proxy use of each barrier
// (docs/verification.md), so deleting it is a caught mutant.
//
// Runs when: always (it fences only init blocks of barriers the async proxy completes).
#include <algorithm>
#include <set>

#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

namespace {

bool isSync(const kir::Node& n, kir::SyncKind k) {
  return n.kind == kir::NodeKind::Sync && static_cast<const kir::Sync&>(n).sync == k;
}

// The mbarrier arrays the async proxy completes: TMA loads' barriers and tcgen05.commit targets.
std::set<const kir::Buffer*> asyncProxyBarriers(const kir::Kernel& k) {
  std::set<const kir::Buffer*> bars;
  kir::walk(k.body, [&](const kir::Node& n) {
    if (n.kind == kir::NodeKind::TileLoad) {
      auto& l = static_cast<const kir::TileLoad&>(n);
      if (l.kind == LoadKind::TmaLoad && l.mbar) bars.insert(l.mbar);
    } else if (isSync(n, kir::SyncKind::TcgenCommit)) {
      bars.insert(static_cast<const kir::Sync&>(n).buf);
    }
  });
  return bars;
}

}  // namespace

void fenceMbarrierInit(LowerContext& c) {
  kir::Kernel& k = c.kernel;
  const auto async = asyncProxyBarriers(k);
  if (async.empty()) return;
  for (auto& n : k.body.stmts) {
    if (n->kind != kir::NodeKind::If) continue;
    auto& block = static_cast<kir::IfThenElse&>(*n).thenBody;
    std::vector<std::string> names;
    bool fenced = false, needed = false;
    for (auto& s : block.stmts) {
      fenced |= isSync(*s, kir::SyncKind::FenceMbarrierInit);
      if (!isSync(*s, kir::SyncKind::MbarInit)) continue;
      const kir::Buffer* b = static_cast<kir::Sync&>(*s).buf;
      if (!async.count(b)) continue;
      needed = true;
      if (std::find(names.begin(), names.end(), b->name) == names.end()) names.push_back(b->name);
    }
    if (!needed || fenced) continue;
    std::string list;
    for (auto& s : names) list += (list.empty() ? "" : ", ") + s;
    build::Why w;
    w.hazards = "init " + list + " (async proxy)";
    w.buffer = list;
    w.mechanism =
        "fence.mbarrier_init.release.cluster by the initializing thread after its inits, before the "
        "barrier that publishes them: " +
        list +
        " are completed by the async proxy (TMA complete_tx, "
        "tcgen05.commit), which must see them initialized (CUTLASS fence_barrier_init, DeepGEMM)";
    block.stmts.push_back(build::makeSync(k, kir::SyncKind::FenceMbarrierInit, w));
  }
}

}  // namespace heddle::passes
