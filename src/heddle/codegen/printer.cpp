// The C-like printer shared by the CUDA and HIP backends.
#include "heddle/codegen/printer.h"

#include "heddle/codegen/tcgen05_printer.h"
#include "heddle/codegen/wgmma_printer.h"

#include <cmath>
#include <cstdlib>
#include <iomanip>

namespace heddle {

std::string CLikePrinter::paramDecl(const kir::Param& p) {
  switch (p.kind) {
    case kir::Param::TensorPtr:
      return std::string(p.isConst ? "const " : "") + dtypeCudaName(p.dtype) + "* __restrict__ " + p.name;
    case kir::Param::Int32: return "int " + p.name;
    case kir::Param::Int64: return "long long " + p.name;
    case kir::Param::Float: return "float " + p.name;
    case kir::Param::TensorMap: return "const __grid_constant__ heddle::TmaDesc " + p.name;
    case kir::Param::FlagPtr: return "int* " + p.name;
    case kir::Param::IndexPtr: return "const int* __restrict__ " + p.name;
  }
  return "";
}

std::string CLikePrinter::bufferPtr(const kir::Buffer& b, const kir::IExpr& stage) {
  std::string s = b.name;
  if (!(stage.isConst() && stage.constValue() == 0))
    s += " + (" + stage.str() + ") * " + std::to_string(b.rows * b.cols);
  return s;
}

void CLikePrinter::node(const kir::Node& n, int d) {
  if (tcgen05print::printNode(os_, *k_, n, ind(d))) return;  // Blackwell nodes (codegen/tcgen05_printer.cpp)
  if (wgmmaprint::printNode(os_, *k_, n, ind(d))) return;    // Hopper nodes (codegen/wgmma_printer.cpp)
  switch (n.kind) {
    case kir::NodeKind::For: {
      auto& f = static_cast<const kir::ForLoop&>(n);
      os_ << ind(d) << "// " << kir::loopStageName(f.stage) << " loop"
          << (f.cbStages ? " (circular buffer: " + std::to_string(f.cbStages) + " stages, prefetch " +
                               std::to_string(f.cbPrefetch) + ")"
                         : "")
          << "\n";
      os_ << ind(d) << "for (int " << f.var << " = " << f.start.str() << "; " << f.var << " < " << f.stop.str()
          << "; ++" << f.var << ") {\n";
      block(f.body, d + 1);
      os_ << ind(d) << "}\n";
      break;
    }
    case kir::NodeKind::If: {
      auto& i = static_cast<const kir::IfThenElse&>(n);
      // an elected single-thread issue: a warp-uniform branch to the warp, then elect.sync picks one lane
      // (the lowest, the thread the kernel IR's `tid == 32 * W` names)
      const bool elect = i.electWarp >= 0 && target_.electSync;
      os_ << ind(d) << "if ("
          << (elect ? "warp == " + std::to_string(i.electWarp) + " && heddle::elect_one_sync()" : i.cond.str())
          << ") {\n";
      block(i.thenBody, d + 1);
      if (!i.elseBody.stmts.empty()) {
        os_ << ind(d) << "} else {\n";
        block(i.elseBody, d + 1);
      }
      os_ << ind(d) << "}\n";
      break;
    }
    case kir::NodeKind::Alloc: {
      auto& b = *static_cast<const kir::Alloc&>(n).buf;
      if (b.memory == MemoryType::Shared)
        os_ << ind(d) << dtypeCudaName(b.dtype) << "* " << b.name << " = reinterpret_cast<" << dtypeCudaName(b.dtype)
            << "*>(" << smemBase(*k_) << " + " << b.offset << ");  // " << b.stages << " x " << b.rows << "x" << b.cols
            << "\n";
      else os_ << ind(d) << "Mma " << b.name << ";\n" << ind(d) << b.name << ".zero();\n";
      break;
    }
    case kir::NodeKind::TileLoad: {
      auto& t = static_cast<const kir::TileLoad&>(n);
      const bool async = t.kind == LoadKind::CpAsync || t.kind == LoadKind::AsyncLds;
      for (auto& p : t.parts) {  // a matmul group's stage: each part's box lands at its offset of the stage
        const bool rows = t.partAxis == 0;
        auto plus = [](const kir::IExpr& e, int off) { return off ? (e + off).str() : e.str(); };
        os_ << ind(d) << "heddle::" << (async ? "copy_part_async" : "copy_part_sync") << "<" << t.dst->rows << ", "
            << t.dst->cols << ", " << t.boxRows() << ", " << t.boxCols() << ", " << t.vec << ", " << k_->launch.threads
            << ">(" << bufferPtr(*t.dst, t.stage) << ", " << (rows ? p.dstOffset : 0) << ", "
            << (rows ? 0 : p.dstOffset) << ", " << p.src << ", " << p.ld << ", " << plus(t.row0, rows ? p.srcOffset : 0)
            << ", " << plus(t.col0, rows ? 0 : p.srcOffset) << ", " << t.rowsBound.str() << ", " << t.colsBound.str()
            << ", tid);\n";
      }
      if (!t.parts.empty()) break;
      const char* fn = async ? "copy_tile_async" : "copy_tile_sync";
      os_ << ind(d) << "heddle::" << fn << "<" << t.dst->rows << ", " << t.dst->cols << ", " << t.vec << ", "
          << k_->launch.threads << ">(" << bufferPtr(*t.dst, t.stage) << ", " << t.src << ", " << t.ld << ", "
          << t.row0.str() << ", " << t.col0.str() << ", " << t.rowsBound.str() << ", " << t.colsBound.str()
          << ", tid);\n";
      break;
    }
    case kir::NodeKind::MmaStep: {
      auto& m = static_cast<const kir::MmaStep&>(n);
      os_ << ind(d) << m.acc->name << ".step(" << bufferPtr(*m.a, m.stageA) << ", " << bufferPtr(*m.b, m.stageB)
          << ", warp, lane);\n";
      break;
    }
    case kir::NodeKind::EpilogueStore: {
      auto& e = static_cast<const kir::EpilogueStore&>(n);
      if (e.partial == kir::EpilogueStore::Partial::None) {
        if (e.columnPairs) pairEpilogue(*k_, d);
        else epilogue(*k_, d);
        break;
      }
      // split-K (heddle_grid.cuh): the thread's whole fragment, no bounds (the workspace holds whole tiles);
      // in a warp-specialized kernel the MMA warpgroups hold the accumulators, numbered from their first thread
      const int base = 32 * k_->tile.mmaWarpBase;
      const int threads = base ? 128 * k_->tile.mmaWarpgroups : k_->launch.threads;
      const std::string tid = base ? "tid - " + std::to_string(base) : "tid";
      const std::string tpl = "<sizeof(" + e.acc->name + ".acc) / sizeof(float), " + std::to_string(threads) + ">";
      const std::string slot = "ws + (long long)(" + e.slot.str() + ") * " + std::to_string(k_->tile.bm * k_->tile.bn);
      os_ << ind(d) << "// " << kir::describe(e) << "\n";
      if (e.partial == kir::EpilogueStore::Partial::Store)
        os_ << ind(d) << "heddle::grid::store_partial" << tpl << "(&" << e.acc->name << ".acc[0][0][0], " << slot
            << ", flags + (" << e.slot.str() << "), " << tid << ");\n";
      else
        os_ << ind(d) << "heddle::grid::add_partials" << tpl << "(&" << e.acc->name << ".acc[0][0][0], " << slot << ", "
            << e.count << ", flags + (" << e.slot.str() << "), " << tid << ");\n";
      break;
    }
    case kir::NodeKind::SmemAccess:
      fail<HeddleError>("printer: generic access '", kir::describe(n), "' has no code; it exists for planner tests");
    case kir::NodeKind::Sync: {
      auto& s = static_cast<const kir::Sync&>(n);
      os_ << ind(d) << syncOp(s);
      if (s.reason >= 0) os_ << "  // sync " << s.reason << ": " << k_->syncPlan.entries[s.reason].hazards;
      os_ << "\n";
      break;
    }
    case kir::NodeKind::Comment: os_ << ind(d) << "// " << static_cast<const kir::Comment&>(n).text << "\n"; break;
    case kir::NodeKind::Block: block(static_cast<const kir::Block&>(n), d); break;
    case kir::NodeKind::Let:
    case kir::NodeKind::TmaStore:
    case kir::NodeKind::MmaPromote: fail<HeddleError>("printer: ", kir::describe(n), " is a Hopper node");
  }
}

void CLikePrinter::block(const kir::Block& b, int d) {
  for (auto& s : b.stmts) node(*s, d);
}

std::string epilogueGlobalIndex(const kir::EpiOp& op, const std::string& col, bool unitCol) {
  std::string idx;
  auto term = [&](const std::string& var, const std::string& stride, bool scaled) {
    if (stride.empty()) return;
    idx += (idx.empty() ? "" : " + ") + std::string("(long long)") + var + (scaled ? " * " + stride : "");
  };
  term("batch_idx", op.batchStride, true);
  term("row", op.rowStride, true);
  term(col, op.colStride, !unitCol);
  return idx.empty() ? "0" : idx;
}

std::string epilogueGlobalRead(const kir::EpiOp& op, const std::string& col) {
  return "heddle::to_float(" + op.tensorParam + "[" + epilogueGlobalIndex(op, col) + "])";
}

std::string floatLit(double v) {
  // The epilogue computes in float: the value rounds to float (nearest, ties to even; the fusion
  // refuses finite values beyond float range). inf and NaN have no literal: spell their bits.
  const float f = static_cast<float>(v);
  if (std::isnan(f)) return "heddle::f32_bits(0x7fc00000u)";
  if (std::isinf(f)) return f > 0 ? "heddle::f32_bits(0x7f800000u)" : "heddle::f32_bits(0xff800000u)";
  std::ostringstream os;
  os << std::setprecision(9) << f;  // 9 significant digits identify every float
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s + "f";
}

namespace {

// The accumulator buffer of a register-MMA kernel ("acc" when it has none: a hand-built kernel).
std::string accName(const kir::Kernel& k) {
  std::string acc = "acc";
  for (auto& b : k.buffers)
    if (b->memory == MemoryType::Local) acc = b->name;
  return acc;
}

// HEDDLE_TEST_PRINTER_BUG=<name> (tests only): whether the printer is asked to print that bug.
bool printerBug(const char* name) {
  const char* bug = std::getenv("HEDDLE_TEST_PRINTER_BUG");
  return bug && std::string(bug) == name;
}

// A matmul group walks member 0's fragment columns fn < FN / P; member p's element is at fn + p * FN / P.
std::string fnEnd(const kir::Kernel& k) {
  return k.tile.parts > 1 ? "Mma::FN / " + std::to_string(k.tile.parts) : "Mma::FN";
}

}  // namespace

void epilogueOpsPair(std::ostream& os, const kir::Kernel& k, const kir::IExpr& stage) {
  const std::string P = "heddle::pairf";
  for (auto& op : k.epilogue) {
    std::string a = "r" + std::to_string(op.a), b = op.b >= 0 ? "r" + std::to_string(op.b) : "";
    auto bin = [&](const char* o) {
      auto h = [&](const char* f) {
        std::string x = a + "." + f, y = op.scalar ? floatLit(*op.scalar) : b + "." + f;
        if (op.scalar && op.scalarOnLeft) std::swap(x, y);
        return x + " " + o + " " + y;
      };
      return "{" + h("x") + ", " + h("y") + "}";
    };
    os << "const " << P << " r" << op.dst << " = ";
    switch (op.op) {
      case OpKind::Input: {
        if (op.smem) {
          const std::string at = op.smem->name + "[(" + stage.str() + ") * " +
                                 std::to_string(op.smem->rows * op.smem->cols) +
                                 (op.smem->rows > 1 ? " + lr * " + std::to_string(op.smem->cols) : "") + " + lc0";
          if (dtypeBytes(op.dtype) == 2) os << "heddle::unpack2(" << at << "]);";
          else os << "{heddle::to_float(" << at << "]), heddle::to_float(" << at << " + 1])};";
          break;
        }
        if (op.pairs) {  // vectorize_epilogue_reads: one load of the aligned pair at colv
          os << "heddle::load_pair(" << op.tensorParam << " + " << epilogueGlobalIndex(op, "colv", true) << ");";
          break;
        }
        os << "{" << epilogueGlobalRead(op, "col_0") << ", " << epilogueGlobalRead(op, "col_1") << "};";
        break;
      }
      case OpKind::Matmul: {  // member op.a of a matmul group: its accumulator slice, same pair
        const std::string at =
            accName(k) + ".acc[fm][(fn) + " + std::to_string(op.a) + " * (" + fnEnd(k) + ")][2 * (h)";
        os << "{" << at << "], " << at << " + 1]};";
        break;
      }
      case OpKind::Add: os << bin("+") << ";"; break;
      case OpKind::Sub: os << bin("-") << ";"; break;
      case OpKind::Mul: os << bin("*") << ";"; break;
      case OpKind::Div: os << bin("/") << ";"; break;
      case OpKind::Relu: os << "{heddle::relu(" << a << ".x), heddle::relu(" << a << ".y)};"; break;
      case OpKind::GeluErf: os << "heddle::ool::gelu_erf(" << a << ");"; break;
      case OpKind::GeluTanh: os << "heddle::ool::gelu_tanh(" << a << ");"; break;
      case OpKind::Silu: os << "heddle::ool::silu(" << a << ");"; break;
      case OpKind::Sigmoid: os << "heddle::ool::sigmoid(" << a << ");"; break;
      case OpKind::Tanh: os << "heddle::ool::tanh(" << a << ");"; break;
      case OpKind::Neg: os << "{-" << a << ".x, -" << a << ".y};"; break;
      case OpKind::Cast: {
        const std::string t = dtypeCudaName(op.dtype);
        os << "{heddle::to_float(heddle::from_float<" << t << ">(" << a << ".x)), heddle::to_float(heddle::from_float<"
           << t << ">(" << a << ".y))};";
        break;
      }
      default: os << "{0.0f, 0.0f}; // unsupported";
    }
    os << "\n";
  }
}

bool readsPairs(const kir::Kernel& k) {
  for (auto& op : k.epilogue)
    if (op.pairs) return true;
  return false;
}

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
        os << epilogueGlobalRead(op, "col") << ";";
        break;
      }
      case OpKind::Matmul:  // member op.a of a matmul group: its accumulator slice, same element
        os << accName(k) << ".acc[fm][fn + " << op.a << " * (" << fnEnd(k) << ")][r];";
        break;
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
      case OpKind::Cast:
        os << "heddle::to_float(heddle::from_float<" << dtypeCudaName(op.dtype) << ">(" << a << "));";
        break;
      default: os << "0.0f; // unsupported";
    }
    os << "\n";
  }
}

// The register epilogue in column pairs (EpilogueStore::columnPairs: the mma.sync m16n8 fragment, whose
// registers 2h and 2h+1 are columns c, c+1 of one row, c even), per row block fm in two unrolled walks over
// its pairs (fn, h):
//   1. per pair inside the tile edge (row < M, c < N): the pair program (epilogueOpsPair: activations out
//      of line, one copy per kernel; operands read in pairs under vec_e=2 at colv = c, whole because the
//      launch refuses them unless their column count is even: passes/vectorize_epilogue_reads.cpp), the
//      result held packed (pack_pair: one cvt.rn.bf16x2.f32 per 16-bit pair) in <out>_v[fn][h];
//   2. per pair inside the edge: one 32-bit store of the packed pair (64-bit for f32) when the output's
//      pairs are all whole and aligned -- pair_aligned(D, ldd, N), a kernel-uniform check of the pointer,
//      ldd and N --, else scalar stores, the second one only inside N; extra outputs alike.
// Two walks, so that the one branch on the kernel-uniform check is over stores alone: with the store in the
// first walk, NVVM threads that branch through the whole epilogue and prints the pair program twice. Per row
// block, so that at most FN pairs are held at once: held for the whole tile (64 more registers at 128x128),
// the stream-K kernel spilled (255 registers, 48 bytes).
void CLikePrinter::pairEpilogue(const kir::Kernel& k, int d) {
  const std::string acc = accName(k), fe = fnEnd(k);
  const int parts = k.tile.parts;
  struct Out {
    std::string param;
    DType dtype;
    int reg;
  };
  std::vector<Out> outs{{"D", k.outDtype, k.epilogueResult}};
  for (auto& o : k.extraOutputs) outs.push_back({o.param, o.dtype, o.reg});
  const int e = d + 1;  // inside the fm loop
  auto pairs = [&] {    // the (fn, h) walk of one fragment row block fm, up to the tile-edge check
    os_ << ind(e) << "#pragma unroll\n" << ind(e) << "for (int fn = 0; fn < " << fe << "; ++fn)\n";
    os_ << ind(e + 1) << "#pragma unroll\n" << ind(e + 1) << "for (int h = 0; h < 2; ++h) {\n";
    os_ << ind(e + 2) << "const int row = m0 + Mma::row_of(warp, lane, fm, 2 * h);\n";
    os_ << ind(e + 2) << "const int col = n0 + "
        << (parts > 1 ? "Mma::part_col_of<" + std::to_string(parts) + ">" : std::string("Mma::col_of"))
        << "(warp, lane, fn, 0);  /* even */\n";
    os_ << ind(e + 2)
        << (printerBug("epilogue_row_bound") ? "if (row > M || col >= N) continue;\n"
                                             : "if (row >= M || col >= N) continue;\n");
  };
  os_ << ind(d)
      << "// epilogue: per accumulator pair (columns c, c+1 of one fragment row), predicated on the tile edge;\n"
      << ind(d)
      << "// per row block fm the results held packed, then stored (one 32-bit store per pair when aligned)\n";
  // one flag for every output: per-output flags let NVVM unswitch the store walk once per combination
  os_ << ind(d) << "const bool pair_st = ";
  for (size_t i = 0; i < outs.size(); ++i)
    os_ << (i ? " && " : "") << "heddle::pair_aligned(" << outs[i].param << ", ldd, N)";
  os_ << ";  // every output's pairs whole and aligned (kernel-uniform)\n";
  os_ << ind(d) << "#pragma unroll\n" << ind(d) << "for (int fm = 0; fm < Mma::FM; ++fm) {\n";
  for (auto& o : outs)
    os_ << ind(e) << "typename heddle::pair_reg<" << dtypeCudaName(o.dtype) << ">::type " << o.param << "_v[" << fe
        << "][2];\n";
  pairs();
  std::ostringstream body;
  body << "const int col_0 = col, col_1 = col + 1 < N ? col + 1 : col;  /* scalar reads stay inside N */\n";
  body << "(void)col_0, (void)col_1;\n";
  if (readsPairs(k)) body << "const int colv = col;  /* the aligned pair read (vec_e=2: N even) */\n";
  body << "const heddle::pairf r0 = {" << acc << ".acc[fm][fn][2 * (h)], " << acc << ".acc[fm][fn][2 * (h) + 1]};\n";
  epilogueOpsPair(body, k, kir::IExpr(0));
  for (auto& o : outs)
    body << o.param << "_v[fn][h] = heddle::pack_pair<" << dtypeCudaName(o.dtype) << ">(r" << o.reg << ");\n";
  std::istringstream lines(body.str());
  for (std::string line; std::getline(lines, line);) os_ << ind(e + 2) << line << "\n";
  os_ << ind(e + 1) << "}\n";
  pairs();
  os_ << ind(e + 2) << "const long long at = (long long)row * ldd + col;\n";
  for (auto& o : outs)
    os_ << ind(e + 2) << "heddle::store_pair(" << o.param << " + at, " << o.param
        << "_v[fn][h], pair_st, col + 1 < N);\n";
  os_ << ind(e + 1) << "}\n";
  os_ << ind(d) << "}\n";
}

void CLikePrinter::epilogue(const kir::Kernel& k, int d) {
  const std::string acc = accName(k);
  os_ << ind(d) << "// epilogue: per accumulator element, predicated on the tile edge\n";
  os_ << ind(d) << "#pragma unroll\n" << ind(d) << "for (int fm = 0; fm < Mma::FM; ++fm)\n";
  // a matmul group: fn walks member 0's slice; member p's element sits at fn + p * FN / P (same thread)
  const int parts = k.tile.parts;
  os_ << ind(d + 1) << "#pragma unroll\n" << ind(d + 1) << "for (int fn = 0; fn < " << fnEnd(k) << "; ++fn)\n";
  os_ << ind(d + 2) << "#pragma unroll\n" << ind(d + 2) << "for (int r = 0; r < 4; ++r) {\n";
  int e = d + 3;
  os_ << ind(e) << "const int row = m0 + Mma::row_of(warp, lane, fm, r);\n";
  os_ << ind(e) << "const int col = n0 + "
      << (parts > 1 ? "Mma::part_col_of<" + std::to_string(parts) + ">" : std::string("Mma::col_of"))
      << "(warp, lane, fn, r);\n";
  // HEDDLE_TEST_PRINTER_BUG=epilogue_row_bound (tests only): prints `row > M`, an off-by-one that NVRTC
  // compiles and the kernel-IR simulator cannot see (it never reads this text); the interpreter of the
  // printed source reports the out-of-bounds store (tests/interp/test_interpret_checks.py).
  os_ << ind(e)
      << (printerBug("epilogue_row_bound") ? "if (row > M || col >= N) continue;\n"
                                           : "if (row >= M || col >= N) continue;\n");
  os_ << ind(e) << "const float r0 = " << acc << ".acc[fm][fn][r];\n";
  epilogueOps(os_, k, kir::IExpr(0), ind(e));
  os_ << ind(e) << "D[(long long)row * ldd + col] = heddle::from_float<" << dtypeCudaName(k.outDtype) << ">(r"
      << k.epilogueResult << ");\n";
  for (auto& o : k.extraOutputs)
    os_ << ind(e) << o.param << "[(long long)row * ldd + col] = heddle::from_float<" << dtypeCudaName(o.dtype) << ">(r"
        << o.reg << ");\n";
  os_ << ind(d + 2) << "}\n";
}

// The grouped matmul's tile walk (lower/build/grouped_walk.h, docs/grouped.md): the m-tile block index is a
// linear index over every group's m tiles; the CTA finds its group from the group ends offs[0..E) (plain
// global loads of a read-only launch argument), exits when the index is past the last group's tiles, and
// runs the plain kernel with M = the group's end row, m0 absolute, batch_idx = the expert, B = w[expert].
void CLikePrinter::groupedWalk(const kir::Kernel& k) {
  const auto& t = k.tile;
  const char* mt = t.swapBlocks ? "blockIdx.x" : "blockIdx.y";
  os_ << "  // grouped tile walk: " << mt << " -> (expert g_e, its m tile at row g_m0; the group ends at g_end)\n";
  os_ << "  int g_e = -1, g_m0 = 0, g_end = 0;\n";
  os_ << "  {\n";
  os_ << "    int start = 0, before = 0;  // the group's first row; the m tiles of the groups before it\n";
  os_ << "    for (int e = 0; e < E; ++e) {\n";
  os_ << "      const int end = offs[e];\n";
  os_ << "      const int tiles = end > start ? (end - start + " << t.bm << " - 1) / " << t.bm << " : 0;\n";
  os_ << "      if ((int)" << mt << " < before + tiles) {\n";
  os_ << "        g_e = e, g_m0 = start + ((int)" << mt << " - before) * " << t.bm << ", g_end = end;\n";
  os_ << "        break;\n";
  os_ << "      }\n";
  os_ << "      before += tiles, start = end;\n";
  os_ << "    }\n";
  os_ << "  }\n";
  os_ << "  if (g_e < 0) return;  // a surplus tile of the grid's bound ceil(tokens / bm) + E: the whole CTA exits\n";
  os_ << "  const int m0 = g_m0, n0 = blockIdx." << (t.swapBlocks ? "y" : "x") << " * " << t.bn / t.parts
      << ";\n";       // a gated pair: bn / 2 columns of each member
  bool bMap = false;  // the TMA kernel reads w[e] through B's 3-D map at coordinate batch_idx
  for (auto& m : k.tensorMaps) bMap |= m.operand == "B" && m.batched;
  if (bMap)  // A's 2-D map over [T, K]: zero fill only at T
    os_ << "  const int M = g_end;  // A's TMA loads may read the next group's rows (never stored); the epilogue "
           "stores stop at the group's end\n";
  else os_ << "  const int M = g_end;  // loads zero-fill rows past the group's end; the epilogue stores stop at it\n";
  os_ << "  const int batch_idx = g_e;\n";
  if (!bMap) os_ << "  B += (long long)batch_idx * batch_stride_b;\n";
  for (int p = 1; p < t.parts; ++p)  // a gated pair's second member: its own w[e]
    os_ << "  B" << p << " += (long long)batch_idx * batch_stride_b" << p << ";\n";
}

// The masked layout's rows (lower/build/grouped_walk.h, docs/grouped.md): the batched kernel's expert
// batch_idx has counts[batch_idx] rows of its max_tokens (a plain global load of a read-only launch
// argument, clamped so a count past the slab never stores into the next expert's); a CTA whose m tile
// starts at or past them exits before any load or barrier. The exit is CTA-uniform (counts[batch_idx] and m0
// are the same for every thread), as a return ahead of bar.sync must be (CUDA C++ Programming Guide,
// "Synchronization Functions": __syncthreads() in conditional code only when the condition evaluates
// identically across the block; PTX ISA "bar.sync": all threads of the CTA take part); the interpreter runs
// such exiting CTAs in tests/grouped/test_grouped_masked.py.
void CLikePrinter::maskedRows(const kir::Kernel&) {
  os_ << "  // masked layout: expert batch_idx's rows are 0 .. counts[batch_idx]; the rest of its slab is padding\n";
  os_ << "  const int M = counts[batch_idx] < max_tokens ? counts[batch_idx] : max_tokens;\n";
  os_ << "  if (m0 >= M) return;  // a tile wholly in the padding (or an empty expert): the whole CTA exits\n";
}

std::string CLikePrinter::print(const kir::Kernel& k) {
  k_ = &k;
  os_.str("");
  os_ << prelude(k);
  const auto& t = k.tile;
  os_ << "using T = " << dtypeCudaName(t.inDtype) << ";\n";
  os_ << "using Mma = " << mmaType(k) << ";\n\n";
  os_ << kernelQualifiers(k) << " " << k.name << "(";
  for (size_t i = 0; i < k.params.size(); ++i) os_ << (i ? ",\n    " : "\n    ") << paramDecl(k.params[i]);
  os_ << ") {\n";
  os_ << "  extern __shared__ __align__("
      << (k.tile.mma == MmaKind::Wgmma || k.tile.mma == MmaKind::Tcgen05 ? 1024 : 128)
      << ") unsigned char heddle_smem[];\n";
  if (k.cluster > 1)  // the interpreter's shared window holds every CTA of the cluster: this CTA's part
    os_ << "  unsigned char* const heddle_cta_smem = heddle::sm90::cta_smem(heddle_smem);\n";
  os_ << "  const int tid = threadIdx.x, warp = tid / " << target_.warpSize << ", lane = tid % " << target_.warpSize
      << ";\n";
  const bool swap = t.swapBlocks;  // m tiles on blockIdx.x
  if (t.grouped) {
    groupedWalk(k);
  } else {
    // the grid's tile coordinates, declared only when read (a persistent walk's roles have their own Lets)
    const auto reads = kir::freeReads(k, k.body);
    const bool m0 = reads.count("m0") || t.masked, n0 = reads.count("n0");
    const std::string mDecl = std::string("m0 = blockIdx.") + (swap ? "x" : "y") + " * " + std::to_string(t.bm);
    const std::string nDecl = std::string("n0 = blockIdx.") + (swap ? "y" : "x") + " * " +
                              std::to_string(t.bn / t.parts);  // a matmul group: bn / parts columns of each
    if (m0 || n0) os_ << "  const int " << (m0 ? mDecl : "") << (m0 && n0 ? ", " : "") << (n0 ? nDecl : "") << ";\n";
    const bool batch = reads.count("batch_idx") || t.masked || t.batched;       // batched: the A/B/D offsets below
    if (batch && !t.batchWalk) os_ << "  const int batch_idx = blockIdx.z;\n";  // batchWalk: a Let of the tile walk
  }
  if (t.batched && !t.batchWalk) {
    os_ << "  A += (long long)batch_idx * batch_stride_a;\n  B += (long long)batch_idx * batch_stride_b;\n";
    os_ << "  D += (long long)batch_idx * batch_stride_d;\n";
    for (auto& o : k.extraOutputs) os_ << "  " << o.param << " += (long long)batch_idx * batch_stride_d;\n";
  }
  if (t.masked) maskedRows(k);
  block(k.body, 1);
  os_ << "}\n";
  return os_.str();
}

}  // namespace heddle
