// The mbarrier ring and the sync-plan entries of syncs placed by construction (see ring.h).
#include "heddle/sync/ring.h"

#include "heddle/sync/plan.h"

#include <utility>
#include <vector>

namespace heddle::sync {

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

// Builder "mbarrier ring": the door into the sync plan of the ring and of the role-pipeline builders
// (lower/build/) and the passes that place syncs by construction; every entry they create passes
// here (makeSync names the protocol as its origin's builder; the pass manager stamps the pass).
int addPlanEntry(kir::Kernel& k, kir::SyncReason r) {
  k.syncPlan.entries.push_back(std::move(r));
  return (int)k.syncPlan.entries.size() - 1;
}

int addPlanEntry(kir::Kernel& k, const Why& why) {
  kir::SyncReason r;
  r.hazards = why.hazards;
  r.producer = why.producer;
  r.consumer = why.consumer;
  r.buffer = why.buffer;
  r.stage = why.stage;
  r.mechanism = why.mechanism;
  if (!why.producer.empty()) r.pairs.push_back(why.hazards + ": " + why.producer + "  ->  " + why.consumer);
  return addPlanEntry(k, std::move(r));
}

int copyPlanEntry(kir::Kernel& k, const kir::Sync& s) { return addPlanEntry(k, k.syncPlan.entries.at(s.reason)); }

std::unique_ptr<kir::Sync> makeSync(kir::Kernel& k, kir::SyncKind kind, const Why& why, int arg) {
  auto s = std::make_unique<kir::Sync>(kind, arg);
  s->reason = addPlanEntry(k, why);
  k.syncPlan.entries[s->reason].origin.builder = protocolOf(kind);  // the pass is stamped by the pass manager
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

Ring Ring::create(kir::Kernel& k, const RingSpec& spec) {
  Ring r;
  r.label = spec.label;
  r.stages = spec.stages;
  r.prefetch = spec.prefetch;
  r.keep = spec.keep;
  r.fullCount = spec.fullCount;
  r.emptyCount = spec.emptyCount;
  r.txBytes = spec.txBytes;
  r.producer = spec.producer;
  r.consumer = spec.consumer;
  r.full = addMbarriers(k, spec.fullName, spec.stages);
  if (!spec.emptyName.empty()) r.empty = addMbarriers(k, spec.emptyName, spec.stages);
  return r;
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
        w.mechanism +=
            "; edge " + producer + " -> " + consumer + " (" + label + "): " +
            (bar == full ? "phase q completes when item " + std::to_string(st) + "+" + S +
                               "q has landed, the consumer waits parity (i/" + S + ")%2"
                         : "phase q completes when the consumers released the slot for item " + std::to_string(st) +
                               "+" + S + "q, the producer waits parity (j/" + S + ")%2");
      }
      auto s = makeMbar(k, kir::SyncKind::MbarInit, bar, st, w);
      s->count = count;
      b.stmts.push_back(std::move(s));
    }
  }
}

Why Ring::edgeWhy(bool raw, const std::string& from, const std::string& to, IExpr stage) const {
  Why w;
  w.hazards = (raw ? "RAW " : "WAR ") + label + " (" +
              (raw ? producer + " -> " + consumer : consumer + " -> " + producer) + ")";
  w.producer = from;
  w.consumer = to;
  w.buffer = label;
  w.stage = stage.str();
  return w;
}

std::unique_ptr<kir::Sync> Ring::producerWait(kir::Kernel& k, IExpr j) const {
  Why w = edgeWhy(false, consumer + " reads of " + label, producer + " writes of " + label, j % stages);
  w.mechanism = "wait until phase (j/" + std::to_string(stages) + ") of " + empty->name + "[j%" +
                std::to_string(stages) + "] completed: the consumers released the slot of item j-" +
                std::to_string(stages) + " (arrival at their item j-" + std::to_string(prefetch + 1) +
                ", or a pre-arrive); parity (j/" + std::to_string(stages) + ")%2";
  return makeMbar(k, kir::SyncKind::MbarWait, empty, j % stages, w, 0, (j / stages) % 2);
}

std::unique_ptr<kir::Sync> Ring::producerExpectTx(kir::Kernel& k, IExpr j) const {
  Why w = edgeWhy(true, producer + " TMA of " + label, consumer + " reads", j % stages);
  w.mechanism = "arrive.expect_tx(" + std::to_string(txBytes) + " bytes): the phase of " + full->name +
                " completes when the TMA copies of this item have delivered every byte (complete_tx)";
  return makeMbar(k, kir::SyncKind::MbarArriveExpectTx, full, j % stages, w, txBytes);
}

std::unique_ptr<kir::Sync> Ring::producerArrive(kir::Kernel& k, IExpr j) const {
  Why w = edgeWhy(true, producer + " writes of " + label, consumer + " reads", j % stages);
  w.mechanism = "each of the " + std::to_string(fullCount) + " producing threads arrives on " + full->name +
                " after its writes (release); the consumers' wait acquires them";
  return makeMbar(k, kir::SyncKind::MbarArrive, full, j % stages, w);
}

std::unique_ptr<kir::Sync> Ring::consumerWait(kir::Kernel& k, IExpr i) const {
  Why w = edgeWhy(true, producer + " writes of " + label, consumer + " reads of " + label, i % stages);
  w.mechanism = "wait for phase (i/" + std::to_string(stages) + ") of " + full->name + "[i%" + std::to_string(stages) +
                "]: item i landed; parity (i/" + std::to_string(stages) + ")%2";
  return makeMbar(k, kir::SyncKind::MbarWait, full, i % stages, w, 0, (i / stages) % 2);
}

std::unique_ptr<kir::Sync> Ring::consumerRelease(kir::Kernel& k, IExpr i) const {
  Why w =
      edgeWhy(false, consumer + " reads of " + label, producer + " writes of " + label, (i + prefetch + 1) % stages);
  w.mechanism = "release the slot of item i+" + std::to_string(prefetch + 1) + "-" + std::to_string(stages) + " (= i-" +
                std::to_string(keep) + ", retired" +
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

std::unique_ptr<kir::Sync> remoteRelease(kir::Kernel& k, const kir::Sync& local, kir::Buffer* empty,
                                         const std::string& shared) {
  const kir::SyncReason& r = k.syncPlan.entries.at(local.reason);
  Why w{r.hazards + " (the peer's multicast)",
        r.producer + " (this CTA)",
        "the peer CTA's multicast of its half",
        r.buffer,
        r.stage,
        "the peer's producer multicasts its half of " + shared + " into this CTA's slot too: " + empty->name +
            " counts the consumers of both CTAs, so each consumer thread also arrives on the peer's " + empty->name +
            "[" + local.index.str() + "] (mapa + mbarrier.arrive.release.cluster)"};
  return makeMbar(k, kir::SyncKind::MbarArriveRemote, empty, local.index, w);
}

void finishPlan(kir::Kernel& k, const std::string& summary) {
  numberReasons(k);
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

}  // namespace heddle::sync
