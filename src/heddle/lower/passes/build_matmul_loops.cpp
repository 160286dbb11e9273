// build_matmul_loops: the matmul's loop nest as kernel IR, before any pipelining or syncs.
//
// Before: MatmulTiling (e.g. 128x128x32, warps 2x2, A row-major, B row-major, cp.async vec 8)
// After:
//   kernel heddle_mm_nn_f16_128x128x32(A, B, ..., D, M, N, K, lda, ldb, ldd)
//     buffer sA: shared f16[1][128][32]   buffer sB: shared f16[1][32][128]   buffer acc: registers
//     for kt in [0, ceil(K/32)) serial {
//       cp_async A -> sA[0] (k-tile kt); cp_async B -> sB[0] (k-tile kt); cp.async.commit_group
//       mma acc += sA[0] x sB[0] (k-tile kt)
//     }
//     epilogue store -> D in column pairs     (mma.sync targets: the fragment holds column pairs)
// Tiles are described in storage order (cols contiguous), so a transposed operand is just a
// different tile shape and origin; out-of-bounds elements are zero-filled by the copy, which is
// what makes ragged M, N and K work without a separate tail loop.
//
// A matmul group (P members sharing A, e.g. SwiGLU's gate B and up B1; MatmulTiling::parts): the CTA's
// n0 is blockIdx * bn / P in output columns, and warp column w's WN accumulator columns hold WN / P
// columns of each member, so B's stage is filled by one TileLoad node (one write of the stage, as the sync
// planner sees it) with P * warpsN parts, each from its member's own tensor (bn 128, 2 warp columns, P 2):
//   cp_async B|B1|B|B1 -> sB[0]:  B  cols n0 + 0 .. +32  -> stage cols 0 .. 32     warp column 0, member 0
//                                 B1 cols n0 + 0 .. +32  -> stage cols 32 .. 64    warp column 0, member 1
//                                 B  cols n0 + 32 .. +64 -> stage cols 64 .. 96    warp column 1, member 0 ...
// (transposed B: row slices of the [bn][bk] stage). Every member's output column j of a warp then sits
// in the same thread as the others' (fragment fn + p * FN / P): the epilogue combines them in registers.
//
// A grouped matmul (MatmulTiling::grouped): the same loop nest, with the grouped tile walk's parameters and
// grid (lower/build/grouped_walk.h): M becomes the group's end row, B the expert's matrix. The masked layout
// (MatmulTiling::groupMasked): the batched loop nest, with M the expert's row count counts[batch_idx].
//
// Runs when: always.
#include <sstream>

#include "heddle/lower/build/grouped_walk.h"
#include "heddle/lower/lower.h"

namespace heddle::passes {

using kir::IExpr;

void buildMatmulLoops(LowerContext& c) {
  auto& t = c.tiling;
  auto& k = c.kernel;
  std::ostringstream name;
  name << "heddle_mm_" << (t.transA ? "t" : "n") << (t.transB ? "t" : "n") << "_" << dtypeName(t.a->dtype) << "_"
       << t.bm << "x" << t.bn << "x" << t.bk << "_w" << t.warpsM << "x" << t.warpsN << "_s" << t.stages << "p"
       << t.prefetch << "_" << loadKindName(t.loadKind) << t.vecA << "v" << t.vecB;
  k.name = name.str();
  k.tile = {t.bm, t.bn, t.bk, t.warpsM, t.warpsN, !t.transA, t.transB, t.a->dtype, t.batched, t.swapBlocks};
  k.tile.inDtypeB = t.b->dtype;
  // the register MMA of this target (passes/tma_operands.cpp makes it wgmma / tcgen05 on the role pipeline)
  k.tile.mma = c.target.mma.has(MmaKind::Mfma)   ? MmaKind::Mfma
               : c.target.mma.has(MmaKind::Wmma) ? MmaKind::Wmma
                                                 : MmaKind::MmaSync;

  auto ptr = [](const std::string& n, DType dt, const std::string& tensor, bool isConst) {
    kir::Param p;
    p.kind = kir::Param::TensorPtr;
    p.name = n;
    p.dtype = dt;
    p.tensor = tensor;
    p.isConst = isConst;
    return p;
  };
  auto scalar = [](const std::string& n, kir::Param::Kind kind) {
    kir::Param p;
    p.kind = kind;
    p.name = n;
    return p;
  };
  k.params.push_back(ptr("A", t.a->dtype, t.a->name, true));
  k.params.push_back(ptr("B", t.b->dtype, t.b->name, true));
  auto bParam = [](int p) { return p ? "B" + std::to_string(p) : std::string("B"); };
  auto ldbParam = [](int p) { return p ? "ldb" + std::to_string(p) : std::string("ldb"); };
  for (int p = 1; p < t.parts; ++p) k.params.push_back(ptr(bParam(p), t.bs[p]->dtype, t.bs[p]->name, true));
  for (auto* n : {"M", "N", "K"}) k.params.push_back(scalar(n, kir::Param::Int32));
  for (auto* n : {"lda", "ldb"}) k.params.push_back(scalar(n, kir::Param::Int64));
  for (int p = 1; p < t.parts; ++p) k.params.push_back(scalar(ldbParam(p), kir::Param::Int64));
  if (t.parts > 1) {
    k.name += "_g" + std::to_string(t.parts);  // a group kernel never shares a name with a single matmul
    k.tile.parts = t.parts;
  }
  if (t.batched) {
    k.params.push_back(scalar("batch_stride_a", kir::Param::Int64));
    k.params.push_back(scalar("batch_stride_b", kir::Param::Int64));
  }

  auto makeBuf = [&](const std::string& n, const std::string& role, int rows, int cols, TensorView* src) {
    auto b = std::make_unique<kir::Buffer>();
    b->name = n;
    b->role = role;
    b->memory = MemoryType::Shared;
    b->dtype = role == "B" ? t.b->dtype : t.a->dtype;  // mixed e4m3 / e5m2: each tile its operand's type
    b->stages = t.stages;
    b->rows = rows;
    b->cols = cols;
    b->align = 128;  // swizzled tiles
    b->sourceTensor = src->name;
    return k.addBuffer(std::move(b));
  };
  // storage-order tiles: A is [M][K] (k contiguous) unless transposed; B is [K][N] unless transposed
  auto* sA = t.transA ? makeBuf("sA", "A", t.bk, t.bm, t.aCache) : makeBuf("sA", "A", t.bm, t.bk, t.aCache);
  auto* sB = t.transB ? makeBuf("sB", "B", t.bn, t.bk, t.bCache) : makeBuf("sB", "B", t.bk, t.bn, t.bCache);
  auto acc = std::make_unique<kir::Buffer>();
  acc->name = "acc";
  acc->role = "acc";
  acc->memory = MemoryType::Local;
  acc->dtype = DType::F32;
  acc->rows = t.bm;
  acc->cols = t.bn;
  auto* accB = k.addBuffer(std::move(acc));

  k.body.add<kir::Alloc>(sA);
  k.body.add<kir::Alloc>(sB);
  k.body.add<kir::Alloc>(accB);

  IExpr kt = IExpr::var("kt"), m0 = IExpr::var("m0"), n0 = IExpr::var("n0");
  IExpr M = IExpr::var("M"), N = IExpr::var("N"), K = IExpr::var("K");
  auto* loop = k.body.add<kir::ForLoop>();
  loop->var = "kt";
  loop->start = 0;
  loop->stop = ceilDiv(K, t.bk);
  loop->stage = kir::LoopStage::Serial;
  loop->tripsVar = "K", loop->tileK = t.bk;  // ceil(K / bk) k-tiles: what the sync planner walks
  if (t.stages > 1) {
    loop->cbStages = t.stages;
    loop->cbPrefetch = t.prefetch;
  }
  auto addLoad = [&](kir::Buffer* dst, const std::string& src, IExpr r0, IExpr c0, IExpr rb, IExpr cb,
                     const std::string& ld, const std::string& bstride, int vec) {
    auto* l = loop->body.add<kir::TileLoad>();
    l->dst = dst;
    l->stage = 0;
    l->iter = kt;
    l->src = src;
    l->row0 = r0;
    l->col0 = c0;
    l->rowsBound = rb;
    l->colsBound = cb;
    l->ld = ld;
    l->batchStride = bstride;
    l->kind = t.loadKind == LoadKind::CpAsync || t.loadKind == LoadKind::TmaLoad ? t.loadKind : LoadKind::Plain;
    l->vec = vec;
    if (t.loadKind == LoadKind::AsyncLds) {  // AMD LDS DMA: one dword per chunk, no commit (vmcnt)
      l->kind = LoadKind::AsyncLds;
      l->vec = 4 / dtypeBytes(t.a->dtype);
    }
  };
  IExpr k0 = kt * t.bk;
  std::string bsa = t.batched ? "batch_stride_a" : "", bsb = t.batched ? "batch_stride_b" : "";
  if (t.transA) addLoad(sA, "A", k0, m0, K, M, "lda", bsa, t.vecA);
  else addLoad(sA, "A", m0, k0, M, K, "lda", bsa, t.vecA);
  if (t.transB) addLoad(sB, "B", n0, k0, N, K, "ldb", bsb, t.vecB);
  else addLoad(sB, "B", k0, n0, K, N, "ldb", bsb, t.vecB);
  if (t.parts > 1) {  // one node, one part per warp column and member
    auto* l = static_cast<kir::TileLoad*>(loop->body.stmts.back().get());
    const int wn = t.bn / t.warpsN, slice = wn / t.parts;
    l->partAxis = t.transB ? 0 : 1;
    l->partExtent = slice;
    for (int w = 0; w < t.warpsN; ++w)
      for (int p = 0; p < t.parts; ++p) l->parts.push_back({bParam(p), ldbParam(p), w * slice, w * wn + p * slice});
  }
  if (t.loadKind == LoadKind::CpAsync) loop->body.add<kir::Sync>(kir::SyncKind::CpAsyncCommit);
  auto* mma = loop->body.add<kir::MmaStep>();
  mma->a = sA;
  mma->b = sB;
  mma->acc = accB;
  mma->stageA = 0;
  mma->stageB = 0;
  mma->iter = kt;
  mma->kind = k.tile.mma;
  auto* st = k.body.add<kir::EpilogueStore>();
  st->acc = accB;
  st->out = "D";
  // an mma.sync fragment (MmaSm80) holds column pairs; AMD's MFMA / WMMA registers walk rows, and the
  // wgmma / tcgen05 kernels (hopper.enabled) print their own epilogues
  st->columnPairs = c.target.mma.has(MmaKind::MmaSync) && !t.rolePipeline.enabled;

  k.launch.threads = t.threads();
  IExpr gm = ceilDiv(M, t.bm), gn = ceilDiv(N, t.bn / t.parts);
  k.launch.gridX = t.swapBlocks ? gm : gn;
  k.launch.gridY = t.swapBlocks ? gn : gm;
  k.launch.gridZ = t.batched ? IExpr::var("batch") : IExpr(1);
  if (t.grouped && t.groupMasked) grouped::buildMaskedWalk(c);  // the masked layout (build/grouped_walk.h)
  else if (t.grouped) grouped::buildGroupedWalk(c);  // the device walk over the experts' m tiles (build/grouped_walk.h)
  if (t.rolePipeline.enabled) setupTmaOperands(c);   // tensor maps, wgmma, 1024-byte tiles (tma_operands.cpp)
}

}  // namespace heddle::passes
