// heddle._C.role_graph_lab: the role-graph analysis (lower/analysis/role_graph.h) on a plain
// description, so graphs no lowered matmul has yet (several producers, cycles, mixed positions) can
// be checked.
//
//   roles := [name, ...]
//   ops   := [(label, role_index, position, writes, reads), ...]
//            writes := [(buffer, stages[, registers[, position]]), ...]   reads := [buffer, ...]
//   order := [role_index, ...]            the roles whose warpgroups take turns (ping-pong)
// Returns {"edges": [(from, to, kind, [buffers], stages, position, registers)], "topo": [...],
//          "positions": [...], "str": "..."}; a cycle or incompatible positions raise ScheduleError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "heddle/lower/analysis/role_graph.h"

namespace py = pybind11;
using namespace heddle;

void bindRoleGraph(py::module_& m) {
  m.def(
      "role_graph_lab",
      [](const std::vector<std::string>& roles, const py::list& opsIn, const std::vector<int>& order) {
        std::vector<RoleOp> ops;
        for (auto& item : opsIn) {
          auto t = item.cast<py::tuple>();
          RoleOp op;
          op.label = t[0].cast<std::string>();
          op.role = t[1].cast<int>();
          op.position = t[2].cast<std::string>();
          for (auto& w : t[3].cast<py::list>()) {
            auto u = w.cast<py::tuple>();
            RoleOp::Use use;
            use.buffer = u[0].cast<std::string>();
            use.stages = u[1].cast<int>();
            use.registers = u.size() > 2 && u[2].cast<bool>();
            if (u.size() > 3) use.position = u[3].cast<std::string>();
            op.writes.push_back(use);
          }
          for (auto& r : t[4].cast<py::list>()) op.reads.push_back({r.cast<std::string>()});
          ops.push_back(op);
        }
        RoleGraph g = solveRoleGraph(roles, ops, order);
        py::list edges, positions;
        for (auto& e : g.edges)
          edges.append(py::make_tuple(e.from, e.to, e.kind == RoleGraph::EdgeKind::Ring ? "ring" : "order", e.buffers,
                                      e.stages, e.position, e.registers));
        for (auto& n : g.nodes) positions.append(n.position);
        py::dict d;
        d["edges"] = edges;
        d["topo"] = g.topo;
        d["positions"] = positions;
        d["str"] = g.str();
        return d;
      },
      py::arg("roles"), py::arg("ops"), py::arg("order") = std::vector<int>{});
}
