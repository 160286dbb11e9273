// Synchronisation in the simulator: cp.async commit groups and wait_group retirement, block
// barriers (vector-clock join), and the diagnosis of a CTA in which no thread can move.
//
//   commit_group     closes the thread's open group (an empty group when it issued no copy)
//   wait_group(N)    retires all but the N most recent closed groups of the thread: their copies
//                    land now (if the schedule has not landed them yet) and become ordered before
//                    the thread's later accesses; copies not yet committed are not affected
//   block_sync       every thread of the CTA must arrive at the same barrier; then all clocks join
//                    (AMD, SimOptions::dropOnExit: every thread that has not ended)
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

void Cta::land(uint32_t c) {
  AsyncChunk& ch = chunks[c];
  if (ch.landed) return;
  for (uint32_t i = 0; i < ch.count; ++i) smem[ch.cell + i] = chunkVals[ch.valOffset + i];
  ch.landed = true;
}

void Cta::landAll() {
  for (uint32_t c = 0; c < chunks.size(); ++c) land(c);
  unlanded.clear();
}

void Cta::commit(Thread& t) {
  t.committed.push_back(t.openGroup);
  t.openGroup++;
  t.groupChunks.emplace_back();
  t.retire.push_back(kNever);
  t.retirePos.push_back(-1);
}

void Cta::waitGroups(Thread& t, int keep) {
  while ((int)t.committed.size() > keep) {
    int32_t g = t.committed.front();
    t.committed.pop_front();
    for (uint32_t c : t.groupChunks[g]) land(c);
    t.retire[g] = t.vc[t.tid];
    t.retirePos[g] = t.pos;
    if (!deferred.empty()) settle(t.tid, g);
  }
}

void Cta::arriveBarrier(Thread& t, const kir::Sync& s) {
  if (!opt.backOffBarrier) checkBackOff(t, s);
  t.status = Status::AtBarrier;
  t.barrier = &s;
  releaseBlockBarrier(s);
}

// Every thread not dropped (AMD: ended) waits at a block barrier: they pass it together, or, if
// they wait at different ones, the CTA is stuck.
void Cta::releaseBlockBarrier(const kir::Sync& s) {
  for (auto& u : th)
    if (u.status != Status::AtBarrier && !(opt.dropOnExit && u.status == Status::Done)) return;
  for (auto& u : th)
    if (u.status != Status::Done && u.barrier != &s) {
      diagnoseStuck();  // all threads wait, but at different barriers
      return;
    }
  std::vector<uint32_t> joined(clockSize(), 0), xjoined(clockSize(), 0);
  for (auto& u : th)
    if (u.status != Status::Done) fencedArrive(u, s, joined, xjoined);  // AMD: through its fences
  for (auto& u : th) {
    if (u.status == Status::Done) continue;
    fencedWait(u, s, joined, xjoined);
    u.vc[u.tid]++;
    u.status = Status::Running;
    u.barrier = nullptr;
  }
  ++releases;
}

void Cta::execSync(Thread& t, const kir::Sync& s) {
  if (mbar.active && execMbarrierSync(t, s)) return;  // Hopper ops (mbarrier_sync.cpp)
  if (execBarrierObject(t, s)) return;                // AMD named barriers (barrier_objects.cpp)
  if (execGridSync(t, s)) return;                     // split-K grid flags (grid.cpp)
  switch (s.sync) {
    case kir::SyncKind::BlockSync: arriveBarrier(t, s); return;
    case kir::SyncKind::CpAsyncCommit: commit(t); return;
    case kir::SyncKind::CpAsyncWait: waitGroups(t, s.arg); return;
    case kir::SyncKind::VmcntWait: waitGroups(t, s.arg); return;  // every LDS DMA op is its own group
    case kir::SyncKind::BarrierSignal: signalBarrier(t, s); return;
    case kir::SyncKind::BarrierWait: waitSplitBarrier(t, s); return;
    default: break;  // Hopper ops: execMbarrierSync above
  }
  fail<HeddleError>("simulate: sync op ", kir::describe(s), " is not modelled");
}

void Cta::diagnoseStuck() {
  std::map<const kir::Sync*, std::vector<int>> waiting;
  std::vector<int> done;
  for (auto& u : th) {
    if (u.status == Status::AtBarrier) waiting[u.barrier].push_back(u.tid);
    else if (u.status == Status::Done) done.push_back(u.tid);
  }
  std::ostringstream os, key;
  os << "deadlock in CTA (" << bx << ", " << by << ", " << bz << "): ";
  key << "deadlock";
  bool first = true;
  for (auto& [b, ts] : waiting) {
    os << (first ? "" : "; ") << threadSet(ts) << " wait at '" << kir::describe(*b) << "' (node " << b->id << ", "
       << where(th[ts[0]]) << ")";
    key << "|" << b->id;
    first = false;
  }
  if (mbar.active) {
    std::string b = mbarrierStuck();
    if (!b.empty()) os << (first ? "" : "; ") << b, key << "|" << b.size(), first = false;
  }
  if (!done.empty()) os << "; " << threadSet(done) << " have exited";
  bool named = false;
  for (auto& [b, ts] : waiting) named |= b->sync == kir::SyncKind::BarrierWait && b->arg != kir::kWorkgroupBarrier;
  if (named)
    os << " -- a named-barrier wait that never completes (undefined behaviour in the AMDGPU model; a thread that "
          "ends does not drop a named barrier)";
  else if (waiting.size() > 1)
    os << " -- threads wait at different barriers (a barrier inside thread-dependent control flow)";
  else if (!done.empty()) os << " -- a barrier that not every thread reaches (exited threads never arrive)";
  std::string text = os.str();
  rep.add(Finding::Deadlock, key.str() + (done.empty() ? "" : "|exit"), [&] { return text; });
  stopped = true;
}

}  // namespace heddle::verify
