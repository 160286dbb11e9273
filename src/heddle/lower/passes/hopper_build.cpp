// Hopper lowering building blocks (see hopper_build.h).
#include "heddle/lower/passes/hopper_build.h"

#include <algorithm>

#include <sstream>

#include "heddle/sync/plan.h"

namespace heddle::passes::hopper {

kir::Buffer* addMbarriers(kir::Kernel& k, const std::string& name, int count) {
  auto b = std::make_unique<kir::Buffer>();
  b->name = name;
  b->role = "mbar";
  b->memory = MemoryType::Shared;
  b->dtype = DType::F32;  // two 4-byte words: one 64-bit mbarrier per stage
  b->stages = count;
  b->rows = 1;
  b->cols = 2;
  b->align = 8;
  return k.addBuffer(std::move(b));
}

std::unique_ptr<kir::Sync> makeSync(kir::Kernel& k, kir::SyncKind kind, const Why& why, int arg) {
  kir::SyncReason r;
  r.origin.builder = sync::protocolOf(kind);  // the pass is stamped by the pass manager
  r.hazards = why.hazards;
  r.producer = why.producer;
  r.consumer = why.consumer;
  r.buffer = why.buffer;
  r.stage = why.stage;
  r.mechanism = why.mechanism;
  if (!why.producer.empty()) r.pairs.push_back(why.hazards + ": " + why.producer + "  ->  " + why.consumer);
  k.syncPlan.entries.push_back(r);
  auto s = std::make_unique<kir::Sync>(kind, arg);
  s->reason = (int)k.syncPlan.entries.size() - 1;
  return s;
}

std::unique_ptr<kir::Sync> makeMbar(kir::Kernel& k, kir::SyncKind kind, kir::Buffer* bar, IExpr index, const Why& why,
                                    int arg, IExpr parity) {
  auto s = makeSync(k, kind, why, arg);
  s->buf = bar;
  s->index = index;
  s->parity = parity;
  return s;
}

void Ring::init(kir::Kernel& k, kir::Block& b) const {
  for (auto [bar, count] : {std::make_pair(full, fullCount), std::make_pair(empty, emptyCount)}) {
    if (!bar) continue;
    for (int st = 0; st < stages; ++st) {
      Why w;
      w.hazards = "init " + bar->name;
      w.buffer = bar->name;
      w.stage = std::to_string(st);
      w.mechanism = "mbarrier.init(" + bar->name + "[" + std::to_string(st) + "], " + std::to_string(count) +
                    "): one phase completes after " + std::to_string(count) + " arrival(s)" +
                    (bar == full && txBytes ? " and " + std::to_string(txBytes) + " TMA bytes" : "");
      if (!producer.empty()) {  // a ring: name its edge and the items whose phases it counts
        const std::string S = std::to_string(stages);
        w.mechanism += "; edge " + producer + " -> " + consumer + " (" + label + "): " +
                       (bar == full ? "phase q completes when item " + std::to_string(st) + "+" + S +
                                          "q has landed, the consumer waits parity (i/" + S + ")%2"
                                    : "phase q completes when the consumers released the slot for item " +
                                          std::to_string(st) + "+" + S + "q, the producer waits parity (j/" + S +
                                          ")%2");
      }
      auto s = makeMbar(k, kir::SyncKind::MbarInit, bar, st, w);
      s->count = count;
      b.stmts.push_back(std::move(s));
    }
  }
}

std::unique_ptr<kir::Sync> Ring::producerWait(kir::Kernel& k, IExpr j) const {
  Why w;
  w.hazards = "WAR " + label + " (" + consumer + " -> " + producer + ")";
  w.producer = consumer + " reads of " + label;
  w.consumer = producer + " writes of " + label;
  w.buffer = label;
  w.stage = (j % stages).str();
  w.mechanism = "wait until phase (j/" + std::to_string(stages) + ") of " + empty->name +
                "[j%" + std::to_string(stages) + "] completed: the consumers released the slot of item j-" +
                std::to_string(stages) + " (arrival at their item j-" + std::to_string(prefetch + 1) +
                ", or a pre-arrive); parity (j/" + std::to_string(stages) + ")%2";
  return makeMbar(k, kir::SyncKind::MbarWait, empty, j % stages, w, 0, (j / stages) % 2);
}

std::unique_ptr<kir::Sync> Ring::producerExpectTx(kir::Kernel& k, IExpr j) const {
  Why w;
  w.hazards = "RAW " + label + " (" + producer + " -> " + consumer + ")";
  w.producer = producer + " TMA of " + label;
  w.consumer = consumer + " reads";
  w.buffer = label;
  w.stage = (j % stages).str();
  w.mechanism = "arrive.expect_tx(" + std::to_string(txBytes) + " bytes): the phase of " + full->name +
                " completes when the TMA copies of this item have delivered every byte (complete_tx)";
  return makeMbar(k, kir::SyncKind::MbarArriveExpectTx, full, j % stages, w, txBytes);
}

std::unique_ptr<kir::Sync> Ring::producerArrive(kir::Kernel& k, IExpr j) const {
  Why w;
  w.hazards = "RAW " + label + " (" + producer + " -> " + consumer + ")";
  w.producer = producer + " writes of " + label;
  w.consumer = consumer + " reads";
  w.buffer = label;
  w.stage = (j % stages).str();
  w.mechanism = "each of the " + std::to_string(fullCount) + " producing threads arrives on " + full->name +
                " after its writes (release); the consumers' wait acquires them";
  return makeMbar(k, kir::SyncKind::MbarArrive, full, j % stages, w);
}

std::unique_ptr<kir::Sync> Ring::consumerWait(kir::Kernel& k, IExpr i) const {
  Why w;
  w.hazards = "RAW " + label + " (" + producer + " -> " + consumer + ")";
  w.producer = producer + " writes of " + label;
  w.consumer = consumer + " reads of " + label;
  w.buffer = label;
  w.stage = (i % stages).str();
  w.mechanism = "wait for phase (i/" + std::to_string(stages) + ") of " + full->name + "[i%" +
                std::to_string(stages) + "]: item i landed; parity (i/" + std::to_string(stages) + ")%2";
  return makeMbar(k, kir::SyncKind::MbarWait, full, i % stages, w, 0, (i / stages) % 2);
}

std::unique_ptr<kir::Sync> Ring::consumerRelease(kir::Kernel& k, IExpr i) const {
  Why w;
  w.hazards = "WAR " + label + " (" + consumer + " -> " + producer + ")";
  w.producer = consumer + " reads of " + label;
  w.consumer = producer + " writes of " + label;
  w.buffer = label;
  w.stage = ((i + prefetch + 1) % stages).str();
  w.mechanism = "release the slot of item i+" + std::to_string(prefetch + 1) + "-" + std::to_string(stages) +
                " (= i-" + std::to_string(keep) + ", retired" +
                (keep ? " by wgmma.wait_group(" + std::to_string(keep) + ")" : "") + ") for the producer's item i+" +
                std::to_string(prefetch + 1) + ": arrive on " + empty->name + "[(i+" + std::to_string(prefetch + 1) +
                ")%" + std::to_string(stages) + "]";
  return makeMbar(k, kir::SyncKind::MbarArrive, empty, (i + prefetch + 1) % stages, w);
}

void Ring::preArrive(kir::Kernel& k, kir::Block& b, const std::string& loopVar) const {
  auto loop = std::make_unique<kir::ForLoop>();
  loop->var = loopVar;
  loop->start = 0;
  loop->stop = prefetch + 1;
  Why w;
  w.hazards = "WAR " + label + " (pre-arrive)";
  w.buffer = label;
  w.stage = "[0, " + std::to_string(prefetch + 1) + ")";
  w.mechanism = "the producer's items [0, " + std::to_string(prefetch + 1) +
                ") overwrite nothing: the consumers complete phase 0 of " + empty->name + "[0.." +
                std::to_string(prefetch) + "] up front, so one parity formula (j/s)%2 serves every item";
  loop->body.stmts.push_back(makeMbar(k, kir::SyncKind::MbarArrive, empty, IExpr::var(loopVar), w));
  b.stmts.push_back(std::move(loop));
}

std::unique_ptr<kir::Sync> setMaxNReg(kir::Kernel& k, const HopperRole& r, int threads) {
  if (!r.registers) return nullptr;
  const int cap = std::min(256, (65536 / threads) / 8 * 8);  // setmaxnreg counts reach 256
  const bool inc = r.registers >= cap;
  auto s = makeSync(k, kir::SyncKind::SetMaxNReg,
                    {"registers " + r.name, "", "", "", "",
                     std::string("setmaxnreg.") + (inc ? "inc" : "dec") + " " + std::to_string(r.registers) +
                         ": role '" + r.name + "' runs with its budget (the kernel enters with at most " +
                         std::to_string(cap) + " per thread: __launch_bounds__(" + std::to_string(threads) + ", 1))"},
                    r.registers);
  s->count = inc ? 1 : -1;
  return s;
}

std::unique_ptr<kir::IfThenElse> electOne(int warp) {
  auto i = std::make_unique<kir::IfThenElse>();
  i->cond = eq(var("tid"), 32 * warp);
  i->electWarp = warp;
  return i;
}

void finishPlan(kir::Kernel& k, const std::string& summary) {
  sync::numberReasons(k);
  int perMain = 0;
  kir::walk(k.body, [&](const kir::Node& n) {
    if (n.kind != kir::NodeKind::For) return;
    auto& f = static_cast<const kir::ForLoop&>(n);
    if (f.stage != kir::LoopStage::Main) return;
    for (auto& s : f.body.stmts)
      if (s->kind == kir::NodeKind::Sync && static_cast<kir::Sync&>(*s).sync == kir::SyncKind::BlockSync) ++perMain;
  });
  k.syncPlan.barriersPerMainIteration = perMain;
  k.syncPlan.summary = summary;
  k.syncsPlanned = true;
}

std::unique_ptr<kir::ForLoop> forLoop(const std::string& v, IExpr lo, IExpr hi) {
  auto l = std::make_unique<kir::ForLoop>();
  l->var = v;
  l->start = lo;
  l->stop = hi;
  return l;
}

std::unique_ptr<kir::IfThenElse> when(IExpr cond) {
  auto i = std::make_unique<kir::IfThenElse>();
  i->cond = cond;
  return i;
}

IExpr persistentTileCount(const MatmulTiling& t) {
  IExpr tiles = ceilDiv(var("M"), t.bm) * ceilDiv(var("N"), t.bn);
  return t.batched ? tiles * var("batch") : tiles;
}

void persistentTileLets(kir::Block& b, const MatmulTiling& t, IExpr tl) {
  IExpr M = var("M"), N = var("N");
  IExpr nM = ceilDiv(M, t.bm), nN = ceilDiv(N, t.bn), G = t.hopper.groupM;
  b.stmts.push_back(std::make_unique<kir::Let>("tile", var("bid") + tl * var("num_ctas")));
  IExpr tile = var("tile"), per = G * nN;
  if (t.batched) {  // the batch is the walk's outer coordinate: every matrix's tiles in the grouped order
    b.stmts.push_back(std::make_unique<kir::Let>("batch_idx", tile / (nM * nN)));
    b.stmts.push_back(std::make_unique<kir::Let>("mtile", tile % (nM * nN)));
    tile = var("mtile");
  }
  IExpr first = (tile / per) * G;
  IExpr gsz = min(nM - first, G);
  b.stmts.push_back(std::make_unique<kir::Let>("m0", (first + (tile % per) % gsz) * t.bm));
  b.stmts.push_back(std::make_unique<kir::Let>("n0", ((tile % per) / gsz) * t.bn));
}

std::unique_ptr<kir::IfThenElse> tmaProducerRole(kir::Kernel& k, const MatmulTiling& t, const Ring& ring,
                                                 const std::vector<kir::TileLoad*>& loads, int warp, IExpr tilesCta,
                                                 IExpr nk) {
  const int s = ring.stages;
  IExpr g = var("tl") * nk + var("kt");
  auto elected = electOne(warp);
  auto tiles = forLoop("tl", 0, tilesCta);
  persistentTileLets(tiles->body, t, var("tl"));
  auto kl = forLoop("kt", 0, nk);
  kl->cbStages = s;
  kl->cbPrefetch = ring.prefetch;
  kl->body.stmts.push_back(ring.producerWait(k, g));
  kl->body.stmts.push_back(ring.producerExpectTx(k, g));
  for (auto* l : loads) {
    auto cl = kir::clone(*l, {});
    auto& x = static_cast<kir::TileLoad&>(*cl);
    x.stage = g % s;
    x.iter = g;
    x.mbar = ring.full;
    x.mbarIndex = g % s;
    kl->body.stmts.push_back(std::move(cl));
  }
  tiles->body.stmts.push_back(std::move(kl));
  elected->thenBody.stmts.push_back(std::move(tiles));
  return elected;
}

}  // namespace heddle::passes::hopper
