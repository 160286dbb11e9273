// Origins and numbering of sync-plan entries (sync/plan.h): the pass that placed an op is stamped centrally by the
// pass manager; ops built by construction name the protocol of their kind as their builder.
#include "heddle/sync/plan.h"

namespace heddle::sync {

void stampPass(kir::Kernel& k, const std::string& pass) {
  for (auto& e : k.syncPlan.entries)
    if (e.origin.pass.empty()) e.origin.pass = pass;
}

void numberReasons(kir::Kernel& k) {
  std::vector<kir::SyncReason> ordered;
  kir::walkMut(k.body, [&](kir::Node& n) {
    if (n.kind != kir::NodeKind::Sync) return;
    auto& sy = static_cast<kir::Sync&>(n);
    if (sy.reason < 0) return;
    ordered.push_back(k.syncPlan.entries[sy.reason]);
    sy.reason = (int)ordered.size() - 1;
  });
  k.syncPlan.entries = std::move(ordered);
}

const char* protocolOf(kir::SyncKind kind) {
  using K = kir::SyncKind;
  switch (kind) {
    case K::BlockSync: return "block barrier";
    case K::CpAsyncCommit:
    case K::CpAsyncWait: return "cp.async groups";
    case K::MbarInit:
    case K::MbarArrive:
    case K::MbarArriveExpectTx:
    case K::MbarWait:
    case K::MbarArriveRemote:
    case K::FenceMbarrierInit: return "mbarrier ring";
    case K::WgmmaFence:
    case K::WgmmaCommit:
    case K::WgmmaWait: return "wgmma groups";
    case K::FenceProxyAsync: return "async-proxy fence";
    case K::SetMaxNReg: return "register budget (setmaxnreg)";
    case K::NamedBarrier: return "named barrier";
    case K::BulkCommit:
    case K::BulkWaitRead: return "bulk store groups";
    case K::VmcntWait: return "vmcnt";
    case K::GridRelease:
    case K::GridWait: return "grid flags";
    case K::TmemAlloc:
    case K::TmemRelinquish:
    case K::TmemDealloc:
    case K::TcgenCommit:
    case K::TcgenFenceBefore:
    case K::TcgenFenceAfter: return "tcgen05";
    case K::ClusterSync: return "cluster barrier";
    case K::BarrierSignal:
    case K::BarrierWait:
    case K::BarrierInit:
    case K::BarrierJoin:
    case K::BarrierLeave:
    case K::BarrierSignalIsFirst: return "split / named barrier objects";
  }
  return "?";
}

}  // namespace heddle::sync
