// Kernel IR: traversal, access declarations, and the readable dump (HEDDLE_DUMP=kernel_ir).
#include "heddle/kir/kir.h"

#include <algorithm>
#include <sstream>

namespace heddle::kir {

const char* loopStageName(LoopStage s) {
  switch (s) {
    case LoopStage::Serial: return "serial";
    case LoopStage::Prologue: return "prologue";
    case LoopStage::Main: return "main";
    case LoopStage::Epilogue: return "epilogue";
  }
  return "?";
}

const char* syncKindName(SyncKind k) {
  switch (k) {
    case SyncKind::BlockSync: return "block_sync";
    case SyncKind::CpAsyncCommit: return "cp.async.commit_group";
    case SyncKind::CpAsyncWait: return "cp.async.wait_group";
    case SyncKind::MbarInit: return "mbarrier.init";
    case SyncKind::MbarArrive: return "mbarrier.arrive";
    case SyncKind::MbarArriveExpectTx: return "mbarrier.arrive.expect_tx";
    case SyncKind::MbarWait: return "mbarrier.try_wait.parity";
    case SyncKind::WgmmaFence: return "wgmma.fence";
    case SyncKind::WgmmaCommit: return "wgmma.commit_group";
    case SyncKind::WgmmaWait: return "wgmma.wait_group";
    case SyncKind::FenceProxyAsync: return "fence.proxy.async";
    case SyncKind::SetMaxNReg: return "setmaxnreg";
    case SyncKind::NamedBarrier: return "bar.sync";
    case SyncKind::BulkCommit: return "cp.async.bulk.commit_group";
    case SyncKind::BulkWaitRead: return "cp.async.bulk.wait_group.read";
    case SyncKind::VmcntWait: return "s_waitcnt vmcnt";
    case SyncKind::BarrierSignal: return "s_barrier_signal";
    case SyncKind::BarrierWait: return "s_barrier_wait";
    case SyncKind::BarrierInit: return "s_barrier_init";
    case SyncKind::BarrierJoin: return "s_barrier_join";
    case SyncKind::BarrierLeave: return "s_barrier_leave";
    case SyncKind::BarrierSignalIsFirst: return "s_barrier_signal_isfirst";
    case SyncKind::GridRelease: return "grid.release";
    case SyncKind::GridWait: return "grid.wait";
    case SyncKind::TmemAlloc: return "tcgen05.alloc";
    case SyncKind::TmemRelinquish: return "tcgen05.relinquish_alloc_permit";
    case SyncKind::TmemDealloc: return "tcgen05.dealloc";
    case SyncKind::TcgenCommit: return "tcgen05.commit";
    case SyncKind::TcgenFenceBefore: return "tcgen05.fence::before_thread_sync";
    case SyncKind::TcgenFenceAfter: return "tcgen05.fence::after_thread_sync";
    case SyncKind::MbarArriveRemote: return "mbarrier.arrive.cluster(peer)";
    case SyncKind::FenceMbarrierInit: return "fence.mbarrier_init.release.cluster";
    case SyncKind::ClusterSync: return "barrier.cluster";
  }
  return "?";
}

static void walkImpl(const Block& b, const std::function<void(const Node&)>& f) {
  for (auto& s : b.stmts) {
    f(*s);
    if (s->kind == NodeKind::For) walkImpl(static_cast<const ForLoop&>(*s).body, f);
    if (s->kind == NodeKind::If) {
      walkImpl(static_cast<const IfThenElse&>(*s).thenBody, f);
      walkImpl(static_cast<const IfThenElse&>(*s).elseBody, f);
    }
  }
}
void walk(const Block& b, const std::function<void(const Node&)>& f) { walkImpl(b, f); }

void walkMut(Block& b, const std::function<void(Node&)>& f) {
  for (auto& s : b.stmts) {
    f(*s);
    if (s->kind == NodeKind::For) walkMut(static_cast<ForLoop&>(*s).body, f);
    if (s->kind == NodeKind::If) {
      walkMut(static_cast<IfThenElse&>(*s).thenBody, f);
      walkMut(static_cast<IfThenElse&>(*s).elseBody, f);
    }
  }
}

void Kernel::renumber() {
  int id = 0;
  walkMut(body, [&](Node& n) { n.id = id++; });
}

// Thread mappings. A tile copy splits its tile into VEC-element chunks, chunk c to thread
// c % THREADS; the MMA reads whole k-slabs through warp fragments. Different strings mean a
// thread may read what another thread wrote.
static std::string copyMapping(const TileLoad& t) { return "copy:linear/vec" + std::to_string(t.vec); }
static const char* kMmaMapping = "mma:warp-fragments";

std::vector<Access> accessesOf(const Node& n) {
  std::vector<Access> r;
  if (n.kind == NodeKind::TileLoad) {
    auto& t = static_cast<const TileLoad&>(n);
    if (t.kind == LoadKind::TmaLoad) r.push_back({t.dst, t.stage, true, "tma", AsyncKind::Tma});
    else
      r.push_back({t.dst, t.stage, true, copyMapping(t),
                   t.kind == LoadKind::CpAsync    ? AsyncKind::CpAsync
                   : t.kind == LoadKind::AsyncLds ? AsyncKind::Vmcnt
                                                  : AsyncKind::None});
  } else if (n.kind == NodeKind::SmemAccess) {
    auto& a = static_cast<const SmemAccess&>(n);
    r.push_back({a.buf, a.stage, a.write, a.mapping,
                 !a.async  ? AsyncKind::None
                 : a.vmcnt ? AsyncKind::Vmcnt
                           : AsyncKind::CpAsync});
  } else if (n.kind == NodeKind::MmaStep) {
    auto& m = static_cast<const MmaStep&>(n);
    AsyncKind ak = m.kind == MmaKind::Wgmma ? AsyncKind::Wgmma : AsyncKind::None;
    r.push_back({m.a, m.stageA, false, m.kind == MmaKind::Wgmma ? "wgmma" : kMmaMapping, ak});
    r.push_back({m.b, m.stageB, false, m.kind == MmaKind::Wgmma ? "wgmma" : kMmaMapping, ak});
  } else if (n.kind == NodeKind::EpilogueStore) {
    auto& e = static_cast<const EpilogueStore&>(n);  // Hopper staging: the wgmma fragment mapping
    if (e.from) r.push_back({e.from, e.fromStage, false, "frag", AsyncKind::None});
    if (e.to) r.push_back({e.to, e.toStage, true, "frag", AsyncKind::None});
    for (auto* x : e.toExtra) r.push_back({x, e.toStage, true, "frag", AsyncKind::None});
  } else if (n.kind == NodeKind::MmaPromote) {  // block scales: scale_a from its ring slot
    auto& m = static_cast<const MmaPromote&>(n);
    if (m.scaleSmem) r.push_back({m.scaleSmem, m.scaleStage, false, "frag", AsyncKind::None});
  } else if (n.kind == NodeKind::TmaStore) {
    auto& t = static_cast<const TmaStore&>(n);
    r.push_back({t.src, t.stage, false, "tma", AsyncKind::BulkStore});
  }
  return r;
}

int vmemOpsPerThread(const Node& n, int threads) {
  if (n.kind == NodeKind::TileLoad) {  // one LDS DMA per VEC-element chunk (heddle_hip_copy.cuh)
    auto& t = static_cast<const TileLoad&>(n);
    int64_t chunks = (int64_t)t.dst->rows * t.dst->cols / std::max(1, t.vec);  // parts: the same in all
    return (int)(chunks / std::max(1, threads));
  }
  return 1;  // SmemAccess: one instruction
}

std::string describe(const Node& n) {
  std::ostringstream os;
  switch (n.kind) {
    case NodeKind::TileLoad: {
      auto& t = static_cast<const TileLoad&>(n);
      std::string src = t.src;
      for (size_t i = 0; i < t.parts.size(); ++i)  // a matmul group's stage: "B|B1|B|B1"
        src = (i ? src + "|" : std::string()) + t.parts[i].src;
      os << loadKindName(t.kind) << " " << src << " -> " << t.dst->name << "[" << t.stage.str() << "] (k-tile "
         << t.iter.str() << ")";
      if (t.multicast > 1)
        os << " multicast: rows of rank crank (1/" << t.multicast << ") to " << t.multicast << " CTAs";
      break;
    }
    case NodeKind::MmaStep: {
      auto& m = static_cast<const MmaStep&>(n);
      os << (m.kind == MmaKind::Tcgen05 ? "tcgen05.mma "
             : m.kind == MmaKind::Wgmma ? "wgmma "
                                        : "mma ")
         << m.acc->name << " += " << m.a->name << "[" << m.stageA.str() << "] x " << m.b->name << "[" << m.stageB.str()
         << "] (k-tile " << m.iter.str() << ")";
      break;
    }
    case NodeKind::Sync: {
      auto& s = static_cast<const Sync&>(n);
      os << syncKindName(s.sync);
      if (s.sync == SyncKind::CpAsyncWait || s.sync == SyncKind::WgmmaWait || s.sync == SyncKind::BulkWaitRead ||
          s.sync == SyncKind::VmcntWait)
        os << "(" << s.arg << ")";
      if (s.buf && s.buf->role == "mbar") os << " " << s.buf->name << "[" << s.index.str() << "]";
      if (s.sync == SyncKind::MbarWait) os << " parity " << s.parity.str();
      if (s.sync == SyncKind::MbarInit) os << " count " << s.count;
      if (s.sync == SyncKind::TmemAlloc || s.sync == SyncKind::TmemDealloc) os << " " << s.arg << " columns";
      if (s.sync == SyncKind::MbarArriveExpectTx) os << " tx " << s.arg;
      if (s.sync == SyncKind::SetMaxNReg) os << (s.count > 0 ? ".inc " : ".dec ") << s.arg;
      if (s.sync == SyncKind::NamedBarrier)
        os << " " << s.arg << (s.index.isConst() && s.index.constValue() == 0 ? "" : " + " + s.index.str()) << ", "
           << s.count;
      // AMD barrier ids: the workgroup barrier (-1) is left unnamed, as the GFX12 matmuls print it
      if ((s.sync == SyncKind::BarrierSignal || s.sync == SyncKind::BarrierWait ||
           s.sync == SyncKind::BarrierSignalIsFirst || s.sync == SyncKind::BarrierJoin ||
           s.sync == SyncKind::BarrierInit) &&
          s.arg != kWorkgroupBarrier)
        os << " " << s.arg;
      if (s.noReleaseFence) os << " (no release fence)";  // an AMD fence mutant (verify/workgroup_fences.cpp)
      if (s.noAcquireFence) os << " (no acquire fence)";
      if (s.sync == SyncKind::BarrierInit) os << ", " << s.count << " wave(s)";
      if (s.sync == SyncKind::GridRelease) os << " flags[" << s.index.str() << "]";
      if (s.sync == SyncKind::GridWait) os << " flags[" << s.index.str() << " + 0.." << s.count - 1 << "]";
      break;
    }
    case NodeKind::SmemAccess: {
      auto& a = static_cast<const SmemAccess&>(n);
      os << (a.label.empty() ? (a.write ? "write " : "read ") + a.buf->name : a.label) << "[" << a.stage.str() << "]";
      if (!a.iter.isConst() || a.iter.constValue() != 0) os << " (iter " << a.iter.str() << ")";
      break;
    }
    case NodeKind::EpilogueStore: {
      auto& e = static_cast<const EpilogueStore&>(n);
      if (e.partial == EpilogueStore::Partial::Store) {
        os << "partial store -> ws[" << e.slot.str() << "]";
        break;
      }
      if (e.partial == EpilogueStore::Partial::Add) {
        os << "partial add ws[" << e.slot.str() << " + 0.." << e.count - 1 << "] -> " << e.acc->name;
        break;
      }
      os << (e.raw ? "accumulator store" : "epilogue store");
      if (e.from) os << " from " << e.from->name << "[" << e.fromStage.str() << "]";
      os << " -> " << (e.to ? e.to->name + "[" + e.toStage.str() + "]" : e.out);
      for (auto* x : e.toExtra) os << ", " << x->name << "[" << e.toStage.str() << "]";
      if (e.colEnd > e.colBegin) os << " (columns " << e.colBegin << ".." << e.colEnd - 1 << ")";
      if (e.columnPairs) os << " in column pairs";
      break;
    }
    case NodeKind::Let: {
      auto& l = static_cast<const Let&>(n);
      os << "let " << l.var << " = " << l.value.str();
      break;
    }
    case NodeKind::TmaStore: {
      auto& t = static_cast<const TmaStore&>(n);
      os << "tma_store " << t.src->name << "[" << t.stage.str() << "] -> " << t.tensorMap << " at (" << t.row0.str()
         << ", " << t.col0.str() << ") (item " << t.iter.str() << ")";
      break;
    }
    case NodeKind::MmaPromote: {
      auto& m = static_cast<const MmaPromote&>(n);
      os << "promote " << m.acc->name << " += " << m.tmp->name << " * ";
      if (m.scaleSmem) os << m.scaleSmem->name << "[" << m.scaleStage.str() << "][m]";
      else os << m.scaleA << "[m, " << m.kBlock.str() << "]";
      os << " * " << m.scaleB << "[n/128, " << m.kBlock.str() << "]";
      break;
    }
    case NodeKind::Alloc: os << "alloc " << static_cast<const Alloc&>(n).buf->name; break;
    case NodeKind::For: {
      auto& f = static_cast<const ForLoop&>(n);
      os << "for " << f.var << " in [" << f.start.str() << ", " << f.stop.str() << ") " << loopStageName(f.stage);
      break;
    }
    case NodeKind::If: os << "if (" << static_cast<const IfThenElse&>(n).cond.str() << ")"; break;
    case NodeKind::Comment: os << "// " << static_cast<const Comment&>(n).text; break;
    case NodeKind::Block: os << "block"; break;
  }
  return os.str();
}

static void dump(std::ostringstream& os, const Block& b, int depth, const Kernel& k) {
  std::string ind(2 * depth, ' ');
  for (auto& s : b.stmts) {
    switch (s->kind) {
      case NodeKind::For: {
        auto& f = static_cast<const ForLoop&>(*s);
        os << ind << describe(f);
        if (f.cbStages) os << " (circular buffer stages=" << f.cbStages << " prefetch=" << f.cbPrefetch << ")";
        os << " {\n";
        dump(os, f.body, depth + 1, k);
        os << ind << "}\n";
        break;
      }
      case NodeKind::If: {
        auto& i = static_cast<const IfThenElse&>(*s);
        os << ind << describe(i) << " {\n";
        dump(os, i.thenBody, depth + 1, k);
        if (!i.elseBody.stmts.empty()) {
          os << ind << "} else {\n";
          dump(os, i.elseBody, depth + 1, k);
        }
        os << ind << "}\n";
        break;
      }
      case NodeKind::Sync: {
        auto& sy = static_cast<const Sync&>(*s);
        os << ind << describe(sy);
        if (sy.reason >= 0 && sy.reason < (int)k.syncPlan.entries.size())
          os << "    # sync " << sy.reason << ": " << k.syncPlan.entries[sy.reason].hazards << "  (placed by "
             << k.syncPlan.entries[sy.reason].origin.str() << ")";
        os << "\n";
        break;
      }
      default: os << ind << describe(*s) << "\n";
    }
  }
}

std::string Kernel::str() const {
  std::ostringstream os;
  os << "kernel " << name << "(";
  for (size_t i = 0; i < params.size(); ++i) os << (i ? ", " : "") << params[i].name;
  os << ")  grid=(" << launch.gridX.str() << ", " << launch.gridY.str() << ", " << launch.gridZ.str()
     << ") block=" << launch.threads << " smem=" << launch.smemBytes << "\n";
  for (auto& b : buffers)
    os << "  buffer " << b->name << ": " << (b->memory == MemoryType::Shared ? "shared" : "registers") << " "
       << dtypeName(b->dtype) << "[" << b->stages << "][" << b->rows << "][" << b->cols << "]"
       << (b->offset >= 0 ? " @" + std::to_string(b->offset) : "") << "\n";
  for (auto& op : epilogue)
    if (op.pairs) os << "  epilogue reads " << op.tensorParam << " two columns per load (aligned pairs)\n";
  dump(os, body, 1, *this);
  return os.str();
}

}  // namespace heddle::kir
