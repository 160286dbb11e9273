// mx_scale_ring: an mx32 (MXFP8) matmul's scale chunks travel through the operand ring (docs/fp8.md "MX formats",
// "The kernel"): each k-tile's TMA item carries, beside the A and B tiles, the 512-byte blocked scale chunk of the
// tile's 128 rows of A and the bn/128 chunks of its rows of B for that k tile, so the MMA role copies them into
// tensor memory (tcgen05.cp, MmaSm100Mx) from its ring slot.
//
// The scale tensors are torch's blocked layout as the definition takes them ([round_up(rows, 128), Kp] e8m0,
// Kp = round_up(K/32, 4), contiguous; checked at launch by core/inputs.py): chunk (row block rb, k tile kt) is
// the 512 bytes at (rb * Kp / 4 + kt) * 512, i.e. rows 4kt..4kt+3 of 128 bytes in row block rb. The kernel reads
// them through a 3-D tensor map over those bytes: dim 0 the 128 bytes of a row (stride 1), dim 1 the Kp rows of
// a row block (stride 128), dim 2 the row blocks (stride 128 * Kp); a box {128, 4, 1} at (0, 4kt, m0/128) is
// A's chunk, a box {128, 4, bn/128} at (0, 4kt, n0/128) B's chunks, landing one after the other in the slot
// (512 bytes apart, as MmaSm100Mx reads them). Why a tensor copy and not the 1-D cp.async.bulk: a 256-wide
// tile's two B chunks are Kp * 128 bytes apart (two 1-D copies), and where the tile's second 128 rows start past
// N (n0 + 128 >= N) there is no second chunk in the tensor at all: the box's slice past dim 2's extent is
// out of bounds, which TMA fills with zeros (a scale code 0, 2^-127, never the NaN code 0xFF) and still counts
// in the complete_tx bytes (PTX ISA "cp.async.bulk.tensor": out-of-bound elements are filled, the transaction
// is the whole box; the interpreter's tma_load in interp/rt/hrt_ptx.h does the same), so the stage's expect-tx
// stays constant with no branch. Alignment (CUDA driver API cuTensorMapEncodeTiled): the global address 16-byte
// aligned (core/inputs.py refuses a scale tensor that is not), strides 128 and 128 * Kp multiples of 16, the
// inner box 128 bytes (a multiple of 16, no swizzle), box extents <= 256; the shared destination 128-byte aligned
// (align = 128 here; tcgen05.cp's descriptor needs 16: PTX ISA 9.7.16.4.1).
//
// The buffers join the load -> mma edge of the role graph (the MMA step reads them, analysis/role_graph.cpp), so
// the ring's expect-tx counts their bytes (512 + 512 * bn/128 per stage: role_pipeline.cpp operandRingSpec) and the
// slot's full / empty barriers order them with sA and sB: the stage is released by the tcgen05.commit after the
// k tile's copies and MMAs (a copy -> mma pair of one thread, tracked by the one commit: 9.7.16.6.2).
//
// Before (build_matmul_loops, TMA operands):
//   for kt { tma_load A -> sA[kt] via tmA; tma_load B -> sB[kt] via tmB; mma acc += sA x sB }
// After:
//   for kt { tma_load A -> sA[kt] via tmA; tma_load B -> sB[kt] via tmB;
//            tma_load sfa -> sSFA[kt] via tmSFA at (0, 4*kt, m0/128)        # {128, 4, 1} box: one chunk
//            tma_load sfb -> sSFB[kt] via tmSFB at (0, 4*kt, n0/128)        # {128, 4, bn/128}: bn/128 chunks
//            mma acc += sA x sB }
//   buffers sSFA: e8m0 [stages][4 x 128], role mx_scale_a; sSFB: e8m0 [stages][4*bn/128 x 128], role mx_scale_b;
//   params tmSFA, tmSFB (3-D tensor maps over the scale inputs)
// The TileLoad's row0 is the row inside the row block (4 kt) and col0 the row block (the map's third coordinate).
//
// Runs when: mx32-scaled matmuls (their tcgen05 role-pipeline kernel: schedule/mx_scales.cpp).
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

void mxScaleRing(LowerContext& c) {
  requireWhen(c, "mx_scale_ring");
  auto& k = c.kernel;
  auto& t = c.tiling;
  if (t.bk != 128 || t.bm != 128 || t.bn % 128)
    fail<HeddleError>("mx_scale_ring: ", k.name, " has a ", t.bm, " x ", t.bn, " x ", t.bk,
                      " tile; the scale chunks need 128 x (128 | 256) x 128 (schedule/mx_scales.cpp)");
  const Expr* e = t.mm->definition;
  const build::OperandLoad A = build::tmaLoadOfA(k, "mx_scale_ring");
  size_t at = A.at;

  const kir::IExpr kt = kir::IExpr::var("kt");
  auto add = [&](const char* name, const char* role, int chunks, const TensorView* scale, const char* map,
                 const char* origin) {
    auto b = std::make_unique<kir::Buffer>();
    b->name = name;
    b->role = role;
    b->memory = MemoryType::Shared;
    b->dtype = DType::E8M0;
    b->stages = A.sA->stages;
    b->rows = 4 * chunks;  // 4 rows of 128 bytes a chunk
    b->cols = 128;
    b->align = 128;  // a TMA destination (PTX ISA "cp.async.bulk.tensor"); tcgen05.cp's descriptor needs 16
    b->sourceTensor = scale->name;
    kir::Buffer* buf = k.addBuffer(std::move(b));

    auto l = std::make_unique<kir::TileLoad>();
    l->dst = buf;
    l->stage = A.load->stage;
    l->iter = A.load->iter;
    l->src = scale->name;
    l->row0 = kt * 4;                                     // rows 4kt..4kt+3 of the row block: chunk kt
    l->col0 = kir::IExpr::var(origin) / kir::IExpr(128);  // the tile's first 128-row block (dim 2)
    l->rowsBound = ceilDiv(kir::IExpr::var("K"), kir::IExpr(128)) * 4;
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
    s.boxRows = 4;
    s.boxDepth = chunks;
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
