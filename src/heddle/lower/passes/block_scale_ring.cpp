// block_scale_ring: a block-scaled matmul's scale_a travels through the operand ring (docs/fp8.md "The
// scales' path"): each k-tile's TMA item carries, beside the A and B tiles, the BM scale_a values of the tile's
// rows for the k-block of 128 the k-tile lies in, so the MMA role's promotion reads them from shared memory.
//
// scale_a is taken M-major (element (m, kb) at m + kb * ld, ld a multiple of 4: 16-byte TMA strides, CUDA
// driver API cuTensorMapEncodeTiled "globalStrides"; DeepGEMM's sm90_fp8_gemm_1d2d loads its sfa per stage
// the same way, from its "TMA-aligned" M-major layout; torch's BlockWise1x128 scale_a is M-major too): one box
// {BM along M, 1 k-block} of an [ceil(K/128), M] map, its rows past M zero-filled (PTX ISA "Tensors",
// out-of-bound access). The box's BM * 4 bytes join the slot's expect-tx (warp_specialize sums the edge's
// buffers), and the role graph puts sSA on the load -> mma edge (the MMA role's promotion reads it), so the
// ring's full and empty barriers order it with sA and sB: nothing new to wait on, one constraint to keep --
// the slot may be released only after the promotion read it (block_scale_promotion places the promotion
// before the release of the k-tile).
//
// Before (build_matmul_loops, TMA operands):
//   for kt { tma_load A -> sA[kt] via tmA; tma_load B -> sB[kt] via tmB; mma acc += sA x sB }
// After:
//   for kt { tma_load A -> sA[kt] via tmA; tma_load B -> sB[kt] via tmB;
//            tma_load scale_a -> sSA[kt] via tmSA at (kb = kt * bk / 128, m0)   # [1, BM] f32 box
//            mma acc += sA x sB }
//   buffer sSA: f32 [stages][BM], role scale_a; param tmSA (tensor map over the scale_a input, box {BM, 1})
//
// Runs when: block-scaled matmuls (their role-pipeline wgmma kernel).
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

void blockScaleRing(LowerContext& c) {
  requireWhen(c, "block_scale_ring");
  auto& k = c.kernel;
  auto& t = c.tiling;
  const Expr* e = t.mm->definition;
  const build::OperandLoad A = build::tmaLoadOfA(k, "block_scale_ring");
  kir::Buffer* sA = A.sA;
  kir::TileLoad* loadA = A.load;
  kir::Block* loop = A.loop;
  const size_t at = A.at;

  auto b = std::make_unique<kir::Buffer>();
  b->name = "sSA";
  b->role = "scale_a";
  b->memory = MemoryType::Shared;
  b->dtype = DType::F32;
  b->stages = sA->stages;
  b->rows = 1;
  b->cols = t.bm;
  b->align = 128;  // a TMA destination: 16-byte aligned (PTX ISA "cp.async.bulk.tensor")
  kir::Buffer* sSA = k.addBuffer(std::move(b));

  auto l = std::make_unique<kir::TileLoad>();
  l->dst = sSA;
  l->stage = loadA->stage;
  l->iter = loadA->iter;
  l->src = "scale_a";  // the simulator's copy of the M-major storage [ceil(K/128), M]
  const kir::IExpr kt = kir::IExpr::var("kt");
  l->row0 = kt * t.bk / kScaleBlock;  // the k-block of this k-tile (bk divides 128)
  l->col0 = loadA->row0;              // the tile's first row
  l->rowsBound = ceilDiv(kir::IExpr::var("K"), kir::IExpr(kScaleBlock));
  l->colsBound = kir::IExpr::var("M");
  l->ld = "M";  // the simulator's storage: unpadded M-major (the kernel reads through the map)
  l->kind = LoadKind::TmaLoad;
  l->tensorMap = "tmSA";
  loop->stmts.insert(loop->stmts.begin() + at + 1, std::move(l));

  kir::Param p;
  p.kind = kir::Param::TensorMap;
  p.name = "tmSA";
  p.tensor = e->scaleA->name;
  k.params.push_back(p);
  kir::Kernel::TensorMapSpec s;  // one unswizzled [1, BM] box of the M-major [ceil(K/128), M] storage
  s.param = "tmSA";
  s.operand = e->scaleA->name;  // an input by name (heddle/core/tma.py maps it M-major: param tmSA)
  s.boxCols = t.bm;
  s.boxRows = 1;
  s.swizzle = 0;
  s.batched = false;
  s.l2Promotion = 128;
  k.tensorMaps.push_back(s);
}

}  // namespace heddle::passes
