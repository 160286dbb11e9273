// block_scale_promotion: a block-scaled matmul's MMA role accumulates each promotion interval of K in a
// temporary set of wgmma accumulators and promotes it into the f32 accumulators in registers, scaled by
// the interval's block scales (docs/fp8.md "Block scales and promotion"; schedule/block_scales.cpp cites
// DeepGEMM, the DeepSeek-V3 report and CUTLASS's promotion interval).
//
// The scales reach the MMA warpgroups from global memory, read by each MMA thread at the promotion (one
// scale_a value per fragment row, one scale_b value per fragment column block): they are read-only inputs
// that no thread of the kernel writes, so they need no sync of their own, and a thread reads
// 2 * FM + FN / 16 scales per promotion against BK x (BM + BN) operand elements per k-tile -- not worth a
// ring transfer and its expect-tx bytes. The ordering the promotion needs is the one between the
// asynchronous wgmma writing `tmp` and the ordinary reads of `tmp`: the wgmma.wait_group(0) placed here,
// with its sync-plan entry. The next interval's first wgmma overwrites `tmp` (scale-d = 0, reset by the
// promotion) after the next k-tile's wgmma.fence.
//
// Before (warp_specialize, role mma, per tile; P = promotion k-tiles = promotion(k) / bk):
//   alloc acc
//   for kt { wait full[g%s]; wgmma.fence acc; wgmma acc += sA x sB; commit; wait_group(keep); arrive empty }
//   [wait_group(0)]; epilogue store (acc)
// After:
//   alloc acc; alloc tmp                                   # tmp: scale-d = 0 on its first wgmma
//   for kt { wait full[g%s]; wgmma.fence tmp; wgmma tmp += sA x sB; commit; wait_group(keep); arrive empty
//            if ((kt+1) % P == 0 || kt+1 == nk) {          # the interval's last k-tile (or K's); P = 1: always
//              wait_group(0)                               # RAW tmp (wgmma -> promotion)
//              promote acc (= 0 if kt < P) += tmp * scale_a[m, kb] * scale_b[n/128, kb]; tmp scale-d = 0 } }
//   [wait_group(0)]; epilogue store (acc)
// where kb = kt * bk / 128 (an interval never spans two scale blocks: bk | promotion(k) | 128).
//
// Runs when: block-scaled matmuls (their role-pipeline wgmma kernel).
#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

using namespace build;

namespace {

kir::ForLoop* mmaKLoop(kir::Block& b) {
  kir::ForLoop* found = nullptr;
  kir::walkMut(b, [&](kir::Node& n) {
    if (n.kind != kir::NodeKind::For || found) return;
    auto& f = static_cast<kir::ForLoop&>(n);
    for (auto& s : f.body.stmts)
      if (s->kind == kir::NodeKind::MmaStep) found = &f;
  });
  return found;
}

}  // namespace

void blockScalePromotion(LowerContext& c) {
  requireWhen(c, "block_scale_promotion");
  auto& k = c.kernel;
  auto& t = c.tiling;
  const Expr* e = t.mm->definition;
  const int pk = promotionInterval(t.mm) / t.bk;  // k-tiles per promotion (validate_schedule: bk | k)
  kir::Buffer* acc = nullptr;
  for (auto& b : k.buffers)
    if (b->role == "acc") acc = b.get();
  kir::ForLoop* kl = mmaKLoop(k.body);
  if (!acc || !kl) fail<HeddleError>("block_scale_promotion: no MMA role k loop in ", k.name);
  auto tb = std::make_unique<kir::Buffer>(*acc);
  tb->name = "tmp";
  tb->role = "acctmp";
  kir::Buffer* tmp = k.addBuffer(std::move(tb));

  // the wgmma state moves to tmp: its steps, fences, commits and waits (in and after the k loop)
  kir::walkMut(k.body, [&](kir::Node& n) {
    if (n.kind == kir::NodeKind::MmaStep) static_cast<kir::MmaStep&>(n).acc = tmp;
    if (n.kind == kir::NodeKind::Sync) {
      auto& s = static_cast<kir::Sync&>(n);
      const bool wgmma = s.sync == kir::SyncKind::WgmmaFence || s.sync == kir::SyncKind::WgmmaCommit ||
                         s.sync == kir::SyncKind::WgmmaWait;
      if (wgmma && s.buf == acc) s.buf = tmp;
    }
  });
  // tmp lives beside acc, per tile
  kir::walkMut(k.body, [&](kir::Node& n) {
    if (n.kind != kir::NodeKind::For) return;
    auto& stmts = static_cast<kir::ForLoop&>(n).body.stmts;
    for (size_t i = 0; i < stmts.size(); ++i)
      if (stmts[i]->kind == kir::NodeKind::Alloc && static_cast<kir::Alloc&>(*stmts[i]).buf == acc) {
        stmts.insert(stmts.begin() + i + 1, std::make_unique<kir::Alloc>(tmp));
        return;
      }
  });

  for (auto [name, tensor] : {std::pair{"scale_a", e->scaleA}, std::pair{"scale_b", e->scaleB}}) {
    kir::Param p;
    p.kind = kir::Param::TensorPtr;
    p.name = name;
    p.dtype = DType::F32;
    p.tensor = tensor->name;
    k.params.push_back(p);
  }
  const IExpr kt = var("kt"), nk = ceilDiv(var("K"), t.bk);
  auto at = when(eq(min((kt + 1) % pk, nk - kt - 1), 0));
  auto wait =
      makeSync(k, kir::SyncKind::WgmmaWait,
               {"RAW tmp (wgmma -> promotion)", "wgmma writes of tmp", "promotion reads of tmp", "tmp", "",
                "wgmma.wait_group(0): every wgmma of this promotion interval wrote tmp before the MMA threads read it "
                "(the wgmma accumulators are undefined to ordinary instructions until their group retires)"},
               0);
  wait->buf = tmp;
  at->thenBody.stmts.push_back(std::move(wait));
  auto pr = std::make_unique<kir::MmaPromote>();
  pr->acc = acc;
  pr->tmp = tmp;
  pr->scaleA = "scale_a";
  pr->scaleB = "scale_b";
  pr->kBlock = kt * t.bk / kScaleBlock;
  pr->first = kt < pk;
  pr->kBlocks = ceilDiv(var("K"), kScaleBlock);
  at->thenBody.stmts.push_back(std::move(pr));
  if (pk == 1) {  // every k-tile ends an interval: no condition
    for (auto& n : at->thenBody.stmts) kl->body.stmts.push_back(std::move(n));
  } else {
    kl->body.stmts.push_back(std::move(at));
  }

  k.name += "_bs128p" + std::to_string(promotionInterval(t.mm));
  k.syncPlan.summary += "; block scales " + std::string(scaleKindName(e->scaleKind)) + " (" + e->scaleA->name + ", " +
                        e->scaleB->name + " read by the MMA threads from global memory), promotion every " +
                        std::to_string(promotionInterval(t.mm)) + " of K: wgmma.wait_group(0) then tmp -> acc";
}

}  // namespace heddle::passes
