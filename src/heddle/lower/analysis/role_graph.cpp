// Role graph (see role_graph.h).
#include "heddle/lower/analysis/role_graph.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle {

int RoleGraph::node(PipelineRole::Kind k) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].role && nodes[i].role->kind == k) return (int)i;
  return -1;
}

const RoleGraph::Edge* RoleGraph::find(int from, int to, EdgeKind kind) const {
  for (auto& e : edges)
    if (e.from == from && e.to == to && e.kind == kind) return &e;
  return nullptr;
}

const RoleGraph::Edge* RoleGraph::find(PipelineRole::Kind from, PipelineRole::Kind to) const {
  int f = node(from), t = node(to);
  return f < 0 || t < 0 ? nullptr : find(f, t);
}

std::string RoleGraph::Edge::label() const {
  std::ostringstream os;
  for (size_t i = 0; i < buffers.size(); ++i) os << (i ? ", " : "") << buffers[i];
  return os.str();
}

std::string RoleGraph::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < edges.size(); ++i) {
    auto& e = edges[i];
    os << (i ? "; " : "") << nodes[e.from].name << " -(";
    if (e.kind == EdgeKind::Order) {
      os << "order: warpgroups take turns";
    } else {
      os << e.label() << (e.registers ? ", staged in shared memory" : "");
    }
    os << ")-> " << nodes[e.to].name;
  }
  return os.str();
}

namespace {

std::string joinNames(const std::vector<std::string>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str();
}

// The Ring edges in producer-before-consumer order; a cycle is a ScheduleError naming it.
std::vector<int> topoOrder(const RoleGraph& g) {
  const int n = (int)g.nodes.size();
  std::vector<int> state(n, 0), out, stack;  // 0 new, 1 on the DFS stack, 2 done
  std::function<void(int)> visit = [&](int u) {
    state[u] = 1;
    stack.push_back(u);
    for (auto& e : g.edges) {
      if (e.kind != RoleGraph::EdgeKind::Ring || e.from != u) continue;
      if (state[e.to] == 1) {  // the cycle: from e.to along the stack back to u, then e
        auto at = std::find(stack.begin(), stack.end(), e.to);
        std::ostringstream os;
        for (auto it = at; it != stack.end(); ++it) {
          int a = *it, b = it + 1 != stack.end() ? *(it + 1) : e.to;
          os << g.nodes[a].name << " -(" << g.find(a, b)->label() << ")-> ";
        }
        os << g.nodes[e.to].name;
        fail<ScheduleError>("warp_specialize: the roles wait on each other in a cycle: ", os.str(),
                            "; each role on it waits for the next one's items, so none can start. Let one role "
                            "produce what the cycle feeds back (or merge the roles on the cycle into one)");
      }
      if (state[e.to] == 0) visit(e.to);
    }
    stack.pop_back();
    state[u] = 2;
    out.push_back(u);
  };
  for (int u = 0; u < n; ++u)
    if (!state[u]) visit(u);
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

RoleGraph solveRoleGraph(const std::vector<std::string>& roles, const std::vector<RoleOp>& ops,
                         const std::vector<int>& order) {
  RoleGraph g;
  for (auto& r : roles) g.nodes.push_back({r, nullptr, {}, ""});
  struct Def {
    int role = -1;
    RoleOp::Use use;
    std::string position, label;
  };
  std::map<std::string, Def> defs;                                          // buffer -> its (single) defining role
  std::map<std::string, std::set<int>> readers;                             // buffer -> roles reading it
  std::map<int, std::map<std::string, std::vector<std::string>>> produced;  // role -> position -> buffers
  for (auto& op : ops) {
    if (op.role < 0 || op.role >= (int)roles.size())
      fail<HeddleError>("role graph: op '", op.label, "' names no role (index ", op.role, ")");
    if (op.node) g.nodes[op.role].ops.push_back(op.node);
    for (auto& w : op.writes) {
      auto it = defs.find(w.buffer);
      if (it != defs.end() && it->second.role != op.role)
        fail<ScheduleError>("warp_specialize: tensor ", w.buffer, " is written by roles '", roles[it->second.role],
                            "' (", it->second.label, ") and '", roles[op.role], "' (", op.label,
                            "); a circular-buffered tensor has one producer role");
      const std::string& pos = w.position.empty() ? op.position : w.position;
      defs[w.buffer] = {op.role, w, pos, op.label};
      auto& v = produced[op.role][pos];
      if (std::find(v.begin(), v.end(), w.buffer) == v.end()) v.push_back(w.buffer);
    }
    for (auto& r : op.reads) readers[r.buffer].insert(op.role);
  }
  // a role's produced buffers advance in one loop
  for (auto& [role, byPos] : produced) {
    if (byPos.size() > 1) {
      std::ostringstream os;
      for (auto& [pos, bufs] : byPos) os << (os.tellp() ? "; " : "") << joinNames(bufs) << " at the " << pos;
      fail<ScheduleError>("warp_specialize: role '", roles[role], "' produces tensors at different stage positions (",
                          os.str(),
                          "); one role walks one loop of ring items, so give the tensors of each "
                          "position their own producer role");
    }
    g.nodes[role].position = byPos.begin()->first;
  }
  // every buffer written by one role and read by another is on the edge writer -> reader
  for (auto& [buf, d] : defs)
    for (int r : readers[buf]) {
      if (r == d.role) continue;
      RoleGraph::Edge* e = nullptr;
      for (auto& x : g.edges)
        if (x.from == d.role && x.to == r) e = &x;
      if (!e) {
        g.edges.push_back({});
        e = &g.edges.back();
        e->from = d.role;
        e->to = r;
        e->stages = d.use.stages;
        e->position = d.position;
      } else if (e->stages != d.use.stages) {
        fail<ScheduleError>("warp_specialize: tensors ", e->label(), " (", e->stages, " stages) and ", buf, " (",
                            d.use.stages, " stages) go from role '", roles[d.role], "' to role '", roles[r],
                            "' through one ring of full/empty mbarriers, so they need the same stage count; give "
                            "them the same circular_buffer(stages)");
      }
      e->buffers.push_back(buf);
      if (d.use.buf) e->bufs.push_back(d.use.buf);
      if (d.use.registers) e->registers = true;
    }
  std::sort(g.edges.begin(), g.edges.end(), [](const RoleGraph::Edge& a, const RoleGraph::Edge& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
  g.topo = topoOrder(g);
  for (int r : order) {
    RoleGraph::Edge e;
    e.from = e.to = r;
    e.kind = RoleGraph::EdgeKind::Order;
    e.stages = 2;
    e.buffers = {"order"};
    g.edges.push_back(e);
  }
  return g;
}

RoleGraph buildRoleGraph(const kir::Kernel& k, const RolePipelineSchedule& h) {
  std::vector<std::string> names;
  std::map<PipelineRole::Kind, int> index;
  for (auto& r : h.roles) {
    index[r.kind] = (int)names.size();
    names.push_back(r.name);
  }
  const bool epiRole = index.count(PipelineRole::Epilogue);
  auto use = [&](kir::Buffer* b, int stages) {
    return RoleOp::Use{b->name, stages, b->memory == MemoryType::Local, b, ""};
  };
  std::vector<RoleOp> ops;
  int accRole = -1;
  // an op's position is the loop whose iterations are its items: the k loop, or the tile
  std::function<void(const kir::Block&, const std::string&)> scan = [&](const kir::Block& b, const std::string& pos) {
    for (auto& n : b.stmts) {
      if (n->kind == kir::NodeKind::For) {
        scan(static_cast<const kir::ForLoop&>(*n).body, "k loop");
        continue;
      }
      RoleOp op;
      op.position = pos;
      op.node = n.get();
      if (n->kind == kir::NodeKind::TileLoad) {  // defines a TMA-copied tile: the producer role
        auto& t = static_cast<const kir::TileLoad&>(*n);
        op.label = "tma " + t.dst->name;
        op.role = index.at(PipelineRole::Load);
        op.writes.push_back(use(t.dst, t.dst->stages));
      } else if (n->kind == kir::NodeKind::MmaStep) {  // defines the accumulator: the MMA role
        auto& m = static_cast<const kir::MmaStep&>(*n);
        op.label = "mma";
        op.role = accRole = index.at(PipelineRole::Mma);
        op.reads = {use(m.a, m.a->stages), use(m.b, m.b->stages)};
        for (auto& b : k.buffers)  // block scales: the promotion of the MMA role reads scale_a's ring slot;
          // mx32: its tcgen05.cp reads the scale chunks' slots (passes/mx_scale_ring.cpp)
          if (b->role == "scale_a" || b->role == "mx_scale_a" || b->role == "mx_scale_b")
            op.reads.push_back(use(b.get(), b->stages));
        op.writes.push_back(use(m.acc, h.accStages));
        op.writes.back().position = "tile loop";             // summed over the k loop, complete once per tile
      } else if (n->kind == kir::NodeKind::EpilogueStore) {  // reads the accumulator
        auto& e = static_cast<const kir::EpilogueStore&>(*n);
        op.label = "epilogue";
        op.role = epiRole ? index.at(PipelineRole::Epilogue) : accRole;
        op.reads.push_back(use(e.acc, h.accStages));
      } else {
        continue;
      }
      ops.push_back(op);
    }
  };
  scan(k.body, "tile loop");
  // a TMA-loaded epilogue operand (warp_specialize.cpp makes its buffer before the graph): its producer
  // role writes it once per tile, the role running the epilogue program reads it
  for (auto& b : k.buffers) {
    if (b->role != "epi_tma") continue;
    RoleOp load;
    load.label = "tma " + b->name;
    load.role = index.at(PipelineRole::EpiLoad);
    load.position = "tile loop";
    load.writes.push_back(use(b.get(), b->stages));
    ops.push_back(load);
    for (auto& op : ops)
      if (op.label == "epilogue") op.reads.push_back(use(b.get(), b->stages));
  }
  std::vector<int> order;
  if (!h.coop) order.push_back(index.at(PipelineRole::Mma));
  RoleGraph g = solveRoleGraph(names, ops, order);
  for (size_t i = 0; i < g.nodes.size(); ++i) g.nodes[i].role = &h.roles[i];
  return g;
}

}  // namespace heddle
