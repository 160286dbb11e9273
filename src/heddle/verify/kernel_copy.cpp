// Deep copy of a kernel (see kernel_copy.h).
#include "heddle/verify/kernel_copy.h"

#include <map>

namespace heddle::verify {

kir::Kernel copyKernel(const kir::Kernel& k) {
  kir::Kernel c;
  c.name = k.name;
  c.params = k.params;
  std::map<const kir::Buffer*, kir::Buffer*> remap;
  for (auto& b : k.buffers) remap[b.get()] = c.addBuffer(std::make_unique<kir::Buffer>(*b));
  for (auto& s : k.body.stmts) c.body.stmts.push_back(kir::clone(*s, {}));
  auto fix = [&](kir::Buffer*& p) {
    if (!p) return;
    auto it = remap.find(p);
    if (it == remap.end())
      fail<HeddleError>("copyKernel: a node of ", k.name, " uses a buffer the kernel does not own");
    p = it->second;
  };
  kir::walkMut(c.body, [&](kir::Node& n) {
    switch (n.kind) {
      case kir::NodeKind::TileLoad: {
        auto& t = static_cast<kir::TileLoad&>(n);
        fix(t.dst);
        fix(t.mbar);
        break;
      }
      case kir::NodeKind::MmaStep: {
        auto& m = static_cast<kir::MmaStep&>(n);
        fix(m.a);
        fix(m.b);
        fix(m.acc);
        break;
      }
      case kir::NodeKind::EpilogueStore: {
        auto& e = static_cast<kir::EpilogueStore&>(n);
        fix(e.acc);
        fix(e.from);
        fix(e.to);
        for (auto*& x : e.toExtra) fix(x);
        break;
      }
      case kir::NodeKind::Sync: fix(static_cast<kir::Sync&>(n).buf); break;
      case kir::NodeKind::TmaStore: fix(static_cast<kir::TmaStore&>(n).src); break;
      case kir::NodeKind::MmaPromote: {
        auto& m = static_cast<kir::MmaPromote&>(n);
        fix(m.acc);
        fix(m.tmp);
        fix(m.scaleSmem);
        break;
      }
      case kir::NodeKind::SmemAccess: fix(static_cast<kir::SmemAccess&>(n).buf); break;
      case kir::NodeKind::Alloc: fix(static_cast<kir::Alloc&>(n).buf); break;
      default: break;
    }
  });
  c.launch = k.launch;
  c.syncPlan = k.syncPlan;
  c.smemPlan = k.smemPlan;
  c.epilogue = k.epilogue;
  for (auto& op : c.epilogue) fix(op.smem);  // a TMA-loaded epilogue operand's ring buffer
  c.epilogueResult = k.epilogueResult;
  c.outDtype = k.outDtype;
  c.extraOutputs = k.extraOutputs;
  c.tile = k.tile;
  c.tripChecks = k.tripChecks;
  c.syncsPlanned = k.syncsPlanned;
  c.tensorMaps = k.tensorMaps;
  c.splitK = k.splitK;
  c.streamK = k.streamK;
  c.cluster = k.cluster;
  c.clusterAlong = k.clusterAlong;
  c.workspaceTiles = k.workspaceTiles;
  c.renumber();
  return c;
}

}  // namespace heddle::verify
