// The grouped matmul's tile walk: parameters and grid (grouped_walk.h).
#include "heddle/lower/build/grouped_walk.h"

namespace heddle::passes::grouped {

void buildGroupedWalk(LowerContext& c) {
  auto& t = c.tiling;
  auto& k = c.kernel;
  std::vector<kir::Param> params;
  auto scalar = [](const std::string& n, kir::Param::Kind kind) {
    kir::Param p;
    p.kind = kind;
    p.name = n;
    return p;
  };
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
    if (p.name == "ldb") params.push_back(scalar("batch_stride_b", kir::Param::Int64));
  }
  k.params = std::move(params);
  k.name += "_grouped";
  k.tile.grouped = true;
  // sum_e ceil(rows_e / bm) <= sum_e (rows_e / bm + 1) <= tokens / bm + E: the surplus CTAs exit
  kir::IExpr mTiles = ceilDiv(kir::IExpr::var("tokens"), t.bm) + kir::IExpr::var("E");
  (t.swapBlocks ? k.launch.gridX : k.launch.gridY) = mTiles;
}

}  // namespace heddle::passes::grouped
