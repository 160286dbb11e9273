// Role graph (read-only analysis): which role runs each tile op of a warp-specialized matmul, and
// the producer -> consumer edges between roles that data flow implies.
//
// Ops go to roles by what they do: TMA tile loads to the load role, MMA steps to the MMA role, the
// epilogue store to the epilogue role (the MMA role when there is none). Every buffer one role
// writes and another reads is an edge:
//   shared buffers (sA, sB)   -> a ring of the buffers' stages: one full/empty mbarrier pair per
//                                stage (lower/passes/hopper_build.h, Ring)
//   registers (the accumulator)-> cannot cross warps: the edge is staged through shared memory
//                                (a ring of accumulator tiles), then it is a ring like the others
#pragma once

#include <string>
#include <vector>

#include "heddle/kir/kir.h"
#include "heddle/schedule/hopper_schedule.h"

namespace heddle {

struct RoleGraph {
  struct Node {
    const HopperRole* role = nullptr;
    std::vector<const kir::Node*> ops;
  };
  struct Edge {
    int from = -1, to = -1;            // indices into nodes
    std::vector<kir::Buffer*> buffers;
    bool registers = false;            // the accumulator: staged through shared memory
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  const Edge* find(HopperRole::Kind from, HopperRole::Kind to) const;
  std::string str() const;             // "load -(sA, sB)-> mma -(acc, staged)-> epilogue"
};

RoleGraph buildRoleGraph(const kir::Kernel& k, const HopperSchedule& h);

}  // namespace heddle
