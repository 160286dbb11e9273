// Role graph (see role_graph.h).
#include "heddle/lower/analysis/role_graph.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace heddle {

const RoleGraph::Edge* RoleGraph::find(HopperRole::Kind from, HopperRole::Kind to) const {
  for (auto& e : edges)
    if (nodes[e.from].role->kind == from && nodes[e.to].role->kind == to) return &e;
  return nullptr;
}

std::string RoleGraph::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < edges.size(); ++i) {
    auto& e = edges[i];
    os << (i ? "; " : "") << nodes[e.from].role->name << " -(";
    for (size_t j = 0; j < e.buffers.size(); ++j) os << (j ? ", " : "") << e.buffers[j]->name;
    os << (e.registers ? ", staged in shared memory" : "") << ")-> " << nodes[e.to].role->name;
  }
  return os.str();
}

RoleGraph buildRoleGraph(const kir::Kernel& k, const HopperSchedule& h) {
  RoleGraph g;
  std::map<HopperRole::Kind, int> index;
  for (auto& r : h.roles) {
    index[r.kind] = (int)g.nodes.size();
    g.nodes.push_back({&r, {}});
  }
  auto roleOf = [&](const kir::Node& n) -> int {
    switch (n.kind) {
      case kir::NodeKind::TileLoad: return index.at(HopperRole::Load);
      case kir::NodeKind::MmaStep: return index.at(HopperRole::Mma);
      case kir::NodeKind::EpilogueStore:
        return index.count(HopperRole::Epilogue) ? index.at(HopperRole::Epilogue) : index.at(HopperRole::Mma);
      default: return -1;
    }
  };
  // writes and reads per buffer, by role (the accumulator is written by MMA steps, read by the epilogue)
  std::map<kir::Buffer*, std::set<int>> writers, readers;
  kir::walk(k.body, [&](const kir::Node& n) {
    int r = roleOf(n);
    if (r < 0) return;
    g.nodes[r].ops.push_back(&n);
    for (auto& a : kir::accessesOf(n)) (a.write ? writers : readers)[a.buf].insert(r);
    if (n.kind == kir::NodeKind::MmaStep) writers[static_cast<const kir::MmaStep&>(n).acc].insert(r);
    if (n.kind == kir::NodeKind::EpilogueStore) readers[static_cast<const kir::EpilogueStore&>(n).acc].insert(r);
  });
  for (auto& [buf, ws] : writers)
    for (int w : ws)
      for (int r : readers[buf]) {
        if (r == w) continue;
        RoleGraph::Edge* e = nullptr;
        for (auto& x : g.edges)
          if (x.from == w && x.to == r) e = &x;
        if (!e) {
          g.edges.push_back({w, r, {}, false});
          e = &g.edges.back();
        }
        e->buffers.push_back(buf);
        if (buf->memory == MemoryType::Local) e->registers = true;
      }
  for (auto& e : g.edges)  // deterministic order (the maps above are keyed by address)
    std::sort(e.buffers.begin(), e.buffers.end(), [](kir::Buffer* a, kir::Buffer* b) { return a->name < b->name; });
  std::sort(g.edges.begin(), g.edges.end(),
            [](const RoleGraph::Edge& a, const RoleGraph::Edge& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  return g;
}

}  // namespace heddle
