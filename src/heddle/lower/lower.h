// Lowering: Fusion IR + validated schedule -> kernel IR + sync plan + smem plan, through the
// ordered pass list in lower.cpp. All state a pass sees travels in an explicit LowerContext; there
// is no global "current lowering".
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/fusion.h"
#include "heddle/kir/kir.h"
#include "heddle/schedule/schedule.h"
#include "heddle/target/target.h"

namespace heddle {

struct LowerOptions {
  int vecA = 8, vecB = 8;   // copy widths the inputs' alignment allows
  int vecE = 1;             // elements per read of an epilogue operand (2: aligned pairs; vectorize_epilogue_reads)
  bool dumpPasses = false;  // keep the IR after each pass (HEDDLE_DUMP=passes)
};

struct PassRecord {
  std::string name;
  std::string when;  // the pass's `when` text (Pass::When::text)
  bool ran = false;  // false: its `when` did not hold, the pass was skipped
  double ms = 0;
  bool changed = false;
  std::string irAfter;  // only with dumpPasses
};

struct LowerContext {
  const Fusion& fusion;
  const TargetInfo& target;
  LowerOptions options;
  MatmulTiling tiling;
  kir::Kernel kernel;
  std::vector<PassRecord> passes;
};

// When a pass runs: a predicate over the context as the earlier passes left it, and the same condition in
// words for the pass dump. The pass body assumes it (checked with requireWhen where a wrong call would
// corrupt the IR); a pass whose `when` does not hold is skipped and leaves the IR as it was.
struct When {
  const char* text;
  bool (*holds)(const LowerContext&);
};

struct Pass {
  const char* name;
  When when;
  void (*run)(LowerContext&);
};
const std::vector<Pass>& passList();

// HeddleError (an internal error) unless pass `name`'s `when` holds for `c`: the first line of a pass
// body whose condition its `when` states.
void requireWhen(const LowerContext& c, const char* name);

// HEDDLE_DUMP=passes: per pass "--- after <name> (<ms> ms; runs when: <when>)" and the IR after it,
// or "--- skipped <name> (runs when: <when>)".
std::string passDump(const LowerContext& c);

// Runs the pass list. The returned context owns the kernel IR.
std::unique_ptr<LowerContext> lower(const Fusion& f, const TargetInfo& t, const LowerOptions& o);

namespace passes {
void validateSchedule(LowerContext&);
void buildMatmulLoops(LowerContext&);
void buildEpilogue(LowerContext&);
void circularBuffer(LowerContext&);
void insertSyncs(LowerContext&);
void checkUniformity(LowerContext&);  // passes/check_uniformity.cpp (sync/uniformity.cpp)
void dropUnusedLets(LowerContext&);   // passes/drop_unused_lets.cpp
void planSmem(LowerContext&);
void warpSpecialize(LowerContext&);          // passes/warp_specialize.cpp (Hopper roles)
void tmaStoreEpilogue(LowerContext&);        // passes/tma_store_epilogue.cpp (epilogue_store("tma"))
void blockScaleRing(LowerContext&);          // passes/block_scale_ring.cpp (block-scaled matmuls)
void mxScaleRing(LowerContext&);             // passes/mx_scale_ring.cpp (mx32-scaled matmuls)
void blockScalePromotion(LowerContext&);     // passes/block_scale_promotion.cpp (block-scaled matmuls)
void vectorizeEpilogueReads(LowerContext&);  // passes/vectorize_epilogue_reads.cpp (vec_e=2)
void clusterMulticast(LowerContext&);        // passes/cluster_multicast.cpp (cluster(2, along))
void tcgen05Specialize(LowerContext&);       // passes/tcgen05_specialize.cpp (Blackwell roles)
void splitK(LowerContext&);                  // passes/split_k.cpp
void reduceSplits(LowerContext&);            // passes/reduce_splits.cpp (after insert_syncs)
void streamK(LowerContext&);                 // passes/stream_k.cpp
void streamKFixup(LowerContext&);            // passes/stream_k_fixup.cpp (after insert_syncs)
void streamKRoles(LowerContext&);            // passes/stream_k_roles.cpp (the warp-specialized sm_90a kernel)
// passes/split_k.cpp, shared with stream_k: the k loop runs ceil(KS / bk) k-tiles from k-tile
// `firstTile` (the loads' k coordinate shifted; the index stays 0-based), and the kernel takes the
// workspace params `ws` (f32) and `flags` (i32).
kir::ForLoop& shareKLoop(LowerContext& c, const kir::IExpr& firstTile, const char* pass);
void addWorkspaceParams(kir::Kernel& k);
void tmaPipeline(LowerContext&);        // passes/tma_pipeline.cpp (Hopper mbarrier rings)
void fenceMbarrierInit(LowerContext&);  // passes/fence_mbarrier_init.cpp (after every pass that inits mbarriers)
void setupTmaOperands(LowerContext&);   // passes/tma_operands.cpp, called by build_matmul_loops
// build/named_barrier_roles.cpp: the named-barrier protocol of a producer/consumer wave split
// (gfx1250; hand-built role programs: sync_lab(roles=True)).
void namedBarrierRoles(kir::Kernel& k, const TargetInfo& t, int stages);
}  // namespace passes

}  // namespace heddle
