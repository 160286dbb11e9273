// Shared memory of a simulated CTA: element values, the shadow state behind happens-before, and
// the race / early-async-read checks every access goes through (see cta.h for the model).
#include <limits>
#include <sstream>

#include "heddle/verify/cta.h"

namespace heddle::verify {

void Cta::setupMemory() {
  int64_t total = 0;
  for (auto& b : k.buffers) {
    const bool tmem = k.tile.mma == MmaKind::Tcgen05 &&
                      b->role == "acc";  // tensor memory: accStages x 128 lanes x bn (tcgen05_sim.cpp)
    if (b->memory != MemoryType::Shared && !tmem) continue;
    Region r{b.get(), total, (int64_t)b->rows * b->cols, std::max(1, b->stages), b->rows, b->cols};
    if (tmem) r = Region{b.get(), total, 128LL * k.tile.bn, std::max(1, k.tile.accStages), 128, k.tile.bn};
    regions[b.get()] = r;
    total += r.stageElems * r.stages;
  }
  ctaCells = total;
  total *= ranks;  // a cluster: every CTA's shared memory, rank r's from r * ctaCells
  if (total * T > (int64_t)1 << 31)
    fail<HeddleError>("simulate: ", total, " shared elements x ", T,
                      " threads is too large to track; simulate a "
                      "smaller tile");
  smem.assign(total, std::numeric_limits<float>::quiet_NaN());  // poison: never-written reads show up as NaN
  smemW.assign(total, WriteRec{});
  smemR.assign(total * T, 0);
  // SmemAccess mappings: each distinct name gets an index, in program order
  kir::walk(k.body, [&](const kir::Node& n) {
    if (n.kind == kir::NodeKind::SmemAccess) {
      auto& a = static_cast<const kir::SmemAccess&>(n);
      if (!mappings.count(a.mapping)) {
        int idx = (int)mappings.size();
        mappings[a.mapping] = idx;
      }
    }
  });
}

uint32_t Cta::cellOf(const kir::Buffer* b, int64_t stage, int64_t r, int64_t c, const kir::Node& n) const {
  auto it = regions.find(b);
  if (it == regions.end())
    fail<HeddleError>("simulate: ", kir::describe(n), " uses buffer ", b->name, " which is not in shared memory");
  auto& g = it->second;
  if (stage < 0 || stage >= g.stages || r < 0 || r >= g.rows || c < 0 || c >= g.cols)
    fail<HeddleError>("simulate: ", kir::describe(n), " touches ", b->name, "[stage ", stage, "] (", r, ", ", c,
                      ") outside its ", g.stages, " x ", g.rows, " x ", g.cols, " elements");
  return (uint32_t)(curRank * ctaCells + g.base + stage * g.stageElems + r * g.cols + c);
}

uint32_t Cta::newInst(const kir::Node& n, const Thread& t, int64_t iter, int64_t stage) {
  insts.push_back({&n, t.tid, iter, stage});
  return (uint32_t)insts.size() - 1;
}

std::string Cta::describeInst(uint32_t i) const {
  const OpInst& o = insts[i];
  std::ostringstream os;
  os << "'" << kir::describe(*o.node) << "' (iteration " << o.iter << ", stage " << o.stage << ") by "
     << threadName(o.thread, W);
  return os.str();
}

std::string Cta::describeCell(uint32_t cell) const {
  const std::string cta = ranks > 1 ? "CTA rank " + std::to_string(cell / ctaCells) + "'s " : "";
  if (ranks > 1) cell %= (uint32_t)ctaCells;
  for (auto& [b, g] : regions) {
    if (cell < g.base || cell >= g.base + g.stageElems * g.stages) continue;
    int64_t off = cell - g.base, st = off / g.stageElems, e = off % g.stageElems;
    std::ostringstream os;
    os << cta << b->name << "[stage " << st << "] element (" << e / g.cols << ", " << e % g.cols << ")";
    return os.str();
  }
  return "shared element " + std::to_string(cell);
}

const std::string& Cta::bufferName(uint32_t cell) const {
  static const std::string none = "?";
  if (ranks > 1) cell %= (uint32_t)ctaCells;
  for (auto& [b, g] : regions)
    if (cell >= g.base && cell < g.base + g.stageElems * g.stages) return b->name;
  return none;
}

Cta::Order Cta::orderOf(const WriteRec& w, const Thread& u) const {
  const uint32_t seen = u.vc[w.thread];
  if (w.group < 0) return (w.thread == u.tid || w.clock <= seen) ? Order::Ordered : Order::Unordered;
  uint32_t rc = th[w.thread].retire[w.group];
  if (rc != kNever && (w.thread == u.tid || rc <= seen)) return Order::Ordered;
  if (w.thread == u.tid || w.clock <= seen) return Order::AfterIssue;
  return Order::Unordered;
}

void Cta::reportEarly(const std::string& k, uint32_t earlier, uint32_t later, uint32_t cell, int64_t count,
                      bool missingBarrier) {
  std::string key = k + "|" + std::to_string(insts[earlier].node->id) + "|" + std::to_string(insts[later].node->id) +
                    "|" + bufferName(cell);
  if (missingBarrier) {
    rep.add(
        Finding::Race, key,
        [&] {
          std::ostringstream os;
          os << k << " race on " << describeCell(cell) << ": " << describeInst(earlier) << " and "
             << describeInst(later)
             << " are not ordered by happens-before (the issuing thread retires the cp.async group with a wait_group "
                "in "
                "the same barrier phase, but no barrier after that wait orders it before the access)";
          const WriteRec& w = smemW[cell];  // AMD: a barrier that does order it, short of a fence
          if (w.thread >= 0 && w.group >= 0)
            os << fenceNote(insts[later].thread, w.thread, th[w.thread].retire[w.group]);
          return os.str();
        },
        count);
  } else {
    rep.add(
        Finding::AsyncMisuse, key,
        [&] {
          std::ostringstream os;
          os << (k == "WAW" ? "write over an in-flight async copy: " : "read of async result before its wait: ")
             << describeInst(later) << (k == "WAW" ? " writes " : " reads ") << describeCell(cell)
             << " while the cp.async of " << describeInst(earlier)
             << " is in flight: no cp.async.wait_group of the issuing thread retires its group before this access";
          return os.str();
        },
        count);
  }
}

bool Cta::missingBarrier(int thread, int32_t group, uint32_t seen, int64_t pos) const {
  const Thread& t = th[thread];
  return t.retire[group] != kNever && t.retire[group] == seen + 1 && t.retirePos[group] < pos;
}

void Cta::settle(int thread, int32_t group) {
  auto it = deferred.find({thread, group});
  if (it == deferred.end()) return;
  for (auto& d : it->second.list)
    reportEarly(d.kind, d.earlier, d.later, d.cell, d.count, missingBarrier(thread, group, d.seen, d.pos));
  deferred.erase(it);
}

void Cta::conflict(Order o, const char* kind, uint32_t earlier, uint32_t later, uint32_t cell, bool asyncRetired) {
  const OpInst& a = insts[earlier];
  const OpInst& b = insts[later];
  const std::string k = kind;
  if (o == Order::AfterIssue) {
    const WriteRec& w = smemW[cell];
    const Thread& u = th[b.thread];
    const uint32_t seen = u.vc[w.thread];
    if (a.thread != b.thread && !asyncRetired && !opt.stopAtFirstError) {  // classified when it retires
      auto& dg = deferred[{w.thread, w.group}];
      std::string key = k + "|" + std::to_string(a.node->id) + "|" + std::to_string(b.node->id) + "|" +
                        std::to_string(seen) + "|" + bufferName(cell);
      auto f = dg.index.find(key);
      if (f != dg.index.end()) {
        dg.list[f->second].count++;
      } else {
        dg.index[key] = dg.list.size();
        dg.list.push_back({k, earlier, later, cell, seen, u.pos, 1});
      }
      return;
    }
    reportEarly(k, earlier, later, cell, 1, a.thread != b.thread && missingBarrier(w.thread, w.group, seen, u.pos));
    if (opt.stopAtFirstError) stopped = true;
    return;
  }
  std::string key = k + "|" + std::to_string(a.node->id) + "|" + std::to_string(b.node->id) + "|" + bufferName(cell);
  rep.add(Finding::Race, key, [&] {
    std::ostringstream os;
    os << kind << " race on " << describeCell(cell) << ": " << describeInst(earlier) << " and " << describeInst(later)
       << " are not ordered by happens-before";
    if (k != "WAR") {  // the earlier access is a write
      const WriteRec& w = smemW[cell];
      if (w.group >= 0 && asyncRetired)
        os << " (the cp.async group was retired by a wait_group, but no barrier after that wait orders it before "
              "the other thread)";
      else if (w.group >= 0) os << " (the cp.async write is in flight and not ordered after the other access)";
    } else {
      os << " (no barrier between the read and the overwrite)";
    }
    const uint32_t clock = k == "WAR" ? (uint32_t)(smemR[(size_t)cell * T + a.thread] >> 32) : smemW[cell].clock;
    os << fenceNote(b.thread, a.thread, clock);  // AMD: a barrier orders them, a fence is missing
    return os.str();
  });
  if (opt.stopAtFirstError) stopped = true;
}

float Cta::readCell(uint32_t cell, Thread& u, uint32_t inst) {
  const WriteRec& w = smemW[cell];
  if (w.thread < 0) {
    const OpInst& b = insts[inst];
    rep.add(Finding::Race, "uninit|" + std::to_string(b.node->id), [&] {
      return "read of never-written shared memory: " + describeInst(inst) + " reads " + describeCell(cell) +
             " before any write to it";
    });
    if (opt.stopAtFirstError) stopped = true;
  } else {
    Order o = orderOf(w, u);
    if (o != Order::Ordered)
      conflict(o, "RAW", w.inst, inst, cell, w.group >= 0 && th[w.thread].retire[w.group] != kNever);
  }
  smemR[(size_t)cell * T + u.tid] = ((uint64_t)u.vc[u.tid] << 32) | (uint64_t)(inst + 1);
  return smem[cell];
}

void Cta::writeCell(uint32_t cell, Thread& w, uint32_t inst, int32_t group) {
  asyncProxyCheckWrite(cell, inst);  // over an in-flight wgmma / TMA-store read (mbarrier_sync.cpp)
  const WriteRec& p = smemW[cell];
  if (p.thread >= 0) {
    Order o = orderOf(p, w);
    if (o != Order::Ordered)
      conflict(o, "WAW", p.inst, inst, cell, p.group >= 0 && th[p.thread].retire[p.group] != kNever);
  }
  uint64_t* r = &smemR[(size_t)cell * T];
  for (int t = 0; t < T; ++t) {
    uint64_t rec = r[t];
    if (!rec) continue;
    r[t] = 0;
    if (t == w.tid) continue;
    if ((uint32_t)(rec >> 32) > w.vc[t])
      conflict(Order::Unordered, "WAR", (uint32_t)(rec & 0xFFFFFFFFu) - 1, inst, cell, false);
  }
  smemW[cell] = WriteRec{w.tid, group, w.vc[w.tid], inst};
}

int64_t evalStage(const kir::IExpr& e, const Thread& t) { return e.eval(t.env); }

}  // namespace heddle::verify
