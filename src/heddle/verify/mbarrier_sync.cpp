// Hopper synchronisation in the simulator (model: mbarrier_state.h):
//   mbarrier.init           count >= 1, by one thread; every later use must be ordered after it
//   mbarrier.arrive         joins the thread's clock into the current phase, then advances it
//   arrive.expect_tx bytes  adds bytes to the phase's transaction count, then arrives
//   complete_tx (TMA)       subtracts the bytes a landed copy delivered; below zero: tx mismatch
//   phase completion        pending arrivals == 0 and tx == 0: the phase's clock is published
//   try_wait.parity P       passes iff the current phase's parity differs from P (the phase of
//                           parity P completed; on a fresh barrier parity 1 passes), acquiring the
//                           published clock; otherwise the thread blocks until a completion
//   wgmma.fence/commit/wait commit closes the open group; wait_group(N) retires all but the N
//                           newest committed groups (their smem reads complete now) and touches
//                           the accumulators (the operand fence), so the next wgmma needs a fence
//   bulk commit / wait.read the same for TMA stores' shared-memory reads
//   fence.proxy.async       the thread's generic writes so far become visible to the async proxy
//   bar.sync id, n          releases when n threads wait at id: their clocks join
//   setmaxnreg              no memory effect
// At the end of a CTA: a barrier with a partial phase (arrivals or bytes outstanding), wgmma or
// bulk groups never retired, and TMA copies still in flight are reported.
// Unobserved phases: a successful try_wait.parity observes the barrier's latest completed phase
// (phase - 1; a fresh barrier's parity-1 pass observes none). Two consecutive completed phases n,
// n+1 (n >= 0) that no wait observed are reported -- checked when phase n+2 completes (a wait can
// only ever observe the latest completed phase, so n+1's status is final then) and at the end of the
// CTA. A parity wait cannot tell such two completions apart (an ABA on the phase bit), and the second
// one is an arrival nobody waits for (compute-sanitizer synccheck: "Missing wait"). A single
// unobserved phase is legal and common (pre-arrived WAR phases a prologue never waits for, a ring's
// trailing releases); it does not depend on the schedule: in a correct protocol every wait observes
// the phase it was written for, whenever it runs.
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

void Cta::setupMbarrierState() {
  for (int r = 0; r < ranks; ++r)  // a cluster: every CTA's barriers, rank r's from r * barsPerCta
    for (auto& b : k.buffers) {
      if (b->role != "mbar") continue;
      if (!r) mbar.barBase[b.get()] = (int)mbar.bars.size();
      for (int i = 0; i < b->stages; ++i) {
        MbarState m;
        m.buf = b.get();
        m.index = i;
        m.rank = ranks > 1 ? r : -1;
        mbar.bars.push_back(m);
      }
    }
  barsPerCta = (int)mbar.bars.size() / ranks;
  kir::walk(k.body, [&](const kir::Node& n) {
    if (n.kind == kir::NodeKind::Let || n.kind == kir::NodeKind::TmaStore ||
        (n.kind == kir::NodeKind::MmaStep && static_cast<const kir::MmaStep&>(n).kind == MmaKind::Wgmma) ||
        (n.kind == kir::NodeKind::TileLoad && static_cast<const kir::TileLoad&>(n).kind == LoadKind::TmaLoad))
      mbar.active = true;
    if (n.kind == kir::NodeKind::Sync && static_cast<const kir::Sync&>(n).sync >= kir::SyncKind::MbarInit &&
        static_cast<const kir::Sync&>(n).sync <= kir::SyncKind::BulkWaitRead)
      mbar.active = true;
  });
  if (k.tile.mma == MmaKind::Wgmma) mbar.active = true;
  for (auto& m : mbar.bars) {
    m.acc.assign(clockSize(), 0);
    m.released.assign(clockSize(), 0);
  }
  mbar.inflight.assign(smem.size(), 0);
  mbar.inflightInst.assign(smem.size(), 0);
  mbar.fencedAt.assign(smem.size(), kNever);
}

int Cta::mbarId(const kir::Buffer* b, int64_t index, const kir::Node& n) const {
  auto it = mbar.barBase.find(b);
  if (!b || it == mbar.barBase.end()) fail<HeddleError>("simulate: ", kir::describe(n), " names no mbarrier array");
  if (index < 0 || index >= b->stages)
    fail<HeddleError>("simulate: ", kir::describe(n), " uses ", b->name, "[", index, "] of ", b->stages, " mbarriers");
  return curRank * barsPerCta + it->second + (int)index;
}

bool Cta::rankExited(int rank) const {
  for (int i = rank * Tc; i < (rank + 1) * Tc; ++i)
    if (th[i].status != Status::Done) return false;
  return true;
}

void Cta::clusterRemoteCheck(int id, const std::string& what) {
  MbarState& m = mbar.bars[id];
  if (rankExited(m.rank)) {
    rep.add(Finding::AsyncMisuse, "exited|" + m.buf->name, [&] {
      return what + " reaches mbarrier " + m.name() + " after CTA rank " + std::to_string(m.rank) +
             " exited (its shared memory is gone: a barrier.cluster before exit is missing)";
    });
    if (opt.stopAtFirstError) stopped = true;
  }
  if (!m.init) {
    rep.add(Finding::AsyncMisuse, "remoteuninit|" + m.buf->name,
            [&] { return what + " reaches mbarrier " + m.name() + " of the peer CTA before its mbarrier.init"; });
    if (opt.stopAtFirstError) stopped = true;
  } else if (!m.initFenced) {
    rep.add(Finding::Race, "unfenced|" + m.buf->name, [&] {
      return what + " uses mbarrier " + m.name() + " from the peer CTA, but its mbarrier.init by " +
             threadName(m.initThread, W) +
             " is not followed by fence.mbarrier_init.release.cluster: the init "
             "need not be visible at cluster scope";
    });
    if (opt.stopAtFirstError) stopped = true;
  }
}

bool Cta::mbarVisible(Thread& t, MbarState& m, const kir::Node& n) {
  if (!m.init) {
    rep.add(Finding::AsyncMisuse, "uninit|" + m.name() + "|" + std::to_string(n.id), [&] {
      return "mbarrier " + m.name() + " is used by '" + kir::describe(n) + "' (" + threadName(t.tid, W) +
             ") before any mbarrier.init";
    });
    if (opt.stopAtFirstError) stopped = true;
    return false;
  }
  if (m.initThread != t.tid && t.vc[m.initThread] < m.initClock) {
    rep.add(Finding::Race, "initvis|" + m.name() + "|" + std::to_string(n.id), [&] {
      return "mbarrier " + m.name() + " is used by '" + kir::describe(n) + "' (" + threadName(t.tid, W) +
             ") before its mbarrier.init by " + threadName(m.initThread, W) +
             " is ordered before it (no barrier after the init)";
    });
    if (opt.stopAtFirstError) stopped = true;
  }
  return true;
}

void Cta::mbarUnobserved(const MbarState& m, int64_t n) {
  rep.add(Finding::AsyncMisuse, "unobserved|" + m.name(), [&] {
    std::ostringstream os;
    os << "mbarrier " << m.name() << ": phases " << n << " and " << n + 1
       << " both completed and no wait observed either (phase " << n + 1 << " completed by "
       << (m.lastBy ? "'" + kir::describe(*m.lastBy) + "'" : std::string("a landing"))
       << (m.lastThread >= 0 ? " (" + threadName(m.lastThread, W) + ")" : std::string())
       << "): a parity wait cannot tell the two completions apart; an arrival no wait needs (a release of a slot "
          "no load refills)";
    return os.str();
  });
  if (opt.stopAtFirstError) stopped = true;
}

// A barrier the async proxy completes (TMA complete_tx, tcgen05.commit): its init must have been fenced by the
// initializing thread (fence.mbarrier_init) before this use is ordered after it (passes/fence_mbarrier_init.cpp).
void Cta::asyncProxyInitCheck(Thread& t, MbarState& m, const kir::Node& n) {
  if (!m.init) return;  // mbarVisible reports it
  if (m.initFenced && (m.initThread == t.tid || t.vc[m.initThread] >= m.fenceClock)) return;
  rep.add(Finding::AsyncMisuse, "initfence|" + m.buf->name, [&] {
    return "'" + kir::describe(n) + "' (" + threadName(t.tid, W) + ") uses mbarrier " + m.name() +
           " through the async proxy, but its mbarrier.init by " + threadName(m.initThread, W) +
           (m.initFenced ? " was fenced after this use was ordered" : " is not followed by fence.mbarrier_init");
  });
  if (opt.stopAtFirstError) stopped = true;
}

void Cta::mbarComplete(int id, const kir::Node* by, int thread) {
  MbarState& m = mbar.bars[id];
  if (m.phase >= 2 && m.observed < m.phase - 2) mbarUnobserved(m, m.phase - 2);  // phase - 1 is final now
  m.lastBy = by;
  m.lastThread = thread;
  m.phase++;
  for (size_t i = 0; i < m.acc.size(); ++i) m.released[i] = std::max(m.released[i], m.acc[i]), m.acc[i] = 0;
  m.pending = m.count;
  m.tx = 0;
  for (auto& u : th) {
    if (u.status != Status::Blocked || u.h.waitBar != id || (m.phase & 1) == u.h.waitParity) continue;
    for (size_t i = 0; i < u.vc.size(); ++i) u.vc[i] = std::max(u.vc[i], m.released[i]);
    m.observed = m.phase - 1;
    u.status = Status::Running;
    u.h.waitBar = -1;
    u.h.waitNode = nullptr;
  }
}

void Cta::mbarArrive(int id, const std::vector<uint32_t>& vc, const kir::Node* by, int thread) {
  MbarState& m = mbar.bars[id];
  for (size_t i = 0; i < vc.size(); ++i) m.acc[i] = std::max(m.acc[i], vc[i]);
  if (m.pending <= 0) {  // the phase already has all its arrivals (it waits for transaction bytes)
    rep.add(Finding::AsyncMisuse, "over|" + m.name(), [&] {
      return "over-arrival on mbarrier " + m.name() + ": phase " + std::to_string(m.phase) + " already had its " +
             std::to_string(m.count) + " arrival(s)";
    });
    if (opt.stopAtFirstError) stopped = true;
    return;
  }
  if (--m.pending == 0 && m.tx == 0) mbarComplete(id, by, thread);
}

void Cta::mbarTx(int id, int64_t bytes, const kir::Node& n, int thread) {
  MbarState& m = mbar.bars[id];
  m.tx -= bytes;
  if (m.tx < 0 && ranks == 1) {  // a cluster: the peer's multicast may land before this CTA's expect_tx
    rep.add(Finding::AsyncMisuse, "tx|" + m.name(), [&] {
      std::ostringstream os;
      os << "transaction count mismatch on mbarrier " << m.name() << ": '" << kir::describe(n) << "' delivered "
         << bytes << " bytes into phase " << m.phase << ", which expected " << bytes + m.tx
         << " more (arrive.expect_tx too small, or a copy completing on the wrong phase)";
      return os.str();
    });
    if (opt.stopAtFirstError) stopped = true;
  }
  if (m.pending == 0 && m.tx == 0) mbarComplete(id, &n, thread);
}

void Cta::retireReads(Thread& t, AsyncReadGroup& g) {
  const uint64_t now = (uint64_t)t.vc[t.tid] << 32;
  for (size_t i = 0; i < g.cells.size(); ++i) {
    uint32_t c = g.cells[i];
    if (mbar.inflight[c]) mbar.inflight[c]--;
    smemR[(size_t)c * T + t.tid] = now | (uint64_t)(g.insts[i] + 1);
  }
  g.cells.clear();
  g.insts.clear();
}

void Cta::asyncProxyCheckWrite(uint32_t cell, uint32_t inst) {
  if (!mbar.active || cell >= mbar.inflight.size() || !mbar.inflight[cell]) return;
  rep.add(Finding::AsyncMisuse,
          "inflight|" + std::to_string(insts[mbar.inflightInst[cell]].node->id) + "|" +
              std::to_string(insts[inst].node->id),
          [&] {
            return "write over shared memory an asynchronous read is still reading: " + describeInst(inst) +
                   " writes " + describeCell(cell) + " while " + describeInst(mbar.inflightInst[cell]) +
                   " is in flight (no wait_group retires it before the write)";
          });
  if (opt.stopAtFirstError) stopped = true;
}

bool Cta::execMbarrierSync(Thread& t, const kir::Sync& s) {
  using K = kir::SyncKind;
  switch (s.sync) {
    case K::MbarInit: {
      MbarState& m = mbar.bars[mbarId(s.buf, s.index.eval(t.env), s)];
      if (s.count < 1) {
        rep.add(Finding::AsyncMisuse, "count|" + m.name(), [&] {
          return "mbarrier.init(" + m.name() + ", " + std::to_string(s.count) + "): the count must be >= 1";
        });
        if (opt.stopAtFirstError) stopped = true;
      }
      m.init = true;
      m.initThread = t.tid;
      m.initClock = t.vc[t.tid];
      m.count = m.pending = std::max(1, s.count);
      m.tx = 0;
      m.phase = 0;
      m.observed = -1;
      return true;
    }
    case K::MbarArrive:
    case K::MbarArriveExpectTx: {
      int id = mbarId(s.buf, s.index.eval(t.env), s);
      if (!mbarVisible(t, mbar.bars[id], s)) return true;
      if (s.sync == K::MbarArriveExpectTx) mbar.bars[id].tx += s.arg;
      mbarArrive(id, t.vc, &s, t.tid);
      t.vc[t.tid]++;
      return true;
    }
    case K::MbarWait: {
      int id = mbarId(s.buf, s.index.eval(t.env), s);
      MbarState& m = mbar.bars[id];
      if (!mbarVisible(t, m, s)) return true;
      int parity = (int)(s.parity.eval(t.env) & 1);
      if ((m.phase & 1) != parity) {
        for (size_t i = 0; i < t.vc.size(); ++i) t.vc[i] = std::max(t.vc[i], m.released[i]);
        m.observed = std::max(m.observed, m.phase - 1);  // the latest completed phase (none on a fresh barrier)
      } else {
        t.status = Status::Blocked;
        t.h.waitBar = id;
        t.h.waitParity = parity;
        t.h.waitNode = &s;
      }
      return true;
    }
    case K::MbarArriveRemote: {  // clusters: the peer CTA's barrier (rank ^ 1 of a cluster of 2)
      const int peer = t.rank ^ 1;
      if (peer >= ranks)
        fail<HeddleError>("simulate: ", kir::describe(s), " in a kernel without a cluster of 2 (", k.name, ")");
      curRank = peer;
      const int id = mbarId(s.buf, s.index.eval(t.env), s);
      curRank = t.rank;
      clusterRemoteCheck(id, "'" + kir::describe(s) + "' (" + threadName(t.tid, W) + ")");
      if (!mbarVisible(t, mbar.bars[id], s)) return true;
      mbarArrive(id, t.vc, &s, t.tid);
      t.vc[t.tid]++;
      return true;
    }
    case K::FenceMbarrierInit:
      for (auto& m : mbar.bars)
        if (m.init && m.initThread == t.tid) m.initFenced = true, m.fenceClock = t.vc[t.tid];
      return true;
    case K::ClusterSync: arriveBarrier(t, s); return true;  // every thread of the cluster (one simulated Cta)
    case K::WgmmaFence: t.h.accTouched = false; return true;
    case K::WgmmaCommit:
      t.h.wgGroups.push_back(std::move(t.h.wgOpen));
      t.h.wgOpen = {};
      return true;
    case K::WgmmaWait:
      while ((int)t.h.wgGroups.size() > s.arg) {
        retireReads(t, t.h.wgGroups.front());
        t.h.wgGroups.pop_front();
      }
      t.h.accTouched = true;
      t.h.accTouchedBy = "wgmma.wait_group (its operand fence)";
      return true;
    case K::BulkCommit:
      t.h.bulkGroups.push_back(std::move(t.h.bulkOpen));
      t.h.bulkOpen = {};
      return true;
    case K::BulkWaitRead:
      while ((int)t.h.bulkGroups.size() > s.arg) {
        retireReads(t, t.h.bulkGroups.front());
        t.h.bulkGroups.pop_front();
      }
      return true;
    case K::FenceProxyAsync:
      for (uint32_t c : t.h.unfenced)
        if (smemW[c].thread == t.tid) mbar.fencedAt[c] = t.vc[t.tid];
      t.h.unfenced.clear();
      return true;
    case K::SetMaxNReg: return true;
    case K::NamedBarrier: {
      const int id = s.arg + (int)s.index.eval(t.env);  // per warpgroup: ping-pong's barriers 2 and 3
      auto& w = mbar.named[id + 64 * t.rank];           // a cluster: each CTA's own named barriers
      w.push_back(t.tid);
      t.status = Status::Blocked;
      t.h.namedBar = id;
      t.h.namedNode = &s;
      if ((int)w.size() < s.count) return true;
      std::vector<uint32_t> joined(clockSize(), 0);
      for (int u : w)
        for (size_t i = 0; i < joined.size(); ++i) joined[i] = std::max(joined[i], th[u].vc[i]);
      for (int u : w) {
        th[u].vc = joined;
        th[u].vc[u]++;
        th[u].status = Status::Running;
        th[u].h.namedBar = -1;
        th[u].h.namedNode = nullptr;
      }
      w.clear();
      return true;
    }
    default: return execTcgen05Sync(t, s);  // tcgen05 ops (tcgen05_sim.cpp)
  }
}

void Cta::landTma(TmaOp& op) {
  MbarState& m = mbar.bars[op.bar];
  if (ranks > 1) {
    const std::string what =
        "the TMA load '" + kir::describe(*insts[op.inst].node) + "' (" + threadName(op.thread, W) + ")";
    if (m.rank != th[op.thread].rank) clusterRemoteCheck(op.bar, what);
    if (m.phase != op.phase) {
      rep.add(Finding::AsyncMisuse, "latephase|" + m.buf->name, [&] {
        return what + " lands on mbarrier " + m.name() + " after the phase it was issued in (" +
               std::to_string(op.phase) +
               ") completed: the expected transaction bytes are short of what the "
               "cluster's copies deliver (a consumer may read the stage before the data)";
      });
      if (opt.stopAtFirstError) stopped = true;
    }
  }
  const int agent = T + op.bar;
  const uint32_t epoch = ++m.epoch;
  for (size_t i = 0; i < op.cells.size(); ++i) {
    const uint32_t cell = op.cells[i];
    const WriteRec& p = smemW[cell];
    if (p.thread >= 0) {
      bool ordered = p.group < 0 ? p.clock <= op.issuerVc[p.thread] : false;
      if (!ordered) conflict(Order::Unordered, "WAW", p.inst, op.inst, cell, false);
    }
    uint64_t* r = &smemR[(size_t)cell * T];
    for (int u = 0; u < T; ++u) {
      uint64_t rec = r[u];
      if (!rec) continue;
      r[u] = 0;
      if ((uint32_t)(rec >> 32) > op.issuerVc[u])
        conflict(Order::Unordered, "WAR", (uint32_t)(rec & 0xFFFFFFFFu) - 1, op.inst, cell, false);
    }
    asyncProxyCheckWrite(cell, op.inst);
    smemW[cell] = WriteRec{agent, -1, epoch, op.inst};
    smem[cell] = op.vals[i];
    mbar.fencedAt[cell] = kNever;
  }
  op.landed = true;
  m.acc[agent] = std::max(m.acc[agent], epoch);
  mbarTx(op.bar, op.bytes, *insts[op.inst].node, op.thread);
}

bool Cta::tmaLand(bool oldest) {
  if (mbar.pending.empty()) return false;
  size_t i = oldest ? 0 : rng() % mbar.pending.size();
  int op = mbar.pending[i];
  mbar.pending.erase(mbar.pending.begin() + (long)i);
  landTma(mbar.tma[op]);
  return true;
}

std::string Cta::mbarrierStuck() const {
  std::map<std::string, std::vector<int>> groups;
  for (auto& u : th) {
    if (u.status != Status::Blocked) continue;
    std::ostringstream os;
    if (u.h.waitNode) {
      const MbarState& m = mbar.bars[u.h.waitBar];
      os << "'" << kir::describe(*u.h.waitNode) << "' on " << m.name() << " (parity " << u.h.waitParity
         << "; the barrier is in phase " << m.phase << " with " << m.pending << " of " << m.count << " arrivals and "
         << m.tx << " tx bytes outstanding, " << where(u) << ")";
    } else if (u.h.namedNode) {
      os << "'" << kir::describe(*u.h.namedNode) << "' (" << where(u) << ")";
    }
    groups[os.str()].push_back(u.tid);
  }
  std::ostringstream os;
  bool first = true;
  for (auto& [what, ts] : groups) {
    os << (first ? "" : "; ") << threadSet(ts) << " wait at " << what;
    first = false;
  }
  return os.str();
}

void Cta::mbarrierFinish() {
  if (!mbar.active || stopped) return;
  tcgen05Finish();
  while (tmaLand(true)) {}
  for (auto& m : mbar.bars)  // the last two phases (earlier pairs were checked as later phases completed)
    if (m.init && m.phase >= 2 && m.observed < m.phase - 2) mbarUnobserved(m, m.phase - 2);
  for (auto& m : mbar.bars) {
    if (!m.init || (m.pending == m.count && m.tx == 0)) continue;
    rep.add(Finding::AsyncMisuse, "partial|" + m.name(), [&] {
      std::ostringstream os;
      os << "mbarrier " << m.name() << " ends the kernel inside phase " << m.phase << " with " << m.count - m.pending
         << " of " << m.count << " arrivals" << (m.tx ? " and " + std::to_string(m.tx) + " tx bytes" : "")
         << " (over-arrival, a missing arrival, or an unmatched expect_tx)";
      return os.str();
    });
  }
  for (auto& u : th) {
    if (!u.h.wgOpen.cells.empty() || !u.h.wgGroups.empty())
      rep.add(Finding::AsyncMisuse, "wgleft", [&] {
        return threadName(u.tid, W) + " exits with wgmma reads of shared memory never retired by wgmma.wait_group";
      });
    if (!u.h.bulkOpen.cells.empty() || !u.h.bulkGroups.empty())
      rep.add(Finding::AsyncMisuse, "bulkleft", [&] {
        return threadName(u.tid, W) + " exits with a TMA store still reading shared memory (no bulk wait_group.read)";
      });
  }
}

}  // namespace heddle::verify
