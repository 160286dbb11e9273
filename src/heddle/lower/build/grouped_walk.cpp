// The grouped matmul's tile walk: parameters and grid (grouped_walk.h).
#include "heddle/lower/build/grouped_walk.h"

namespace heddle::passes::grouped {

static kir::Param scalar(const std::string& n, kir::Param::Kind kind) {
  kir::Param p;
  p.kind = kind;
  p.name = n;
  return p;
}

void buildGroupedWalk(LowerContext& c) {
  auto& t = c.tiling;
  auto& k = c.kernel;
  std::vector<kir::Param> params;
  for (auto& p : k.params) {
    if (p.name == "M") {  // M is the group's end row inside the kernel; the launch gives the total rows
      params.push_back(scalar("tokens", kir::Param::Int32));
      continue;
    }
    params.push_back(p);
    if (p.name == "B") {
      kir::Param offs = scalar("offs", kir::Param::IndexPtr);
      offs.tensor = t.groupOffsets;
      params.push_back(offs);
    }
    if (p.name == "K") params.push_back(scalar("E", kir::Param::Int32));
    // w[e] of each member (a gated pair's second member: B1, ldb1 -> batch_stride_b1)
    if (p.name.rfind("ldb", 0) == 0) params.push_back(scalar("batch_stride_b" + p.name.substr(3), kir::Param::Int64));
  }
  k.params = std::move(params);
  k.name += "_grouped";
  k.tile.grouped = true;
  // sum_e ceil(rows_e / bm) <= sum_e (rows_e / bm + 1) <= tokens / bm + E: the surplus CTAs exit
  kir::IExpr mTiles = ceilDiv(kir::IExpr::var("tokens"), t.bm) + kir::IExpr::var("E");
  (t.swapBlocks ? k.launch.gridX : k.launch.gridY) = mTiles;
}

void buildMaskedWalk(LowerContext& c) {
  auto& t = c.tiling;
  auto& k = c.kernel;
  std::vector<kir::Param> params;
  for (auto& p : k.params) {
    // M is the expert's row count inside the kernel; the launch gives the slab's rows (the grid's M)
    params.push_back(p.name == "M" ? scalar("max_tokens", kir::Param::Int32) : p);
    if (p.name == "B") {
      kir::Param counts = scalar("counts", kir::Param::IndexPtr);
      counts.tensor = t.groupOffsets;
      params.push_back(counts);
    }
  }
  k.params = std::move(params);
  k.name += "_masked";
  k.tile.masked = true;
}

}  // namespace heddle::passes::grouped
