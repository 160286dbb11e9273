// Hopper spellings for the CUDA printer (see sm90_printer.h).
#include "heddle/codegen/sm90_printer.h"

#include <sstream>

#include "heddle/codegen/printer.h"

namespace heddle::sm90print {

namespace {

std::string mbarPtr(const kir::Buffer& b, const kir::IExpr& index) {
  return "(" + b.name + " + (" + index.str() + "))";
}

std::string stagePtr(const kir::Buffer& b, const kir::IExpr& stage) {
  std::string s = b.name;
  if (!(stage.isConst() && stage.constValue() == 0)) s += " + (" + stage.str() + ") * " + std::to_string(b.rows * b.cols);
  return s;
}

std::string tileD(const kir::Kernel& k) {
  return "heddle::sm90::TmaTile<" + std::to_string(k.tile.bm) + ", " + std::to_string(k.tile.bn) + ", " +
         dtypeCudaName(k.outDtype) + ">";
}

}  // namespace

// The epilogue program on r0 (same ops and spellings as the C-like printer's register epilogue); an
// operand loaded by TMA (EpiOp::smem) is read from its ring slot `stage` at the tile's (lr,) lc.
void epilogueOps(std::ostream& os, const kir::Kernel& k, const kir::IExpr& stage, const std::string& ind) {
  for (auto& op : k.epilogue) {
    std::string a = "r" + std::to_string(op.a), b = op.b >= 0 ? "r" + std::to_string(op.b) : "";
    if (op.scalar) b = floatLit(*op.scalar);
    if (op.scalar && op.scalarOnLeft) std::swap(a, b);
    os << ind << "const float r" << op.dst << " = ";
    switch (op.op) {
      case OpKind::Input: {
        if (op.smem) {
          os << "heddle::to_float(" << op.smem->name << "[(" << stage.str() << ") * " << op.smem->rows * op.smem->cols
             << (op.smem->rows > 1 ? " + lr * " + std::to_string(op.smem->cols) : "") << " + lc]);";
          break;
        }
        std::string idx;
        auto term = [&](const std::string& var, const std::string& stride) {
          if (stride.empty()) return;
          idx += (idx.empty() ? "" : " + ") + std::string("(long long)") + var + " * " + stride;
        };
        term("batch_idx", op.batchStride);
        term("row", op.rowStride);
        term("col", op.colStride);
        os << "heddle::to_float(" << op.tensorParam << "[" << (idx.empty() ? "0" : idx) << "]);";
        break;
      }
      case OpKind::Add: os << a << " + " << b << ";"; break;
      case OpKind::Sub: os << a << " - " << b << ";"; break;
      case OpKind::Mul: os << a << " * " << b << ";"; break;
      case OpKind::Div: os << a << " / " << b << ";"; break;
      case OpKind::Relu: os << "heddle::relu(" << a << ");"; break;
      case OpKind::GeluErf: os << "heddle::gelu_erf(" << a << ");"; break;
      case OpKind::GeluTanh: os << "heddle::gelu_tanh(" << a << ");"; break;
      case OpKind::Silu: os << "heddle::silu(" << a << ");"; break;
      case OpKind::Sigmoid: os << "heddle::sigmoid(" << a << ");"; break;
      case OpKind::Tanh: os << "heddle::tanh(" << a << ");"; break;
      case OpKind::Neg: os << "-" << a << ";"; break;
      case OpKind::Cast: os << "heddle::to_float(heddle::from_float<" << dtypeCudaName(op.dtype) << ">(" << a << "));"; break;
      default: os << "0.0f; // unsupported";
    }
    os << "\n";
  }
}

namespace {

// Every epilogue of a wgmma kernel: registers -> D, registers -> sC (raw staging), or sC -> sD for the
// TMA store. The printer spells out one statement per fragment element (a macro over compile-time
// (fm, fn, r)): a loop with a large body (an epilogue with erf) stops being unrolled at some size,
// and a dynamically indexed accumulator array lives in local memory.
void fragmentEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& ind) {
  const auto& tl = k.tile;
  const int FM = (tl.coop ? tl.bm / tl.mmaWarpgroups : tl.bm) / 64, FN = tl.bn / 8;
  const std::string w = e.warpShift ? "warp - " + std::to_string(e.warpShift) : "warp";
  std::ostringstream body;
  body << "const int lr = Mma::row_of(" << w << ", lane, fm, r), lc = Mma::col_of(" << w << ", lane, fn, r);\n";
  auto cell = [&](const kir::Buffer& b, const kir::IExpr& st) {
    return b.name + "[(" + st.str() + ") * " + std::to_string(b.rows * b.cols) + " + lr * " + std::to_string(b.cols) +
           " + lc]";
  };
  if (e.raw) {
    if (!e.to) fail<HeddleError>("printer: ", kir::describe(e), " stores raw accumulators nowhere");
    body << cell(*e.to, e.toStage) << " = " << e.acc->name << ".acc[fm][fn][r];\n";
  } else {
    body << "const int row = m0 + lr, col = n0 + lc;\n";
    body << "if (row < M && col < N) {" << (e.to ? "  /* the TMA store skips what lies outside D */" : "") << "\n";
    body << "const float r0 = " << (e.from ? cell(*e.from, e.fromStage) : e.acc->name + ".acc[fm][fn][r]") << ";\n";
    epilogueOps(body, k, e.operandStage, "");
    const std::string v = "heddle::from_float<" + std::string(dtypeCudaName(k.outDtype)) + ">(r" +
                          std::to_string(k.epilogueResult) + ")";
    if (e.to)
      body << e.to->name << "[(" << e.toStage.str() << ") * " << e.to->rows * e.to->cols << " + " << tileD(k)
           << "::offset(lr, lc)] = " << v << ";\n";
    else
      body << "D[(long long)row * ldd + col] = " << v << ";\n";
    for (auto& o : k.extraOutputs)  // the TMA store path refuses further outputs (warp_specialize)
      body << o.param << "[(long long)row * ldd + col] = heddle::from_float<" << dtypeCudaName(o.dtype) << ">(r"
           << o.reg << ");\n";
    body << "}\n";
  }
  os << ind << "// " << kir::describe(e) << ": this thread's wgmma fragment, element by element\n";
  os << "#define HEDDLE_FRAGMENT(fm, fn, r) do { \\\n";
  std::istringstream lines(body.str());
  for (std::string line; std::getline(lines, line);) os << ind << "  " << line << " \\\n";
  os << ind << "} while (0)\n";
  for (int fm = 0; fm < FM; ++fm)
    for (int fn = 0; fn < FN; ++fn) {
      os << ind;
      for (int r = 0; r < 4; ++r) os << (r ? " " : "") << "HEDDLE_FRAGMENT(" << fm << ", " << fn << ", " << r << ");";
      os << "\n";
    }
  os << "#undef HEDDLE_FRAGMENT\n";
}

}  // namespace

bool printNode(std::ostream& os, const kir::Kernel& k, const kir::Node& n, const std::string& ind) {
  switch (n.kind) {
    case kir::NodeKind::Alloc: {
      auto& b = *static_cast<const kir::Alloc&>(n).buf;
      if (b.role != "mbar") return false;
      os << ind << "unsigned long long* " << b.name << " = reinterpret_cast<unsigned long long*>(heddle_smem + "
         << b.offset << ");  // " << b.stages << " mbarrier(s)\n";
      return true;
    }
    case kir::NodeKind::TileLoad: {
      auto& t = static_cast<const kir::TileLoad&>(n);
      if (t.kind != LoadKind::TmaLoad) return false;
      if (!t.mbar) fail<HeddleError>("printer: ", kir::describe(t), " completes on no mbarrier");
      if (t.dst->role == "epi_tma") {  // a bias row or residual tile: one unswizzled [rows, cols] box
        os << ind << "heddle::sm90::tma_load_plain<" << t.dst->rows << ", " << t.dst->cols << ">("
           << stagePtr(*t.dst, t.stage) << ", &" << t.tensorMap << ", " << t.row0.str() << ", " << t.col0.str()
           << ", " << mbarPtr(*t.mbar, t.mbarIndex) << ");\n";
        return true;
      }
      bool batched = false;  // a rank-2 B under a batched A is one matrix: a 2-D map
      for (auto& m : k.tensorMaps)
        if (m.param == t.tensorMap) batched = m.batched;
      const int rank = batched ? 3 : 2;
      os << ind << "heddle::sm90::tma_load_tile<Mma::Tile" << t.dst->role << ", " << rank << ">("
         << stagePtr(*t.dst, t.stage) << ", &" << t.tensorMap << ", " << t.row0.str() << ", " << t.col0.str() << ", "
         << (batched ? "batch_idx" : "0") << ", " << mbarPtr(*t.mbar, t.mbarIndex) << ");\n";
      return true;
    }
    case kir::NodeKind::EpilogueStore: {
      if (!k.tile.wgmma || static_cast<const kir::EpilogueStore&>(n).partial != kir::EpilogueStore::Partial::None)
        return false;  // split-K partials: the C-like printer's grid helpers
      fragmentEpilogue(os, k, static_cast<const kir::EpilogueStore&>(n), ind);
      return true;
    }
    case kir::NodeKind::Let: {
      auto& l = static_cast<const kir::Let&>(n);
      os << ind << "const int " << l.var << " = " << l.value.str() << ";\n";
      return true;
    }
    case kir::NodeKind::TmaStore: {
      auto& t = static_cast<const kir::TmaStore&>(n);
      os << ind << "heddle::sm90::tma_store_tile<" << tileD(k) << ", 2>(&" << t.tensorMap << ", " << t.row0.str()
         << ", " << t.col0.str() << ", 0, " << stagePtr(*t.src, t.stage) << ");\n";
      return true;
    }
    default: return false;
  }
}

std::string syncOp(const kir::Kernel& k, const kir::Sync& s) {
  const std::string acc = s.buf ? s.buf->name : "acc";
  auto bar = [&] {
    if (!s.buf) fail<HeddleError>("printer: ", kir::describe(s), " names no mbarrier");
    return mbarPtr(*s.buf, s.index);
  };
  switch (s.sync) {
    case kir::SyncKind::MbarInit: return "heddle::sm90::mbar_init(" + bar() + ", " + std::to_string(s.count) + ");";
    case kir::SyncKind::MbarArrive: return "heddle::sm90::mbar_arrive(" + bar() + ");";
    case kir::SyncKind::MbarArriveExpectTx:
      return "heddle::sm90::mbar_arrive_expect_tx(" + bar() + ", " + std::to_string(s.arg) + ");";
    case kir::SyncKind::MbarWait: return "heddle::sm90::mbar_wait(" + bar() + ", " + s.parity.str() + ");";
    case kir::SyncKind::WgmmaFence: return acc + ".fence();";
    case kir::SyncKind::WgmmaCommit: return acc + ".commit();";
    case kir::SyncKind::WgmmaWait: return acc + ".wait<" + std::to_string(s.arg) + ">();";
    case kir::SyncKind::FenceProxyAsync: return "heddle::sm90::fence_proxy_async();";
    case kir::SyncKind::SetMaxNReg:
      return std::string("heddle::sm90::setmaxnreg_") + (s.count > 0 ? "inc" : "dec") + "<" + std::to_string(s.arg) +
             ">();";
    case kir::SyncKind::NamedBarrier:
      return "heddle::sm90::named_barrier(" + std::to_string(s.arg) + ", " + std::to_string(s.count) + ");";
    case kir::SyncKind::BulkCommit: return "heddle::sm90::bulk_commit();";
    case kir::SyncKind::BulkWaitRead: return "heddle::sm90::bulk_wait_read<" + std::to_string(s.arg) + ">();";
    default: (void)k; return "";
  }
}

std::string mmaType(const kir::Kernel& k) {
  const auto& t = k.tile;
  std::ostringstream os;
  os << "heddle::MmaSm90<" << t.bm << ", " << t.bn << ", " << t.bk << ", " << t.mmaWarpgroups << ", "
     << (t.coop ? "true" : "false") << ", " << (t.aKMajor ? "true" : "false") << ", " << (t.bKMajor ? "true" : "false")
     << ", T, " << t.mmaWarpBase << ">";
  return os.str();
}

}  // namespace heddle::sm90print
