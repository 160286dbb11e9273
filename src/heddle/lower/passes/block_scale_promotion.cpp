// block_scale_promotion: a block-scaled matmul's MMA role accumulates each promotion interval of K in a
// temporary set of wgmma accumulators and promotes it into the f32 accumulators in registers, scaled by
// the interval's block scales (docs/fp8.md "Block scales and promotion"; schedule/block_scales.cpp cites
// DeepGEMM, the DeepSeek-V3 report and CUTLASS's promotion interval).
//
// scale_a reaches the MMA warpgroups through the operand ring (block_scale_ring.cpp): the promotion at the
// interval's last k-tile (item i) reads the BM values of slot sSA[i % s], landed with item i's A and B under
// the full barrier the k-tile already waited for. The slot of item i is released by the arrive on
// empty of k-tile i + keep (after wgmma.wait_group(keep)); with keep = 0 that is this k-tile's own arrive, so
// the promotion is placed BEFORE the k-tile's release: the release then follows the read in every schedule
// (the one sync constraint the ring adds; the arrive's sync-plan entry says so, origin block_scale_promotion).
// scale_b (one value per 128 columns: a tile's bn = 64 or 128 columns lie in one block) is read by each MMA thread from
// global memory at the promotion: a read-only input no thread writes, one warp-uniform load per promotion,
// and a single f32 per k-block is below TMA's 16-byte box minimum. The other ordering the promotion needs
// is the one between the asynchronous wgmma writing `tmp` and the ordinary reads of `tmp`: the
// wgmma.wait_group(0) placed here, with its sync-plan entry. The next interval's first wgmma overwrites `tmp`
// (scale-d = 0, reset by the promotion) after the next k-tile's wgmma.fence.
//
// Before (warp_specialize, role mma, per tile; P = promotion k-tiles = promotion(k) / bk):
//   alloc acc
//   for kt { wait full[g%s]; wgmma.fence acc; wgmma acc += sA x sB; commit; wait_group(keep); arrive empty }
//   [wait_group(0)]; epilogue store (acc)
// After:
//   alloc acc; alloc tmp                                   # tmp: scale-d = 0 on its first wgmma
//   for kt { wait full[g%s]; wgmma.fence tmp; wgmma tmp += sA x sB; commit; wait_group(keep)
//            if ((kt+1) % P == 0 || kt+1 == nk) {          # the interval's last k-tile (or K's); P = 1: always
//              wait_group(0)                               # RAW tmp (wgmma -> promotion)
//              promote acc (= 0 if kt < P) += tmp * sSA[g%s][m - m0] * scale_b[n/128, kb]; tmp scale-d = 0 }
//            arrive empty }                                # the release after the promotion's read of sSA
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
  kir::Buffer *acc = nullptr, *sSA = nullptr;
  for (auto& b : k.buffers) {
    if (b->role == "acc") acc = b.get();
    if (b->role == "scale_a") sSA = b.get();
  }
  kir::ForLoop* kl = mmaKLoop(k.body);
  if (!acc || !kl || !sSA) fail<HeddleError>("block_scale_promotion: no MMA role k loop or scale slots in ", k.name);
  IExpr slot;                              // the ring slot of this k-tile's item: the wgmma's stage of sA
  size_t release = kl->body.stmts.size();  // the k-tile's arrive on the empty barrier
  for (size_t i = 0; i < kl->body.stmts.size(); ++i) {
    auto& n = *kl->body.stmts[i];
    if (n.kind == kir::NodeKind::MmaStep) slot = static_cast<kir::MmaStep&>(n).stageA;
    if (n.kind == kir::NodeKind::Sync && static_cast<kir::Sync&>(n).sync == kir::SyncKind::MbarArrive) release = i;
  }
  if (release == kl->body.stmts.size())
    fail<HeddleError>("block_scale_promotion: the MMA role's k loop of ", k.name, " releases no ring slot");
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

  kir::Param p;  // scale_b from global memory (scale_a comes through the ring: tmSA)
  p.kind = kir::Param::TensorPtr;
  p.name = "scale_b";
  p.dtype = DType::F32;
  p.tensor = e->scaleB->name;
  k.params.push_back(p);
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
  pr->scaleA = sSA->name;
  pr->scaleSmem = sSA;
  pr->scaleStage = slot;
  pr->scaleB = "scale_b";
  pr->kBlock = kt * t.bk / kScaleBlock;
  pr->first = kt < pk;
  pr->kBlocks = ceilDiv(var("K"), kScaleBlock);
  at->thenBody.stmts.push_back(std::move(pr));
  // before the k-tile's release: the slot's scale_a is read before any arrive can hand the slot back
  auto& rel = static_cast<kir::Sync&>(*kl->body.stmts[release]);
  if (rel.reason >= 0) {
    auto& why = k.syncPlan.entries[rel.reason];
    why.origin = {"block_scale_promotion", "mbarrier ring (release after the promotion)"};
    why.hazards += ", WAR " + sSA->name + " (promotion -> load)";
    why.mechanism += "; placed after the promotion, which reads scale_a from " + sSA->name + "[" + slot.str() +
                     "] (block scales through the ring): the slot of item i is released by the arrive of k-tile i + "
                     "keep, at the earliest (keep = 0) by this one, so the read precedes the release in every schedule";
  }
  std::vector<kir::NodePtr> body;
  if (pk == 1) {  // every k-tile ends an interval: no condition
    for (auto& n : at->thenBody.stmts) body.push_back(std::move(n));
  } else {
    body.push_back(std::move(at));
  }
  kl->body.stmts.insert(kl->body.stmts.begin() + release, std::make_move_iterator(body.begin()),
                        std::make_move_iterator(body.end()));

  k.name += "_bs128p" + std::to_string(promotionInterval(t.mm));
  k.syncPlan.summary += "; block scales " + std::string(scaleKindName(e->scaleKind)) + " (" + e->scaleA->name + ", " +
                        e->scaleB->name + "; " + e->scaleA->name + " through the operand ring: TMA into " + sSA->name +
                        ", " + std::to_string(sSA->bytesPerStage()) +
                        " bytes of each slot's expect-tx, read by the promotion "
                        "before the slot's release; " +
                        e->scaleB->name + " read by the MMA threads from global memory), promotion every " +
                        std::to_string(promotionInterval(t.mm)) + " of K: wgmma.wait_group(0) then tmp -> acc";
}

}  // namespace heddle::passes
