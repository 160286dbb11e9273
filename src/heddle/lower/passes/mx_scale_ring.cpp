// mx_scale_ring: an mx32 (MXFP8) or nv16 (NVFP4) matmul's scale chunks travel through the operand ring (docs/fp8.md
// "MX formats", "The kernel"): each k-tile's TMA item carries, beside the A and B tiles, the blocked scale chunks of
// the tile's 128 rows of A and of its rows of B for that k tile, so the MMA role copies them into tensor memory
// (tcgen05.cp, MmaSm100Mx / MmaSm100Nvf4) from its ring slot. A k tile is 128 elements of K in both formats:
// MXFP8 one 512-byte chunk per 128 rows (four scale blocks of 32), NVFP4 two (eight blocks of 16: one chunk per
// K = 64 instruction), MXFP4 one (four blocks of 32, two per K = 64 instruction) -- c = mxKTile(matmul).chunks. The
// kernel name gets the format's token (_mx32, _nv16, _mxf4).
//
// The scale tensors are torch's blocked layout as the definition takes them ([round_up(rows, 128), Kp] bytes, Kp =
// round_up(K/32, 4) e8m0 or round_up(K/16, 4) ue4m3, contiguous; checked at launch by core/inputs.py): chunk (row
// block rb, chunk j) is the 512 bytes at (rb * Kp / 4 + j) * 512, i.e. rows 4j..4j+3 of 128 bytes in row block rb,
// and k tile kt's chunks are j = c*kt .. c*kt + c-1, rows 4c*kt .. 4c*kt + 4c-1: one run of 512c bytes. The kernel
// reads them through a 3-D tensor map over those bytes: dim 0 the 128 bytes of a row (stride 1), dim 1 the Kp rows
// of a row block (stride 128), dim 2 the row blocks (stride 128 * Kp); a box {128, 4c, 1} at (0, 4c*kt, m0/128) is
// A's chunks, a box {128, 4c, bn/128} at (0, 4c*kt, n0/128) B's, landing one after the other in the slot (A's chunk
// j at 512j; B's row block q, chunk j at 512c*q + 512j: as MmaSm100Mx / MmaSm100Nvf4 read them). Why a tensor copy
// and not the 1-D cp.async.bulk: a 256-wide tile's two row blocks of B are Kp * 128 bytes apart (two 1-D copies),
// and where the tile's second 128 rows start past N (n0 + 128 >= N) there is no second row block in the tensor at
// all: the box's slice past dim 2's extent is out of bounds, which TMA fills with zeros (a scale code 0: 2^-127 in
// e8m0, 0 in ue4m3, never a NaN code) and still counts in the complete_tx bytes (PTX ISA "cp.async.bulk.tensor":
// out-of-bound elements are filled, the transaction is the whole box; the interpreter's tma_load in
// interp/rt/hrt_ptx.h does the same), so the stage's expect-tx stays constant with no branch. Likewise an NVFP4 K
// whose K/64 is odd (Kp / 4 odd) has no second chunk for its last k tile: rows past Kp, zero fill. Alignment (CUDA
// driver API cuTensorMapEncodeTiled): the global address 16-byte aligned (core/inputs.py refuses a scale tensor that
// is not), strides 128 and 128 * Kp multiples of 16, the inner box 128 bytes (a multiple of 16, no swizzle), box
// extents <= 256; the shared destination 128-byte aligned (align = 128 here; tcgen05.cp's descriptor needs 16: PTX
// ISA 9.7.16.4.1).
//
// The buffers join the load -> mma edge of the role graph (the MMA step reads them, analysis/role_graph.cpp), so
// the ring's expect-tx counts their bytes (512c + 512c * bn/128 per stage: role_pipeline.cpp operandRingSpec) and
// the slot's full / empty barriers order them with sA and sB: the stage is released by the tcgen05.commit after the
// k tile's copies and MMAs (a copy -> mma pair of one thread, tracked by the one commit: 9.7.16.6.2).
//
// Before (build_matmul_loops, TMA operands):
//   for kt { tma_load A -> sA[kt] via tmA; tma_load B -> sB[kt] via tmB; mma acc += sA x sB }
// After (c chunks a k tile):
//   for kt { tma_load A -> sA[kt] via tmA; tma_load B -> sB[kt] via tmB;
//            tma_load sfa -> sSFA[kt] via tmSFA at (0, 4c*kt, m0/128)       # {128, 4c, 1} box: c chunks
//            tma_load sfb -> sSFB[kt] via tmSFB at (0, 4c*kt, n0/128)       # {128, 4c, bn/128}: c * bn/128 chunks
//            mma acc += sA x sB }
//   buffers sSFA: e8m0 | e4m3 [stages][4c x 128], role mx_scale_a; sSFB: [stages][4c*bn/128 x 128], role
//   mx_scale_b; params tmSFA, tmSFB (3-D tensor maps over the scale inputs)
// The TileLoad's row0 is the row inside the row block (4c kt) and col0 the row block (the map's third coordinate).
//
// Runs when: mx32- and nv16-scaled matmuls (MXFP8, MXFP4, NVFP4) (their tcgen05 role-pipeline kernel: schedule/mx_scales.cpp).
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

void mxScaleRing(LowerContext& c) {
  requireWhen(c, "mx_scale_ring");
  auto& k = c.kernel;
  auto& t = c.tiling;
  const Expr* e = t.mm->definition;
  const MxKTile f = mxKTile(e);
  if (t.bk != f.bk || t.bm != 128 || t.bn % 128)
    fail<HeddleError>("mx_scale_ring: ", k.name, " has a ", t.bm, " x ", t.bn, " x ", t.bk, " tile; the ", f.kind,
                      " scale chunks need 128 x (128 | 256) x ", f.bk, " (schedule/mx_scales.cpp)");
  const int rows = 4 * f.chunks;         // rows of 128 bytes a k tile per 128-row block
  k.name += std::string("_") + f.token;  // never the name of the kind::f8f6f4 kernel on the same tile and epilogue
  const build::OperandLoad A = build::tmaLoadOfA(k, "mx_scale_ring");
  size_t at = A.at;

  const kir::IExpr kt = kir::IExpr::var("kt");
  auto add = [&](const char* name, const char* role, int blocks, const TensorView* scale, const char* map,
                 const char* origin) {
    auto b = std::make_unique<kir::Buffer>();
    b->name = name;
    b->role = role;
    b->memory = MemoryType::Shared;
    b->dtype = scale->dtype;  // e8m0 (mx32) | e4m3 read as ue4m3 (nv16)
    b->stages = A.sA->stages;
    b->rows = rows * blocks;  // 4 rows of 128 bytes a chunk, f.chunks chunks per row block
    b->cols = 128;
    b->align = 128;  // a TMA destination (PTX ISA "cp.async.bulk.tensor"); tcgen05.cp's descriptor needs 16
    b->sourceTensor = scale->name;
    kir::Buffer* buf = k.addBuffer(std::move(b));

    auto l = std::make_unique<kir::TileLoad>();
    l->dst = buf;
    l->stage = A.load->stage;
    l->iter = A.load->iter;
    l->src = scale->name;
    l->row0 = kt * rows;  // rows 4c kt .. 4c kt + 4c-1 of the row block: k tile kt's chunks
    l->col0 = kir::IExpr::var(origin) / kir::IExpr(128);  // the tile's first 128-row block (dim 2)
    // Kp = round_up(K / block, 4) rows: a chunk of 4 rows per 128 (mx32) or 64 (nv16) elements of K, i.e. per
    // bk / chunks stored columns
    l->rowsBound = ceilDiv(kir::IExpr::var("K"), kir::IExpr(f.bk / f.chunks)) * 4;
    l->colsBound = ceilDiv(kir::IExpr::var(origin[0] == 'm' ? "M" : "N"), kir::IExpr(128));
    l->kind = LoadKind::TmaLoad;
    l->tensorMap = map;
    A.loop->stmts.insert(A.loop->stmts.begin() + (long)(++at), std::move(l));

    kir::Param p;
    p.kind = kir::Param::TensorMap;
    p.name = map;
    p.tensor = scale->name;
    k.params.push_back(p);
    kir::Kernel::TensorMapSpec s;  // 3-D: {128 bytes, Kp rows, row blocks}; heddle/core/tma.py encodes it
    s.param = map;
    s.operand = scale->name;
    s.boxCols = 128;
    s.boxRows = rows;
    s.boxDepth = blocks;
    s.swizzle = 0;
    s.batched = true;
    s.l2Promotion = 128;
    k.tensorMaps.push_back(s);
  };
  // after the B load (at: A's index; B's follows it in build_matmul_loops' order)
  for (size_t i = at + 1; i < A.loop->stmts.size() && A.loop->stmts[i]->kind == kir::NodeKind::TileLoad; ++i) at = i;
  add("sSFA", "mx_scale_a", 1, e->scaleA, "tmSFA", "m0");
  add("sSFB", "mx_scale_b", t.bn / 128, e->scaleB, "tmSFB", "n0");
}

}  // namespace heddle::passes
