// Blackwell spellings for the CUDA printer (see tcgen05_printer.h).
#include "heddle/codegen/tcgen05_printer.h"

#include <sstream>

#include "heddle/codegen/printer.h"
#include "heddle/codegen/wgmma_printer.h"

namespace heddle::tcgen05print {

namespace {

std::string stagePtr(const kir::Buffer& b, const kir::IExpr& stage) {
  std::string s = b.name;
  if (!(stage.isConst() && stage.constValue() == 0))
    s += " + (" + stage.str() + ") * " + std::to_string(b.rows * b.cols);
  return s;
}

std::string tmemSlot(const kir::Kernel& k) {
  for (auto& b : k.buffers)
    if (b->role == "tmem") return b->name;
  fail<HeddleError>("printer: tcgen05 kernel ", k.name, " has no tensor-memory slot");
}

// The epilogue from tensor memory: each thread of the epilogue warpgroup owns tile row 32*(warp%4) + lane
// (the 32x32b lane mapping) and walks its bn columns 32 at a time (tcgen05.ld x32, wait::ld). A TMA-loaded
// bias / residual is read from its ring slot e.operandStage at the tile's (lr,) lc.
void tmemEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& ind) {
  const std::string in = ind + "  ", in2 = ind + "    ", in3 = ind + "      ";
  os << ind << "// " << kir::describe(e) << ": tile row 32*(warp%4)+lane from tensor memory, 32 columns at a time\n";
  os << ind << "{\n";
  os << in << "const unsigned taddr = Mma::row_addr(" << tmemSlot(k) << "[0], warp, " << e.fromStage.str() << ");\n";
  bool fromSmem = false, rows = false;  // an operand from its ring slot; one with rows (a residual tile, not a bias)
  for (auto& op : k.epilogue) fromSmem |= op.smem != nullptr, rows |= op.smem && op.smem->rows > 1;
  if (rows) os << in << "const int lr = 32 * (warp % 4) + lane;\n";
  os << in << "const int row = m0 + 32 * (warp % 4) + lane;\n";
  os << in << "#pragma unroll 1\n";
  os << in << "for (int c0 = 0; c0 < " << k.tile.bn << "; c0 += 32) {\n";
  os << in2 << "float v[32];\n";
  os << in2 << "heddle::sm100::tmem_load_32(taddr + c0, v);  // tcgen05.ld 32x32b.x32 + tcgen05.wait::ld\n";
  os << in2 << "#pragma unroll\n";
  os << in2 << "for (int j = 0; j < 32; ++j) {\n";
  os << in3 << "const int col = n0 + c0 + j;\n";
  os << in3 << "if (row >= M || col >= N) continue;\n";
  os << in3 << "const float r0 = v[j];\n";
  if (fromSmem) os << in3 << "const int lc = c0 + j;\n";
  epilogueOps(os, k, e.operandStage, in3);
  os << in3 << "D[(long long)row * ldd + col] = heddle::from_float<" << dtypeCudaName(k.outDtype) << ">(r"
     << k.epilogueResult << ");\n";
  for (auto& o : k.extraOutputs)
    os << in3 << o.param << "[(long long)row * ldd + col] = heddle::from_float<" << dtypeCudaName(o.dtype) << ">(r"
       << o.reg << ");\n";
  os << in2 << "}\n" << in << "}\n" << ind << "}\n";
}

}  // namespace

bool printNode(std::ostream& os, const kir::Kernel& k, const kir::Node& n, const std::string& ind) {
  if (k.tile.mma != MmaKind::Tcgen05) return false;
  switch (n.kind) {
    case kir::NodeKind::Alloc: {
      auto& b = *static_cast<const kir::Alloc&>(n).buf;
      if (b.role != "tmem") return false;
      os << ind << "unsigned* " << b.name << " = reinterpret_cast<unsigned*>(heddle_smem + " << b.offset
         << ");  // the tensor-memory address tcgen05.alloc writes\n";
      return true;
    }
    case kir::NodeKind::MmaStep: {
      auto& m = static_cast<const kir::MmaStep&>(n);
      if (m.kind != MmaKind::Tcgen05) return false;
      os << ind << "Mma::mma(" << tmemSlot(k) << "[0], " << m.accStage.str() << ", " << stagePtr(*m.a, m.stageA) << ", "
         << stagePtr(*m.b, m.stageB) << ", " << m.accumulate.str() << ");  // " << kir::describe(m) << "\n";
      return true;
    }
    case kir::NodeKind::EpilogueStore: {
      auto& e = static_cast<const kir::EpilogueStore&>(n);
      if (!e.tmem) return false;
      tmemEpilogue(os, k, e, ind);
      return true;
    }
    default: return false;
  }
}

std::string syncOp(const kir::Kernel& k, const kir::Sync& s) {
  auto bar = [&] {
    if (!s.buf) fail<HeddleError>("printer: ", kir::describe(s), " names no mbarrier");
    return "(" + s.buf->name + " + (" + s.index.str() + "))";
  };
  switch (s.sync) {
    case kir::SyncKind::TmemAlloc:
      return "heddle::sm100::tmem_alloc(" + tmemSlot(k) + ", " + std::to_string(s.arg) + ");";
    case kir::SyncKind::TmemRelinquish: return "heddle::sm100::tmem_relinquish();";
    case kir::SyncKind::TmemDealloc:
      return "heddle::sm100::tmem_dealloc(" + tmemSlot(k) + "[0], " + std::to_string(s.arg) + ");";
    case kir::SyncKind::TcgenCommit: return "heddle::sm100::commit(" + bar() + ");";
    case kir::SyncKind::TcgenFenceBefore: return "heddle::sm100::fence_before();";
    case kir::SyncKind::TcgenFenceAfter: return "heddle::sm100::fence_after();";
    default: return "";
  }
}

std::string mmaType(const kir::Kernel& k) {
  const auto& t = k.tile;
  std::ostringstream os;
  os << "heddle::MmaSm100<" << t.bm << ", " << t.bn << ", " << t.bk << ", " << (t.aKMajor ? "true" : "false") << ", "
     << (t.bKMajor ? "true" : "false") << ", T";
  if (isFloat8(t.inDtype)) os << ", " << dtypeCudaName(t.inDtypeB);  // kind::f8f6f4: B's format of its own
  os << ">";
  return os.str();
}

}  // namespace heddle::tcgen05print
