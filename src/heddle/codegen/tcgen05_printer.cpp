// Blackwell spellings for the CUDA printer (see tcgen05_printer.h).
#include "heddle/codegen/tcgen05_printer.h"

#include <cctype>
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

// An mx32 / nv16 kernel's (MXFP8, MXFP4, NVFP4) scale-chunk slots (passes/mx_scale_ring.cpp), or null.
const kir::Buffer* mxScales(const kir::Kernel& k, const char* role) {
  for (auto& b : k.buffers)
    if (b->role == role) return b.get();
  return nullptr;
}

std::string tmemSlot(const kir::Kernel& k) {
  for (auto& b : k.buffers)
    if (b->role == "tmem") return b->name;
  fail<HeddleError>("printer: tcgen05 kernel ", k.name, " has no tensor-memory slot");
}

// Opens the loop body over one tcgen05.ld of 32 columns at c0: v[32] loaded, then `for (int j ...) {` (the
// caller prints the body and closes both braces).
void tmemColumns(std::ostream& os, const std::string& ind) {
  os << ind << "float v[32];\n";
  os << ind << "heddle::sm100::tmem_load_32(taddr + c0, v);  // tcgen05.ld 32x32b.x32 + tcgen05.wait::ld\n";
  os << ind << "#pragma unroll\n";
  os << ind << "for (int j = 0; j < 32; ++j) {\n";
}

// Whether `var` occurs as a whole identifier in the printed epilogue program `ops` (printed kernels declare only what
// they read: NVRTC's #177-D, tests/codegen/test_unused_declarations.py).
bool readsWord(const std::string& ops, const std::string& var) {
  auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  for (size_t at = ops.find(var); at != std::string::npos; at = ops.find(var, at + 1))
    if ((at == 0 || !word(ops[at - 1])) && (at + var.size() >= ops.size() || !word(ops[at + var.size()]))) return true;
  return false;
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
  tmemColumns(os, in2);
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

// The TMA-store epilogue's chunk (e.to: staging slot e.toStage of columns [colBegin, colEnd), one 128-byte swizzle
// box; lower/build/staged_store.h): the thread of tile row lr = 32*(warp%4)+lane (tcgen05.ld 32x32b) loads the
// chunk's columns 32 at a time, runs the epilogue program and writes 16 bytes at a time into its row of the slot
// (heddle_sm100.cuh stage_16: the 128-byte swizzle, bank-conflict-free). No bounds check: the TMA store clips rows
// past M and columns past N; the epilogue's global reads there are clamped to row M-1 / column N-1. The walk over
// the chunk's 32-column loads stays a loop (unrolled, NVRTC 13 hoisted a second load's operand reads and spilled
// with per-row scales, bias and GELU on 8-bit operands); inside it v and y are indexed by constants: registers.
void stagedTmemEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& ind) {
  if (!e.toExtra.empty()) fail<HeddleError>("printer: ", k.name, " stages further outputs from tensor memory");
  const std::string in = ind + "  ", in2 = ind + "    ", in3 = ind + "      ";
  const std::string T = dtypeCudaName(e.to->dtype);
  const int esz = dtypeBytes(e.to->dtype), per = 16 / esz;  // results per 16-byte write
  const std::string tile =
      "heddle::sm90::TmaTile<" + std::to_string(e.to->rows) + ", " + std::to_string(e.to->cols) + ", " + T + ">";
  bool fromSmem = false;
  for (auto& op : k.epilogue) fromSmem |= op.smem != nullptr;
  os << ind << "// " << kir::describe(e) << ": tile row 32*(warp%4)+lane from tensor memory into the 128-byte "
     << "swizzled slot, 16 bytes at a time (the TMA store clips past M and N)\n";
  os << ind << "{\n";
  os << in << "const unsigned taddr = Mma::row_addr(" << tmemSlot(k) << "[0], warp, " << e.fromStage.str() << ");\n";
  // the epilogue program first: the clamped row / column are declared only where it reads them (printed kernels
  // declare only what they read: NVRTC's #177-D, tests/codegen/test_unused_declarations.py)
  std::ostringstream body;
  epilogueOps(body, k, e.operandStage, in3);
  const std::string ops = body.str();
  auto reads = [&](const std::string& var) { return readsWord(ops, var); };
  os << in << "const int lr = 32 * (warp % 4) + lane;\n";
  if (reads("row"))
    os << in
       << "const int row = m0 + lr < M ? m0 + lr : M - 1;  // rows past M: row M-1's reads, clipped by the store\n";
  os << in << T << "* const slot = " << e.to->name << " + (" << e.toStage.str() << ") * " << e.to->rows * e.to->cols
     << ";\n";
  os << in << "#pragma unroll 1\n";
  os << in << "for (int c0 = " << e.colBegin << "; c0 < " << e.colEnd << "; c0 += 32) {\n";
  os << in2 << "float v[32], y[32];\n";
  os << in2 << "heddle::sm100::tmem_load_32(taddr + c0, v);  // tcgen05.ld 32x32b.x32 + tcgen05.wait::ld\n";
  os << in2 << "#pragma unroll\n";
  os << in2 << "for (int j = 0; j < 32; ++j) {\n";
  if (reads("col")) os << in3 << "const int col = n0 + c0 + j < N ? n0 + c0 + j : N - 1;  // reads clamped\n";
  os << in3 << "const float r0 = v[j];\n";
  if (fromSmem) os << in3 << "const int lc = c0 + j;\n";
  os << ops;
  os << in3 << "y[j] = r" << k.epilogueResult << ";\n";
  os << in2 << "}\n";
  os << in2 << "#pragma unroll\n";
  os << in2 << "for (int u = 0; u < 32; u += " << per << ")\n";
  os << in2 << "  heddle::sm100::stage_16<" << tile << ">(slot, lr, c0 - " << e.colBegin << " + u, y + u);\n";
  os << in << "}\n" << ind << "}\n";
}

// The direct store with a computed output scale (Kernel::quant; docs/fp8.md "Computed output scales") from
// tensor memory. tcgen05.ld.32x32b gives thread t of a warp tensor-memory lane 32*(warp%4) + t, i.e. one tile
// row, and .x32 the 32 consecutive 32-bit columns from the address (PTX ISA 9.7.16.2.3.1.1 "Matrix fragments
// for shape .32x32b", figure 183, with the warp's lane quarter of the tcgen05 access restrictions; the second
// source: CUTLASS's cute/arch/copy_sm100.hpp atom SM100_TMEM_LOAD_32dp32b32x, 32 data paths of 32 bits, thread i
// on data path i, as DeepGEMM's SM100 epilogues read their accumulators; the interpreter's tcgen05_ld_32x32b in
// interp/rt/hrt_ptx_tcgen05.h models the same). So all of a row's columns of a group sit in one thread and
// the group's amax is a per-thread max: no shuffle, no shared memory. Per group of the tile's columns:
//   1. tcgen05.ld 32 columns at a time, run the epilogue program (reads clamped to row M-1 / column N-1: rows
//      past M still take part in the warp-wide tcgen05.ld) and fold |y| of the columns inside N into amax;
//   2. qs = max(amax, 1e-4) / maxFinite; the row's thread stores qs to the scale tensor [M, groups] for rows
//      inside M;
//   3. tcgen05.ld the group again and recompute y (the same code on the same values: the same y), storing
//      satfinite(y / qs) (from_float's cvt.rn.satfinite) for the columns inside M and N.
// Step 3 re-reads rather than keeping y: a group is 128 values a thread (a row up to 256), which registers
// cannot hold beside the epilogue's and which a dynamically indexed array would put in local memory; the
// accumulator stays in tensor memory until the accEmpty arrive after this store, and a re-read is one
// tcgen05.ld per 32 columns (the epilogue program runs twice). A TMA-loaded bias / residual is read from its ring
// slot e.operandStage in both passes, at (lr,) lc = c0 + j as in tmemEpilogue: the whole store -- both passes -- lies
// between the slot's fullE wait and its emptyE arrive (lower/build/epilogue_tma.cpp epilogueWithOperand).
void quantTmemEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& ind) {
  const auto& q = *k.quant;
  bool fromSmem = false,
       rows = false;  // a TMA-loaded bias / residual from its ring slot e.operandStage (as tmemEpilogue)
  for (auto& op : k.epilogue) fromSmem |= op.smem != nullptr, rows |= op.smem && op.smem->rows > 1;
  const int G = q.group == kQuantRow ? k.tile.bn : q.group;  // columns per group inside the tile
  const std::string in = ind + "  ", in2 = ind + "    ", in3 = ind + "      ", in4 = ind + "        ";
  const std::string y = "r" + std::to_string(q.reg), T = dtypeCudaName(k.outDtype);
  auto pass = [&](bool amax) {
    os << in2 << "#pragma unroll 1\n";
    os << in2 << "for (int c0 = g0; c0 < g0 + " << G << "; c0 += 32) {"
       << (amax ? "  // y of the group's columns; |y| inside N into amax\n"
                : "  // y again from tensor memory, divided by the group's scale\n");
    tmemColumns(os, in3);
    if (amax) {
      os << in4 << "const int col = n0 + c0 + j < N ? n0 + c0 + j : N - 1;  // reads clamped\n";
    } else {
      os << in4 << "const int col = n0 + c0 + j;\n";
      os << in4 << "if (qrow >= M || col >= N) continue;\n";
    }
    os << in4 << "const float r0 = v[j];\n";
    if (fromSmem) os << in4 << "const int lc = c0 + j;\n";
    epilogueOps(os, k, e.operandStage, in4);
    if (amax)
      os << in4 << "if (n0 + c0 + j < N) amax = fmaxf(amax, fabsf(" << y
         << "));  // a column outside N never enters the amax\n";
    else os << in4 << "D[(long long)row * ldd + col] = heddle::from_float<" << T << ">(" << y << " / qs);\n";
    os << in3 << "}\n" << in2 << "}\n";
  };
  os << ind << "// " << kir::describe(e) << ": tile row 32*(warp%4)+lane from tensor memory, quantized to "
     << dtypeName(k.outDtype) << " with a scale per row and "
     << (q.group == kQuantRow ? std::string("row") : std::to_string(q.group) + " columns")
     << " (amax per thread: the row's columns are this thread's), stored directly\n";
  os << ind << "{\n";
  os << in << "const unsigned taddr = Mma::row_addr(" << tmemSlot(k) << "[0], warp, " << e.fromStage.str() << ");\n";
  if (rows) os << in << "const int lr = 32 * (warp % 4) + lane;\n";
  os << in << "const int qrow = m0 + 32 * (warp % 4) + lane;\n";
  os << in << "const int row = qrow < M ? qrow : M - 1;  // rows past M compute on row M-1's reads, store nothing\n";
  os << in << "#pragma unroll 1\n";
  os << in << "for (int g0 = 0; g0 < " << k.tile.bn << "; g0 += " << G << ") {  // the tile's groups\n";
  os << in2 << "float amax = 0.0f;\n";
  pass(true);
  os << in2 << "const float qs = fmaxf(amax, " << floatLit(kQuantEps) << ") / " << floatLit(maxFinite(k.outDtype))
     << ";\n";
  os << in2 << "if (qrow < M && n0 + g0 < N)  // the row's thread stores its group's scale\n";
  os << in2 << "  " << q.scale << "[(long long)qrow * " << q.groups << " + "
     << (q.group == kQuantRow ? std::string("0") : "(n0 + g0) / " + std::to_string(q.group)) << "] = qs;\n";
  pass(false);
  os << in << "}\n" << ind << "}\n";
}

// The TMA-store epilogue's chunk with a computed output scale (e.to: slot e.toStage of q's columns [colBegin, colEnd),
// 128 one-byte columns, one 128-byte swizzle row; docs/fp8.md "Computed output scales"). The chunk lies in one group
// [g0, g0 + G) -- the chunk itself for groups of 128, the whole n tile per row -- and, the row's columns being this
// thread's (tcgen05.ld 32x32b, as in quantTmemEpilogue), the thread
//   1. reads the group's columns from tensor memory 32 at a time, runs the epilogue program (reads clamped to row
//      M-1 / column N-1) and folds |y| of the columns inside N into amax;
//   2. qs = max(amax, 1e-4) / maxFinite; the chunk that starts the group stores qs to D1[row, group] for rows inside M
//      (s is not staged: no slot, no tensor map);
//   3. reads the chunk's columns again, recomputes y and writes satfinite(y / qs) into its row of the slot, 16 one-byte
//      codes a stage_16 (heddle_sm100.cuh: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 pairs, one st.shared.v4.b32 at the
//      128-byte swizzle), rows past M and columns past N included: the TMA store clips them.
// Per row with an n tile of 256 (two chunks) each chunk reduces the whole row again: tensor memory holds the tile until
// the accEmpty arrive after the last chunk's loads, so a re-read is one tcgen05.ld per 32 columns, and no value has to
// live across the chunks' barriers and stores. A TMA-loaded bias / residual is read from its slot e.operandStage.
void quantStagedTmemEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e,
                             const std::string& ind) {
  const auto& q = *k.quant;
  if (!e.toExtra.empty()) fail<HeddleError>("printer: ", k.name, " stages further outputs beside a quantized q");
  const int G = q.group == kQuantRow ? k.tile.bn : q.group;  // columns per group inside the tile
  const int g0 = e.colBegin / G * G;                         // the chunk's group
  if (e.colEnd > g0 + G || dtypeBytes(e.to->dtype) != 1)
    fail<HeddleError>("printer: ", kir::describe(e), " splits quantization group ", g0 / G, " or stages q wider");
  const std::string in = ind + "  ", in2 = ind + "    ", in3 = ind + "      ";
  const std::string y = "r" + std::to_string(q.reg), T = dtypeCudaName(k.outDtype);
  const std::string tile =
      "heddle::sm90::TmaTile<" + std::to_string(e.to->rows) + ", " + std::to_string(e.to->cols) + ", " + T + ">";
  bool fromSmem = false;
  for (auto& op : k.epilogue) fromSmem |= op.smem != nullptr;
  std::ostringstream body;  // the epilogue program: row / col declared only where it reads them
  epilogueOps(body, k, e.operandStage, in3);
  const std::string ops = body.str();
  auto columns = [&](int from, int to, bool amax) {
    os << in << "#pragma unroll 1\n";
    os << in << "for (int c0 = " << from << "; c0 < " << to << "; c0 += 32) {"
       << (amax ? "  // y of the group's columns; |y| inside N into amax\n"
                : "  // y of the chunk's columns again, divided by the group's scale, into the slot\n");
    os << in2 << (amax ? "float v[32];\n" : "float v[32], y[32];\n");
    os << in2 << "heddle::sm100::tmem_load_32(taddr + c0, v);  // tcgen05.ld 32x32b.x32 + tcgen05.wait::ld\n";
    os << in2 << "#pragma unroll\n";
    os << in2 << "for (int j = 0; j < 32; ++j) {\n";
    if (readsWord(ops, "col"))
      os << in3 << "const int col = n0 + c0 + j < N ? n0 + c0 + j : N - 1;  // reads clamped\n";
    os << in3 << "const float r0 = v[j];\n";
    if (fromSmem) os << in3 << "const int lc = c0 + j;\n";
    os << ops;
    if (amax)
      os << in3 << "if (n0 + c0 + j < N) amax = fmaxf(amax, fabsf(" << y
         << "));  // a column outside N never enters the amax\n";
    else os << in3 << "y[j] = " << y << " / qs;\n";
    os << in2 << "}\n";
    if (!amax) {
      os << in2 << "#pragma unroll\n";
      os << in2 << "for (int u = 0; u < 32; u += 16)  // 16 satfinite codes, one 16-byte st.shared\n";
      os << in2 << "  heddle::sm100::stage_16<" << tile << ">(slot, lr, c0 - " << e.colBegin << " + u, y + u);\n";
    }
    os << in << "}\n";
  };
  os << ind << "// " << kir::describe(e) << ": tile row 32*(warp%4)+lane from tensor memory, quantized to "
     << dtypeName(k.outDtype) << " with a scale per row and "
     << (q.group == kQuantRow ? std::string("row") : std::to_string(q.group) + " columns")
     << " (amax per thread over the group's columns " << g0 << ".." << g0 + G - 1
     << "), q into the 128-byte swizzled slot (the TMA store clips past M and N), s stored directly\n";
  os << ind << "{\n";
  os << in << "const unsigned taddr = Mma::row_addr(" << tmemSlot(k) << "[0], warp, " << e.fromStage.str() << ");\n";
  os << in << "const int lr = 32 * (warp % 4) + lane;\n";
  if (readsWord(ops, "row"))
    os << in
       << "const int row = m0 + lr < M ? m0 + lr : M - 1;  // rows past M: row M-1's reads, clipped by the store\n";
  os << in << T << "* const slot = " << e.to->name << " + (" << e.toStage.str() << ") * " << e.to->rows * e.to->cols
     << ";\n";
  os << in << "float amax = 0.0f;\n";
  columns(g0, g0 + G, true);
  os << in << "const float qs = fmaxf(amax, " << floatLit(kQuantEps) << ") / " << floatLit(maxFinite(k.outDtype))
     << ";\n";
  if (e.colBegin == g0) {  // the chunk that starts the group stores its scale
    os << in << "const int qrow = m0 + lr;\n";
    os << in << "if (qrow < M && n0 + " << g0 << " < N)  // the row's thread stores its group's scale\n";
    os << in << "  " << q.scale << "[(long long)qrow * " << q.groups << " + "
       << (q.group == kQuantRow ? std::string("0") : "(n0 + " + std::to_string(g0) + ") / " + std::to_string(q.group))
       << "] = qs;\n";
  }
  columns(e.colBegin, e.colEnd, false);
  os << ind << "}\n";
}

// One MX block of the thread's row (mxTmemEpilogue's steps, printed inside the caller's c0 loop at ind): the
// tcgen05.ld.32x32b.x32 of columns c0..c0+31, the epilogue program `ops` on each (y written back over v: j is
// unrolled, registers), the block's amax per thread, the e8m0 code stored to its blocked offset in D1 (code 0 for
// padding rows and blocks, nothing at or past `groups`) and the multiplier inv = 2^(127 - code). Reads the caller's
// qrow (and row / col / lc where `ops` does).
void mxBlock(std::ostream& os, const kir::Kernel& k, const std::string& ops, const std::string& ind) {
  const auto& q = *k.quant;
  const std::string in = ind + "  ", y = "r" + std::to_string(q.reg);
  const int emax = k.outDtype == DType::E4M3 ? 8 : 15;  // 448 = 1.75 * 2^8; 57344 = 1.75 * 2^15 (OCP MX table 1)
  bool fromSmem = false;  // a TMA-loaded bias / residual from its ring slot, at lc (as tmemEpilogue)
  for (auto& op : k.epilogue) fromSmem |= op.smem != nullptr;
  os << ind << "float amax = 0.0f;\n";
  tmemColumns(os, ind);
  if (readsWord(ops, "col")) os << in << "const int col = n0 + c0 + j < N ? n0 + c0 + j : N - 1;  // reads clamped\n";
  os << in << "const float r0 = v[j];\n";
  if (fromSmem) os << in << "const int lc = c0 + j;\n";
  os << ops;
  os << in << "v[j] = " << y << ";  // y stays in registers (j is unrolled)\n";
  os << in << "amax = fmaxf(amax, fabsf(" << y
     << "));  // N is a multiple of 32: the whole block is inside N or past it\n";
  os << ind << "}\n";
  os << ind << "const int blk = (n0 + c0) / 32;\n";
  os << ind << "const bool live = qrow < M && n0 + c0 < N;  // padding rows and blocks store code 0\n";
  os << ind << "const int ebits = (int)((__float_as_uint(amax) >> 23) & 0xffu);  // floor(log2 amax) + 127\n";
  os << ind << "const int code = live && ebits > " << emax << " ? ebits - " << emax
     << " : 0;  // e8m0: floor(log2 amax) - emax + 127, at least 0\n";
  os << ind << "if (blk < " << q.groups << ")\n";
  os << ind << "  " << q.scale << "[((qrow / 128) * " << q.groups / 4
     << " + blk / 4) * 512 + (qrow % 32) * 16 + ((qrow % 128) / 32) * 4 + blk % 4] = (unsigned char)code;\n";
  os << ind << "const float inv = __uint_as_float((unsigned)(254 - code) << 23);  // 2^(127 - code), exact\n";
}

// An MX-format output (Kernel::quant with kQuantMx32; docs/fp8.md "MX formats", "An MX-format output"): one
// tcgen05.ld.32x32b.x32 gives the thread of tile row 32*(warp%4)+lane 32 consecutive columns of its row (the
// 32x32b fragment above), exactly one MX block, so the block's amax is a per-thread max over registers and y stays
// in them (written back over v): no second read, unlike the groups of 128 above. Per block j of the row:
//   code = max(expbits(amax) - emax, 0)   the OCP MX v1.0 FLOOR shared exponent floor(log2 amax) - emax, biased by
//          127 (torchao to_mx's ScaleCalculationMode.FLOOR reads the same f32 exponent field); emax 8 (e4m3), 15
//          (e5m2); an all-zero (or f32-subnormal) block gives code 0; a finite amax never reaches 255 (NaN)
//   q = satfinite(y * 2^(127 - code))      an exact multiply by the power of two built from its exponent field
// and the code byte goes to torch's blocked layout (to_blocked; MmaSm100Mx reads the same chunks):
//   ((r / 128) * groups / 4 + j / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + j % 4
// groups = round_up(N/32, 4). N is a multiple of 32, so a block lies wholly inside or past N; the threads of rows
// past M and of blocks past N store code 0 there (the padding; m tiles of 128 rows and n tiles that are multiples
// of 128 cover every padded byte, build_epilogue.cpp checkMxOutSchedule), blocks at or past `groups` nothing.
// A TMA-loaded bias / residual is read from its ring slot e.operandStage at (lr,) lc = c0 + j, as in tmemEpilogue:
// the whole store lies between the slot's fullE wait and its emptyE arrive (lower/build/epilogue_tma.cpp
// epilogueWithOperand); the slot's rows past M and columns past N are the TMA load's zero fill, read only by the
// padding rows and blocks, which store code 0 and no q.
void mxTmemEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& ind) {
  bool tile = false;  // a TMA-loaded residual tile from its ring slot e.operandStage (rows lr, as tmemEpilogue)
  for (auto& op : k.epilogue) tile |= op.smem && op.smem->rows > 1;
  const std::string in = ind + "  ", in2 = ind + "    ", in3 = ind + "      ";
  const std::string T = dtypeCudaName(k.outDtype);
  os << ind << "// " << kir::describe(e)
     << ": tile row 32*(warp%4)+lane from tensor memory, an MX-format output: " << dtypeName(k.outDtype)
     << " q and an e8m0 code per 32 columns (one tcgen05.ld: the block's amax per thread)\n";
  os << ind << "{\n";
  os << in << "const unsigned taddr = Mma::row_addr(" << tmemSlot(k) << "[0], warp, " << e.fromStage.str() << ");\n";
  std::ostringstream ops;  // the epilogue program: `row` is declared only where an operand read takes it
  epilogueOps(ops, k, e.operandStage, in3);
  const bool rows = readsWord(ops.str(), "row");
  if (tile) os << in << "const int lr = 32 * (warp % 4) + lane;\n";
  os << in << "const int qrow = m0 + 32 * (warp % 4) + lane;  // < round_up(M, 128): the m tiles are 128 rows\n";
  if (rows)
    os << in << "const int row = qrow < M ? qrow : M - 1;  // rows past M compute on row M-1's reads, store code 0\n";
  os << in << "#pragma unroll 1\n";
  os << in << "for (int c0 = 0; c0 < " << k.tile.bn << "; c0 += 32) {  // one MX block of the row a load\n";
  mxBlock(os, k, ops.str(), in2);
  os << in2 << "if (live) {\n";
  os << in3 << "#pragma unroll\n";
  os << in3 << "for (int j = 0; j < 32; ++j)\n";
  os << in3 << "  D[(long long)qrow * ldd + n0 + c0 + j] = heddle::from_float<" << T << ">(v[j] * inv);\n";
  os << in2 << "}\n";
  os << in << "}\n" << ind << "}\n";
}

// The TMA-store epilogue's chunk of an MX-format output (e.to: slot e.toStage of q's columns [colBegin, colEnd), 128
// one-byte columns -- four MX blocks of the row, one 128-byte swizzle row; docs/fp8.md "An MX-format output"). Each
// block is one tcgen05.ld.32x32b.x32 of the thread's row, as in the direct store (mxBlock: y in registers, the amax per
// thread, the e8m0 code stored directly to its blocked offset -- D1 is not staged: no slot, no tensor map), and
// q = satfinite(y * 2^(127 - code)) goes into the thread's row of the slot, 16 one-byte codes a stage_16
// (heddle_sm100.cuh: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 pairs, one st.shared.v4.b32 at the 128-byte swizzle), rows
// past M and blocks past N included: the TMA store clips them (their reads clamped to row M-1 / column N-1, their codes
// 0). A block lies in one chunk (128 = 4 x 32), so no value lives across the chunks' barriers and stores.
void mxStagedTmemEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& ind) {
  if (!e.toExtra.empty()) fail<HeddleError>("printer: ", k.name, " stages further outputs beside an MX-format q");
  if (e.colBegin % 32 || e.colEnd % 32 || dtypeBytes(e.to->dtype) != 1)
    fail<HeddleError>("printer: ", kir::describe(e), " splits an MX block or stages q wider than one byte");
  const std::string in = ind + "  ", in2 = ind + "    ";
  const std::string T = dtypeCudaName(k.outDtype);
  const std::string tile =
      "heddle::sm90::TmaTile<" + std::to_string(e.to->rows) + ", " + std::to_string(e.to->cols) + ", " + T + ">";
  std::ostringstream ops;  // the epilogue program: `row` is declared only where an operand read takes it
  epilogueOps(ops, k, e.operandStage, in2 + "  ");
  os << ind << "// " << kir::describe(e)
     << ": tile row 32*(warp%4)+lane from tensor memory, an MX-format output: " << dtypeName(k.outDtype)
     << " q into the 128-byte swizzled slot (the TMA store clips past M and N) and an e8m0 code per 32 columns stored "
        "directly (one tcgen05.ld: the block's amax per thread)\n";
  os << ind << "{\n";
  os << in << "const unsigned taddr = Mma::row_addr(" << tmemSlot(k) << "[0], warp, " << e.fromStage.str() << ");\n";
  os << in << "const int lr = 32 * (warp % 4) + lane;\n";
  os << in << "const int qrow = m0 + lr;  // < round_up(M, 128): the m tiles are 128 rows\n";
  if (readsWord(ops.str(), "row"))
    os << in << "const int row = qrow < M ? qrow : M - 1;  // rows past M: row M-1's reads, clipped by the store\n";
  os << in << T << "* const slot = " << e.to->name << " + (" << e.toStage.str() << ") * " << e.to->rows * e.to->cols
     << ";\n";
  os << in << "#pragma unroll 1\n";
  os << in << "for (int c0 = " << e.colBegin << "; c0 < " << e.colEnd
     << "; c0 += 32) {  // one MX block of the row a load\n";
  mxBlock(os, k, ops.str(), in2);
  os << in2 << "#pragma unroll\n";
  os << in2 << "for (int j = 0; j < 32; ++j) v[j] *= inv;  // exact: a power of two\n";
  os << in2 << "#pragma unroll\n";
  os << in2 << "for (int u = 0; u < 32; u += 16)  // 16 satfinite codes, one 16-byte st.shared\n";
  os << in2 << "  heddle::sm100::stage_16<" << tile << ">(slot, lr, c0 - " << e.colBegin << " + u, v + u);\n";
  os << in << "}\n" << ind << "}\n";
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
    case kir::NodeKind::TileLoad: {  // an MX k tile's scale chunks: one box of the 3-D map (mx_scale_ring.cpp)
      auto& t = static_cast<const kir::TileLoad&>(n);
      if (t.dst->role != "mx_scale_a" && t.dst->role != "mx_scale_b") return false;
      if (!t.mbar) fail<HeddleError>("printer: ", kir::describe(t), " completes on no mbarrier");
      os << ind << "heddle::sm90::tma_load_box<3>(" << stagePtr(*t.dst, t.stage) << ", &" << t.tensorMap << ", 0, "
         << t.row0.str() << ", " << t.col0.str() << ", (" << t.mbar->name << " + (" << t.mbarIndex.str() << ")));  // "
         << t.dst->rows / 4 << " scale chunk(s) of " << t.dst->sourceTensor << ": " << t.dst->rows * t.dst->cols
         << " bytes\n";
      return true;
    }
    case kir::NodeKind::MmaStep: {
      auto& m = static_cast<const kir::MmaStep&>(n);
      if (m.kind != MmaKind::Tcgen05) return false;
      if (auto* sfa = mxScales(k, "mx_scale_a")) {  // MmaSm100Mx / Nvf4 / Mxf4: tcgen05.cp of the chunks, the MMAs
        const kir::Buffer* sfb = mxScales(k, "mx_scale_b");
        if (!sfb) fail<HeddleError>("printer: ", k.name, " has A's MX scale slots but not B's");
        os << ind << "Mma::mma(" << tmemSlot(k) << "[0], " << tmemSlot(k) << "[0] + " << k.tile.accStages * k.tile.bn
           << ", " << m.accStage.str() << ", " << m.stageA.str() << ", " << stagePtr(*m.a, m.stageA) << ", "
           << stagePtr(*m.b, m.stageB) << ", " << stagePtr(*sfa, m.stageA) << ", " << stagePtr(*sfb, m.stageB) << ", "
           << m.accumulate.str() << ");  // " << kir::describe(m)
           << "; tcgen05.cp of the slot's scale chunks into its scale columns first\n";
        return true;
      }
      os << ind << "Mma::mma(" << tmemSlot(k) << "[0], " << m.accStage.str() << ", " << stagePtr(*m.a, m.stageA) << ", "
         << stagePtr(*m.b, m.stageB) << ", " << m.accumulate.str() << ");  // " << kir::describe(m) << "\n";
      return true;
    }
    case kir::NodeKind::EpilogueStore: {
      auto& e = static_cast<const kir::EpilogueStore&>(n);
      if (!e.tmem) return false;
      if (e.to && k.quant && k.quant->group == kQuantMx32) mxStagedTmemEpilogue(os, k, e, ind);
      else if (e.to && k.quant) quantStagedTmemEpilogue(os, k, e, ind);
      else if (e.to) stagedTmemEpilogue(os, k, e, ind);
      else if (k.quant && k.quant->group == kQuantMx32) mxTmemEpilogue(os, k, e, ind);
      else if (k.quant) quantTmemEpilogue(os, k, e, ind);
      else tmemEpilogue(os, k, e, ind);
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
  if (mxScales(k, "mx_scale_a")) {  // the block-scaled steps (heddle_sm100.cuh), BM = 128, k tiles of 128 elements
    if (t.inDtype == DType::E2M1X2 && mxScales(k, "mx_scale_a")->dtype == DType::E8M0)
      os << "heddle::MmaSm100Mxf4<" << t.bn << ">";  // MXFP4: packed e2m1, ue8m0 scales, two K = 64 MMAs a k tile
    else if (t.inDtype == DType::E2M1X2)  // nv16 (NVFP4): packed e2m1, ue4m3 scales, two K = 64 MMAs a k tile
      os << "heddle::MmaSm100Nvf4<" << t.bn << ">";
    else  // mx32 (MXFP8): e4m3 / e5m2, ue8m0 scales, four K = 32 MMAs a k tile
      os << "heddle::MmaSm100Mx<" << t.bn << ", T, " << dtypeCudaName(t.inDtypeB) << ">";
    return os.str();
  }
  os << "heddle::MmaSm100<" << t.bm << ", " << t.bn << ", " << t.bk << ", " << (t.aKMajor ? "true" : "false") << ", "
     << (t.bKMajor ? "true" : "false") << ", T";
  if (isFloat8(t.inDtype)) os << ", " << dtypeCudaName(t.inDtypeB);  // kind::f8f6f4: B's format of its own
  os << ">";
  return os.str();
}

}  // namespace heddle::tcgen05print
