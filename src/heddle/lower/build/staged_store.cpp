// The staged TMA store of an output tile (see staged_store.h).
#include "heddle/lower/build/staged_store.h"

namespace heddle::passes::build {

std::string StagedStore::names() const {
  std::string r = "sD";
  for (auto* x : extra) r += ", " + x->name;
  return r;
}

StagedStore stagingBuffers(kir::Kernel& k, const MatmulTiling& t, int cols, int slots) {
  StagedStore s;
  s.cols = cols;
  s.chunks = t.bn / cols;
  // one staging buffer and tensor map per output: sD / tmD for D, sD1 / tmD1 for D1, ...
  auto staging = [&](const std::string& out, DType dtype) {
    auto b = std::make_unique<kir::Buffer>();
    b->name = "s" + out;
    b->role = out;
    b->memory = MemoryType::Shared;
    b->dtype = dtype;
    b->stages = slots;
    b->rows = t.bm;
    b->cols = cols;
    b->align = 1024;  // a 128-byte swizzled TMA box
    if (dtypeBytes(dtype) * cols != 128)
      fail<HeddleError>("tma_store_epilogue: output ", out, " of ", k.name, " has ", dtypeBytes(dtype) * cols,
                        "-byte chunk rows, not one 128-byte box (validate_schedule checks the element sizes)");
    kir::Param pd;
    pd.kind = kir::Param::TensorMap;
    pd.name = "tm" + out;
    pd.tensor = out;
    k.params.push_back(pd);
    k.tensorMaps.push_back({pd.name, out, cols, t.bm, 128, t.batched});  // batched: a 3-D map, batch_idx per tile
    return k.addBuffer(std::move(b));
  };
  s.sD = staging("D", k.outDtype);
  for (auto& o : k.extraOutputs) s.extra.push_back(staging(o.param, o.dtype));
  return s;
}

namespace {

// `if (issuer) cp.async.bulk.wait_group.read(n)`, the WAR edge tma_store reads -> `next`
std::unique_ptr<kir::IfThenElse> waitRead(kir::Kernel& k, const StagedStore& s, int n, const std::string& next,
                                          const std::string& why) {
  auto w = s.elect();
  const std::string to = next == "the end of the CTA" ? "exit" : "epilogue";
  w->thenBody.stmts.push_back(makeSync(k, kir::SyncKind::BulkWaitRead,
                                       {"WAR sD (tma_store -> " + to + ")", "tma_store reads of sD", next, "sD", "",
                                        "cp.async.bulk.wait_group.read(" + std::to_string(n) + "): " + why},
                                       n));
  return w;
}

}  // namespace

std::vector<kir::NodePtr> stagedChunks(kir::Kernel& k, const StagedStore& s, const kir::EpilogueStore& epi, IExpr local,
                                       const std::function<IExpr(IExpr)>& stage,
                                       const std::function<void(int, std::vector<kir::NodePtr>&)>& afterWrite) {
  const int cols = s.cols, sd = s.stages;
  const std::string names = s.names();
  auto barrier = [&](Why why) {  // bar.sync id (+ index) over the writers
    why.mechanism = "named barrier (" + std::to_string(s.barThreads) + s.barWho + "): " + why.mechanism;
    auto b = makeSync(k, kir::SyncKind::NamedBarrier, why, s.barId);
    b->count = s.barThreads;
    b->index = s.barIndex;
    return b;
  };
  std::vector<kir::NodePtr> seq;
  for (int ch = 0; ch < s.chunks; ++ch) {
    IExpr q = local * s.chunks + ch, st = stage(q);
    const std::string col =
        " (columns " + std::to_string(ch * cols) + ".." + std::to_string(ch * cols + cols - 1) + ")";
    seq.push_back(waitRead(k, s, sd - 1, "epilogue writes of sD",
                           "the store of chunk q-" + std::to_string(sd) +
                               " (the last one from this slot) has read sD "
                               "before the barrier lets " +
                               s.writers + " rewrite it" + col));
    seq.push_back(barrier({"WAR sD (tma_store -> epilogue)", "tma_store reads of sD", "epilogue writes of sD", "sD", "",
                           s.issuer + "'s wait_group.read happens before every thread's rewrite of the slot" + col}));
    auto st1 = kir::clone(epi, {});
    auto& e = static_cast<kir::EpilogueStore&>(*st1);
    e.to = s.sD;
    e.toExtra = s.extra;
    e.toStage = st;
    e.colBegin = ch * cols;
    e.colEnd = ch * cols + cols;
    seq.push_back(std::move(st1));
    if (afterWrite) afterWrite(ch, seq);
    seq.push_back(makeSync(
        k, kir::SyncKind::FenceProxyAsync,
        {"RAW " + names + " (" + s.writes + " -> tma_store)", "epilogue writes of " + names + " (generic proxy)",
         "tma_store reads (async proxy)", "sD", "",
         "fence.proxy.async in every writing thread, before the barrier that orders its writes before the TMA store: "
         "generic-proxy writes (" +
             s.writes + ") are not visible to the async proxy otherwise" + col}));
    seq.push_back(barrier({"RAW " + names + " (" + s.writes + " -> tma_store)", "epilogue writes of " + names,
                           "tma_store reads of " + names, "sD", "",
                           "every fenced write of the chunk happens before " + s.issuer + " issues its TMA store" +
                               (s.extra.empty() ? "" : "s") + col}));
    auto issue = s.elect();
    std::vector<kir::Buffer*> srcs{s.sD};
    srcs.insert(srcs.end(), s.extra.begin(), s.extra.end());
    for (auto* src : srcs) {  // every output's chunk, in one bulk group: one wait_group.read retires them all
      auto ts = std::make_unique<kir::TmaStore>();
      ts->src = src;
      ts->stage = st;
      ts->tensorMap = "tm" + src->role;
      ts->row0 = var("m0");
      ts->col0 = var("n0") + ch * cols;
      ts->iter = q;
      issue->thenBody.stmts.push_back(std::move(ts));
    }
    issue->thenBody.stmts.push_back(makeSync(
        k, kir::SyncKind::BulkCommit,
        {"group tma_store " + names, "", "", "sD", "",
         (s.extra.empty()
              ? "close the bulk group of this chunk's store"
              : "close the one bulk group of this chunk's " + std::to_string(srcs.size()) + " stores (" + names + ")") +
             " so wait_group.read can retire it" + col}));
    seq.push_back(std::move(issue));
  }
  return seq;
}

std::unique_ptr<kir::IfThenElse> stagedDrain(kir::Kernel& k, const StagedStore& s) {
  return waitRead(k, s, 0, "the end of the CTA",
                  "after the last tile: the CTA's shared memory stays valid until its last TMA store has read it");
}

void allocStaging(kir::Kernel& k, const StagedStore& s) {
  size_t at = 0;
  while (at < k.body.stmts.size() && k.body.stmts[at]->kind == kir::NodeKind::Alloc) ++at;
  k.body.stmts.insert(k.body.stmts.begin() + at, std::make_unique<kir::Alloc>(s.sD));
  for (size_t i = 0; i < s.extra.size(); ++i)
    k.body.stmts.insert(k.body.stmts.begin() + at + 1 + i, std::make_unique<kir::Alloc>(s.extra[i]));
}

}  // namespace heddle::passes::build
