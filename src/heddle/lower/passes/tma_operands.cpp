// Hopper operands (called at the end of build_matmul_loops when the schedule has tma_load caches):
// TMA tiles through tensor maps, warpgroup MMA, 1024-byte-aligned swizzled stages.
//
// Before: for kt { tma_load A -> sA[0]; tma_load B -> sB[0]; mma acc += sA[0] x sB[0] }
//         params A, B, M, N, K, lda, ldb, ...      sA/sB aligned 128
// After:  for kt { tma_load A -> sA[0] via tmA; tma_load B -> sB[0] via tmB; wgmma acc += ... }
//         params ..., tmA, tmB (CUtensorMap by value)  sA/sB aligned 1024
//         kernel.tensorMaps: tmA box {BOX_COLS, rows of the stored tile}, swizzle = the tile's span,
//         L2 promotion 256 bytes (operand tiles are re-read by every CTA of their tile row or column:
//         a miss fetches the whole 256-byte L2 line pair, the next k-tile's half of it included)
// The box and swizzle follow heddle_sm90.cuh TmaTile: SW = min(128, cols * element size) bytes,
// BOX_COLS = SW / element size, one box per BOX_COLS columns.
#include "heddle/lower/lower.h"

namespace heddle::passes {

namespace {

kir::Kernel::TensorMapSpec specFor(const kir::Buffer& b, const std::string& param, const std::string& operand,
                                   bool batched) {
  const int esize = dtypeBytes(b.dtype);
  const int sw = b.cols * esize >= 128 ? 128 : b.cols * esize;
  kir::Kernel::TensorMapSpec s;
  s.param = param;
  s.operand = operand;
  s.boxCols = sw / esize;
  s.boxRows = b.rows;
  s.swizzle = sw;
  s.batched = batched;
  s.l2Promotion = 256;
  return s;
}

}  // namespace

void setupTmaOperands(LowerContext& c) {
  auto& t = c.tiling;
  auto& h = t.rolePipeline;
  auto& k = c.kernel;
  if (!h.tcgen05) k.tile.mma = MmaKind::Wgmma;  // tcgen05: the MMA is tcgen05.mma (passes/tcgen05_specialize.cpp)
  k.tile.coop = h.coop;
  k.tile.mmaWarpgroups = h.coop ? h.mmaWarpgroups : 1;
  k.tile.mmaWarpBase = h.warpSpecialized ? 4 : 0;
  k.name += h.tcgen05 ? "_sm100" : "_sm90";
  for (auto& b : k.buffers) {
    if (b->role != "A" && b->role != "B") continue;
    b->align = 1024;  // swizzle patterns start on 1024-byte boundaries: descriptors carry base offset 0
    kir::Param p;
    p.kind = kir::Param::TensorMap;
    p.name = b->role == "A" ? "tmA" : "tmB";
    p.tensor = b->role == "A" ? t.a->name : t.b->name;
    k.params.push_back(p);
    // B of a grouped matmul ([E, K, N]): a 3-D map over every expert, the tile's expert its third coordinate
    const bool batchedB = (t.batched || t.grouped) && t.batchedB;
    k.tensorMaps.push_back(specFor(*b, p.name, b->role, b->role == "A" ? t.batched : batchedB));
  }
  kir::walkMut(k.body, [&](kir::Node& n) {
    if (n.kind == kir::NodeKind::TileLoad) {
      auto& l = static_cast<kir::TileLoad&>(n);
      l.tensorMap = l.dst->role == "A" ? "tmA" : "tmB";
    } else if (n.kind == kir::NodeKind::MmaStep) {
      if (!h.tcgen05) static_cast<kir::MmaStep&>(n).kind = MmaKind::Wgmma;
    }
  });
  // the first wgmma of a tile overwrites the accumulators (scale-d = 0): a tile needs a k step
  std::string cached = t.aCache ? t.aCache->name : "the k loop";
  k.tripChecks.push_back({"k", ceilDiv(kir::IExpr::var("K"), kir::IExpr(t.bk)), 1, cached,
                          "a TMA + wgmma pipeline runs at least one k-tile (K >= 1)"});
}

}  // namespace heddle::passes
