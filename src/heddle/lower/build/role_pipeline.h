// The role-pipeline builder: what the warp-specialized matmul lowerings share, whatever MMA mechanism
// the MMA role issues (wgmma: passes/warp_specialize.cpp; tcgen05: passes/tcgen05_specialize.cpp).
// Not a pass. It takes the serial k loop of build_matmul_loops apart into its operations, builds the
// operand ring's spec from the load -> mma edge of the role graph, lays out the kernel's head (shared
// allocations, `let bid`, the elected thread's ring inits), the TMA load role, the MMA role's k loop and
// the persistent launch; the mechanism's own steps in the k loop come from an MmaIssue hook:
//   for kt in [0, nk) { g = tl*nk + kt
//     wait full[g%s] parity (g/s)%2                    (the ring)
//     issue.before(g)                                   wgmma: wgmma.fence          tcgen05: -
//     MMA slot g%s (issue.configure)                    wgmma: stages, iter         tcgen05: + tensor-memory stage,
//                                                                                            accumulate kt > 0
//     issue.after(g)                                    wgmma: commit, wait_group(keep), arrive empty[(g+p+1)%s]
//                                                       tcgen05: tcgen05.commit -> empty[g%s]
//   }
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heddle/lower/analysis/role_graph.h"
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes::build {

// How one MMA mechanism issues a k-tile in the MMA role's k loop and gives its ring slot back.
struct MmaIssue {
  std::function<void(kir::Block&, IExpr g)> before;  // before the MMA (may be empty)
  std::function<void(kir::MmaStep&)> configure;      // the cloned MMA step's mechanism fields (may be empty)
  std::function<void(kir::Block&, IExpr g)> after;   // retire the MMA, release slot g's ring entry
};

struct RolePipeline {
  kir::Kernel& k;
  const MatmulTiling& t;
  const RolePipelineSchedule& h;
  kir::Buffer* sE = nullptr;  // a TMA-loaded bias / residual (before the graph: it is an edge of it)
  RoleGraph graph;
  std::vector<kir::NodePtr> ops;  // clones of the k loop's operations and of the epilogue store
  kir::Buffer *sA = nullptr, *sB = nullptr, *acc = nullptr;
  std::vector<kir::TileLoad*> loads;
  kir::MmaStep* mma = nullptr;
  kir::EpilogueStore* epi = nullptr;
  IExpr nk;  // k-tiles per tile

  explicit RolePipeline(LowerContext& c);

  // The load -> mma edge's ring: its label, stages, TMA bytes (sA + sB per stage) and role names; the
  // caller sets how the MMA role releases it (prefetch, keep, emptyCount).
  RingSpec operandRingSpec(const RoleGraph::Edge& ab) const;
  // The run-time parameters of the persistent walk: num_ctas (and batch when batched: a coordinate of the walk);
  // none for a grouped matmul, whose CTAs take one tile each (build/grouped_walk.h).
  void addWalkParams();
  // The kernel's head: every shared buffer's allocation, `let bid`, and one elected thread initialising
  // `rings` in order (the caller adds the barrier after it).
  std::vector<kir::NodePtr> head(const std::vector<const Ring*>& rings);
  // The tiles this CTA walks: ceil((tiles - bid) / num_ctas); 1 for a grouped matmul.
  IExpr tilesPerCta() const;
  // `if (warp < 4)` with the load role's setmaxnreg and its TMA producer on `warp`'s elected thread.
  std::unique_ptr<kir::IfThenElse> loadWarpgroup(const Ring& ring, const PipelineRole& loadR, int warp, IExpr tilesCta);
  // The MMA role's k loop over ring `ring` for item g = tl * nk + kt, with the mechanism's steps.
  std::unique_ptr<kir::ForLoop> mmaKLoop(const Ring& ring, const MmaIssue& issue);
  // Launch (h.threads per CTA, grid num_ctas) and the kernel name: `stem`, each warpgroup role's register
  // budget, `_tmae<se>` with a TMA-loaded epilogue operand.
  void finish(const std::string& stem, const Ring* ringE);
};

}  // namespace heddle::passes::build
