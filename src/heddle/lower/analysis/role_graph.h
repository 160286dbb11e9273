// Role graph (read-only analysis): which role runs each async op of a warp-specialized kernel, and
// the producer -> consumer edges between roles that data flow implies.
//
// Roles come from the definitions of the kernel's circular-buffered tensors: an op belongs to the
// role that defines what it defines --
//   a tile copied by TMA (sA, sB)      -> the producer role (PipelineRole::Load)
//   the accumulator written by the MMA -> the MMA role
//   the output, from the accumulator   -> the epilogue role, or the accumulator's own role when
//                                          there is none (registers do not cross warps)
//   a bias/residual copied by TMA (sE) -> its own producer role (PipelineRole::EpiLoad), read by the
//                                          role running the epilogue program
// Every buffer one role writes and another reads is an edge; the buffers of one producer and one
// consumer share the edge. Edge kinds:
//   Ring   shared buffers (sA, sB): one full/empty mbarrier pair per stage (sync/ring.h, Ring);
//          registers (the accumulator): staged through a ring in shared memory, then a ring too
//   Order  the ping-pong token between the warpgroups of one MMA role (order[2]): a self-edge, it
//          orders the role's own mainloops and carries no data
// Rules (ScheduleError naming the tensors and roles):
//   - the buffers of one edge share its barriers, so they have one stage count and one position
//     (the loop whose iterations are the ring's items: the k loop, the tile loop)
//   - a role's produced buffers advance in one loop: a role producing at two positions (k-tile
//     operands and a per-tile bias) needs a second producer role
//   - the Ring edges form a DAG (a cycle is named: every role on it would wait on the next)
// The generic part (solveRoleGraph) takes a plain description, so any number of roles and edges
// can be checked (heddle._C.role_graph_lab); buildRoleGraph describes a lowered matmul.
#pragma once

#include <string>
#include <vector>

#include "heddle/kir/kir.h"
#include "heddle/schedule/role_pipeline_schedule.h"

namespace heddle {

// A plain description of a role's async op for solveRoleGraph.
struct RoleOp {
  std::string label;     // "tma sA", "mma", "epilogue"
  int role = -1;         // index into the role names
  std::string position;  // the loop whose iterations are this op's items ("k loop", "tile loop")
  struct Use {
    std::string buffer;
    int stages = 1;              // ring stages of the buffer (the edge's stages)
    bool registers = false;      // lives in the writer's registers: staged through shared memory
    kir::Buffer* buf = nullptr;  // the kernel IR buffer, when there is one
    std::string position;        // writes: where its items complete, if not at the op's position
  };
  std::vector<Use> writes, reads;
  const kir::Node* node = nullptr;
};

struct RoleGraph {
  enum class EdgeKind { Ring, Order };
  struct Node {
    std::string name;
    const PipelineRole* role = nullptr;  // null for lab graphs
    std::vector<const kir::Node*> ops;
    std::string position;  // where the role's produced buffers advance ("" if it produces none)
  };
  struct Edge {
    int from = -1, to = -1;  // indices into nodes
    EdgeKind kind = EdgeKind::Ring;
    std::vector<std::string> buffers;  // sorted by name
    std::vector<kir::Buffer*> bufs;    // the same, as kernel IR buffers (empty for lab graphs)
    bool registers = false;            // the accumulator: staged through shared memory
    int stages = 0;
    std::string position;
    std::string label() const;  // "sA, sB"
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;  // Ring edges by (from, to), then Order edges
  std::vector<int> topo;    // the roles in producer-before-consumer order

  int node(PipelineRole::Kind k) const;  // -1 if no role of that kind
  const Edge* find(int from, int to, EdgeKind kind = EdgeKind::Ring) const;
  const Edge* find(PipelineRole::Kind from, PipelineRole::Kind to) const;
  std::string str() const;  // "load -(sA, sB)-> mma; mma -(acc, staged in shared memory)-> epilogue"
};

// Edges, checks and order from a plain description; `order` lists the Order self-edges (role indices).
RoleGraph solveRoleGraph(const std::vector<std::string>& roles, const std::vector<RoleOp>& ops,
                         const std::vector<int>& order = {});

// The role graph of a lowered Hopper matmul before warp_specialize splits it.
RoleGraph buildRoleGraph(const kir::Kernel& k, const RolePipelineSchedule& h);

}  // namespace heddle
