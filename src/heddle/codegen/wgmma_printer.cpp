// Hopper spellings for the CUDA printer (see wgmma_printer.h).
#include "heddle/codegen/wgmma_printer.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "heddle/codegen/printer.h"

namespace heddle::wgmmaprint {

namespace {

std::string mbarPtr(const kir::Buffer& b, const kir::IExpr& index) {
  return "(" + b.name + " + (" + index.str() + "))";
}

std::string stagePtr(const kir::Buffer& b, const kir::IExpr& stage) {
  std::string s = b.name;
  if (!(stage.isConst() && stage.constValue() == 0))
    s += " + (" + stage.str() + ") * " + std::to_string(b.rows * b.cols);
  return s;
}

}  // namespace

namespace {

// The pair's accumulators (acc[fm][fn][2h], acc[fm][fn][2h + 1]: columns lc0 and lc0 + 1 of row lr), or
// the raw staging tile e.from at (lr, lc0), as the pair program's r0.
std::string pairSource(const kir::EpilogueStore& e) {
  if (e.from) {
    const std::string at = e.from->name + "[(" + e.fromStage.str() + ") * " +
                           std::to_string(e.from->rows * e.from->cols) + " + lr * " + std::to_string(e.from->cols) +
                           " + lc0";
    return "const heddle::pairf r0 = {" + at + "], " + at + " + 1]};\n";
  }
  return "const heddle::pairf r0 = {" + e.acc->name + ".acc[fm][fn][2 * (h)], " + e.acc->name +
         ".acc[fm][fn][2 * (h) + 1]};\n";
}

// Prints `body` as the macro `name` with `args` (one statement; a trailing backslash per line).
void printMacro(std::ostream& os, const std::string& name, const std::string& args, const std::string& body,
                const std::string& ind) {
  os << "#define " << name << "(" << args << ") do { \\\n";
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) os << ind << "  " << line << " \\\n";
  os << ind << "} while (0)\n";
}

// The staged epilogue (results into the swizzled shared tile e.to for a TMA store): column pairs. Each
// pair (two adjacent columns of one fragment row) runs the pair program (epilogueOpsPair) and is packed
// into one 32-bit register (one cvt.rn.bf16x2.f32); four pairs -- fragment columns fn and fn+1, rows
// lane/4 and lane/4+8 -- are one stmatrix.x4 (16-bit outputs; f32 outputs store two floats; 8-bit outputs
// one 16-bit st.shared of the satfinite pair, see stagedPair8). No
// bounds check: the TMA store clips D's ragged edges, and the operand reads clamp row and col to the
// last element so that they stay in bounds. Further outputs (e.toExtra: D1, ...) are packed from their
// registers in the same pair and stored by a stmatrix.x4 of their own into their slot.
//
// stagedPair8 (e4m3 / e5m2 outputs): a chunk is 128 one-byte columns, one 128-byte row of the 128-byte swizzle
// (TmaTile<BM, 128, T>: byte (r, c) at r * 128 + ((c / 16) ^ (r % 8)) * 16 + c % 16; PTX ISA "Tensor copy
// swizzling modes", the 128B pattern over 16-byte chunks, and cuTensorMapEncodeTiled's rule boxDim[0] *
// elementSize <= 128 for CU_TENSOR_MAP_SWIZZLE_128B; CUTLASS's sm90 epilogue stages a row-major D in the atom
// ss_smem_selector picks, the 128-byte swizzle for 128 one-byte columns). A pair's two columns (lc0 even) stay inside one 16-byte chunk, so it is one aligned 16-bit
// st.shared of pack_pair's two satfinite codes (x in the low byte: column lc0 first). sm_90's stmatrix stores
// m8n8 .b16 matrices only (PTX ISA "stmatrix": the .b8 type goes with the .m16n8 shape, a later-architecture
// form; CUDA's cuda::ptx lists the m8n8 .b16 forms for SM_90), so the pairs are plain stores; by the swizzle, a
// warp's pairs of one fragment column (8 rows, 4 lanes each) fall in 8 different 16-byte chunks, 16 banks.
void stagedEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& w, int FM,
                    int fnLo, int fnHi, const std::string& ind) {
  const bool b16 = dtypeBytes(k.outDtype) == 2, b8 = dtypeBytes(k.outDtype) == 1;
  std::ostringstream pair;
  pair << "const int lr = Mma::row_of(" << w << ", lane, fm, 2 * (h)), lc0 = Mma::col_of(" << w << ", lane, fn, 0);\n";
  pair << "const int row = m0 + lr < M ? m0 + lr : M - 1;  /* operand reads stay in bounds */\n";
  pair << "const int col_0 = n0 + lc0 < N ? n0 + lc0 : N - 1, col_1 = n0 + lc0 + 1 < N ? n0 + lc0 + 1 : N - 1;\n";
  pair << "(void)row, (void)col_0, (void)col_1;\n";
  if (readsPairs(k))  // N is even (16-byte output rows): the pair at colv is whole and starts at an even column
    pair << "const int colv = n0 + lc0 < N - 2 ? n0 + lc0 : N - 2;  /* the aligned pair read (vec_e=2) */\n";
  pair << pairSource(e);
  epilogueOpsPair(pair, k, e.operandStage);
  // output o (0: D into e.to; o >= 1: k.extraOutputs[o-1] into e.toExtra[o-1]) is register res[o], packed
  // into macro argument P<o> (16-bit outputs; validate_schedule gives every output D's element size)
  const int nOut = 1 + (int)e.toExtra.size();
  if (e.toExtra.size() != k.extraOutputs.size())
    fail<HeddleError>("printer: ", kir::describe(e), " stages ", nOut, " output(s) of ", 1 + k.extraOutputs.size());
  std::vector<std::string> res{"r" + std::to_string(k.epilogueResult)}, slot, tile;
  std::vector<const kir::Buffer*> bufs{e.to};
  for (size_t i = 0; i < e.toExtra.size(); ++i) {
    res.push_back("r" + std::to_string(k.extraOutputs[i].reg));
    bufs.push_back(e.toExtra[i]);
  }
  for (auto* b : bufs) {
    if (dtypeBytes(b->dtype) != dtypeBytes(k.outDtype))
      fail<HeddleError>("printer: ", b->name, " stages ", dtypeName(b->dtype), " beside D's ", dtypeName(k.outDtype));
    tile.push_back("heddle::sm90::TmaTile<" + std::to_string(b->rows) + ", " + std::to_string(b->cols) + ", " +
                   dtypeCudaName(b->dtype) + ">");
    slot.push_back(b->name + " + (" + e.toStage.str() + ") * " + std::to_string(b->rows * b->cols));
  }
  auto P = [](int o) { return o ? "P" + std::to_string(o) : std::string("P"); };
  std::string args = "fm, fn, h";
  for (int o = 0; o < nOut; ++o) args += ", " + P(o);
  const int c0 = e.colEnd > e.colBegin ? e.colBegin : 0;
  for (int o = 0; o < nOut; ++o) {
    if (b16) {
      pair << P(o) << " = heddle::pack2<" << dtypeCudaName(bufs[o]->dtype) << ">(" << res[o] << ".x, " << res[o]
           << ".y);\n";
    } else if (b8) {  // stagedPair8: one 16-bit st.shared of the satfinite pair inside its 16-byte swizzle chunk
      pair << "heddle::store_pair(" << slot[o] << " + " << tile[o] << "::offset(lr, lc0"
           << (c0 ? " - " + std::to_string(c0) : "") << "), heddle::pack_pair<" << dtypeCudaName(bufs[o]->dtype) << ">("
           << res[o] << "), true, true);\n";
    } else {
      const std::string d = "d" + std::to_string(o) + "_";
      pair << "float* " << d << " = " << slot[o] << " + " << tile[o] << "::offset(lr, lc0"
           << (c0 ? " - " + std::to_string(c0) : "") << ");\n";
      pair << d << "[0] = " << res[o] << ".x;\n";
      pair << d << "[1] = " << res[o] << ".y;\n";
    }
  }
  os << ind << "// " << kir::describe(e) << ": this thread's wgmma fragment in column pairs"
     << (b16 ? ", four pairs per stmatrix.x4" : "") << (nOut > 1 ? ", every output" : "") << "\n";
  printMacro(os, "HEDDLE_PAIR", args, pair.str(), ind);
  if (b16) {
    std::ostringstream st;
    auto reg = [](int o, int j) { return (o ? "p" + std::to_string(o) + "_" : std::string("p")) + std::to_string(j); };
    for (int o = 0; o < nOut; ++o)
      st << "unsigned " << reg(o, 0) << ", " << reg(o, 1) << ", " << reg(o, 2) << ", " << reg(o, 3) << ";\n";
    const char* at[4] = {"fm, fn, 0", "fm, fn, 1", "fm, (fn) + 1, 0", "fm, (fn) + 1, 1"};
    for (int j = 0; j < 4; ++j) {
      st << (j ? " " : "") << "HEDDLE_PAIR(" << at[j];
      for (int o = 0; o < nOut; ++o) st << ", " << reg(o, j);
      st << ");";
    }
    st << "\n";
    st << "/* lane l: row l%8 of matrix l/8 = (fragment column fn + l/16, rows +8 when (l/8) is odd) */\n";
    st << "const int sr = Mma::row_of(" << w << ", 0, fm, 0) + (lane & 7) + (((lane >> 3) & 1) << 3);\n";
    st << "const int sc = 8 * (fn) + ((lane >> 4) << 3)" << (c0 ? " - " + std::to_string(c0) : "") << ";\n";
    for (int o = 0; o < nOut; ++o)
      st << "heddle::sm90::stmatrix_x4(" << slot[o] << " + " << tile[o] << "::offset(sr, sc), " << reg(o, 0) << ", "
         << reg(o, 1) << ", " << reg(o, 2) << ", " << reg(o, 3) << ");\n";
    printMacro(os, "HEDDLE_STMATRIX", "fm, fn", st.str(), ind);
  }
  std::string unused;
  for (int o = 0; o < nOut; ++o) unused += ", _";
  for (int fm = 0; fm < FM; ++fm)
    for (int fn = fnLo; fn < fnHi; fn += 2) {
      if (b16) {
        os << ind << "HEDDLE_STMATRIX(" << fm << ", " << fn << ");\n";
      } else {
        os << ind;
        for (int f = fn; f < fn + 2; ++f)
          for (int h = 0; h < 2; ++h)
            os << (f > fn || h ? " " : "") << "HEDDLE_PAIR(" << fm << ", " << f << ", " << h << unused << ");";
        os << "\n";
      }
    }
  if (b16) os << "#undef HEDDLE_STMATRIX\n";
  os << "#undef HEDDLE_PAIR\n";
}

// The direct store (registers -> D and the extra outputs D1..): column pairs, like the staged store. Each
// pair (fm, fn, h) of the fragment -- columns col = n0 + lc0 (even) and col + 1 of one row -- is skipped
// when its row or first column is outside D, runs the pair program (epilogueOpsPair: activations out of
// line, so the code does not grow with the accumulator count) and is stored by one 32-bit (16-bit
// output; 64-bit for f32) store when every output's pairs are whole and aligned (pair_st = heddle::pair_aligned:
// bases, ldd (and batch_stride_d) and N even; evaluated once, warp-uniform), else by scalar stores, the
// second only inside N (an odd N: the last column's pair is cut; an odd ldd: pairs start at odd addresses).
void directPairEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& w,
                        int FM, int fnLo, int fnHi, const std::string& ind) {
  const bool walk = k.tile.batchWalk;  // a batch walk's D is not offset per CTA: the tile's batch_idx indexes it
  std::ostringstream pair;
  pair << "const int lr = Mma::row_of(" << w << ", lane, fm, 2 * (h)), lc0 = Mma::col_of(" << w << ", lane, fn, 0);\n";
  pair << "const int row = m0 + lr, col = n0 + lc0;\n";
  pair << "if (row < M && col < N) {\n";
  pair << "const bool whole = col + 1 < N;  /* N may be odd: the last column's pair is cut */\n";
  pair << "const int col_0 = col, col_1 = whole ? col + 1 : col;\n";
  pair << "(void)col_0, (void)col_1;\n";
  if (readsPairs(k))  // operands read in pairs have an even column count (the launch checks it): col's pair is whole
    pair << "const int colv = col;  /* the aligned pair read (vec_e=2) */\n";
  pair << pairSource(e);
  epilogueOpsPair(pair, k, e.operandStage);
  pair << "const long long at = " << (walk ? "(long long)batch_idx * batch_stride_d + " : "")
       << "(long long)row * ldd + col;\n";
  std::vector<std::pair<std::string, std::pair<DType, int>>> outs = {{"D", {k.outDtype, k.epilogueResult}}};
  for (auto& o : k.extraOutputs) outs.push_back({o.param, {o.dtype, o.reg}});
  for (auto& [d, o] : outs)
    pair << "heddle::store_pair(" << d << " + at, heddle::pack_pair<" << dtypeCudaName(o.first) << ">(r" << o.second
         << "), pair_st, whole);\n";
  pair << "}\n";
  os << ind << "{  // " << kir::describe(e) << ": this thread's wgmma fragment in column pairs, stored directly\n";
  os << ind << "const bool pair_st = ";
  for (size_t i = 0; i < outs.size(); ++i)
    os << (i ? " && " : "") << "heddle::pair_aligned(" << outs[i].first << ", ldd" << (walk ? " | batch_stride_d" : "")
       << ", N)";
  os << ";  // every pair store aligned (warp-uniform)\n";
  printMacro(os, "HEDDLE_PAIR", "fm, fn, h", pair.str(), ind);
  for (int fm = 0; fm < FM; ++fm)
    for (int fn = fnLo; fn < fnHi; fn += 2) {
      os << ind;
      for (int f = fn; f < std::min(fn + 2, fnHi); ++f)
        for (int h = 0; h < 2; ++h)
          os << (f > fn || h ? " " : "") << "HEDDLE_PAIR(" << fm << ", " << f << ", " << h << ");";
      os << "\n";
    }
  os << "#undef HEDDLE_PAIR\n";
  os << ind << "}\n";
}

// The direct store with a computed output scale (Kernel::quant; docs/fp8.md "Computed output scales"). In
// the wgmma D fragment (PTX ISA "wgmma.mma_async" register fragments, matrix D of m64nNk; MmaSm90::row_of /
// col_of) lane l of a warp holds columns 8 fn + 2 (l % 4) + {0, 1} of rows l / 4 and l / 4 + 8 of the warp's 16,
// so the columns of one row are spread over one quad of lanes (CUTLASS's SM90 accumulator layout, four
// threads per row, is the second source). Per fragment row (fm, h) and group j of the tile's columns:
//   1. every pair of the group runs the pair program (rows past M too, their reads clamped: the whole warp
//      takes part in the shuffles), its value y written back over the pair's accumulators (read once, dead
//      after: no registers beyond the plain epilogue's; a 128 x 128 ping-pong tile has none to spare); amax
//      folds |y| of the columns inside N only;
//   2. two shfl.xor steps (1, 2) give every lane of the quad the row's amax over the group;
//   3. qs = max(amax, 1e-4) / maxFinite; lane l % 4 == 0 stores qs to the scale tensor [M, groups] for its row;
//   4. every pair inside M and N stores satfinite(y / qs) (pack_pair's cvt.rn.satfinite) like the direct store,
//      y read back from the accumulators.
// Through the TMA-store epilogue (e.to: the staging slot of chunk [colBegin, colEnd), 128 columns of 8-bit q;
// passes/tma_store_epilogue.cpp) the groups are the chunk's -- a chunk is exactly one group of 128, or the row of a
// 128-wide tile -- and step 4 writes every pair, rows past M and columns past N included (the TMA store clips
// them), into the slot like stagedPair8; s still goes straight to D1 from the lane that owns the row's amax.
void quantEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& w, int FM,
                   int FN, const std::string& ind) {
  const auto& q = *k.quant;
  const bool staged = e.to != nullptr;
  const bool chunk = e.colEnd > e.colBegin;
  const int fnLo = chunk ? e.colBegin / 8 : 0, fnHi = chunk ? e.colEnd / 8 : FN, c0 = chunk ? e.colBegin : 0;
  const int gfn = q.group == kQuantRow ? FN : q.group / 8;  // fragment columns (of 8) per group
  const std::string T = dtypeCudaName(k.outDtype), y = "r" + std::to_string(q.reg);
  const std::string at = e.acc->name + ".acc[fm][fn][2 * (h)";  // the pair's accumulators, then its y
  std::ostringstream val;  // step 1: the pair program, y over the accumulators, folded into amax
  val << "const int lr = Mma::row_of(" << w << ", lane, fm, 2 * (h)), lc0 = Mma::col_of(" << w << ", lane, fn, 0);\n";
  val << "const int row = m0 + lr < M ? m0 + lr : M - 1;  /* rows past M still shuffle: reads stay in bounds */\n";
  val << "const int col_0 = n0 + lc0 < N ? n0 + lc0 : N - 1, col_1 = n0 + lc0 + 1 < N ? n0 + lc0 + 1 : N - 1;\n";
  val << "(void)row, (void)col_0, (void)col_1;\n";
  if (readsPairs(k)) val << "const int colv = n0 + lc0 < N - 2 ? n0 + lc0 : N - 2;  /* the aligned pair read */\n";
  val << pairSource(e);
  epilogueOpsPair(val, k, e.operandStage);
  val << at << "] = " << y << ".x, " << at << " + 1] = " << y << ".y;  /* y over the dead accumulators */\n";
  val << "if (n0 + lc0 < N) amax = fmaxf(amax, fabsf(" << y
      << ".x));  /* a column outside N never enters the amax */\n";
  val << "if (n0 + lc0 + 1 < N) amax = fmaxf(amax, fabsf(" << y << ".y));\n";
  std::ostringstream st;  // step 4: the pair divided by the group's scale, stored like the direct store
  if (staged) {           // ... or into the chunk's staging slot (stagedPair8), clipped by the TMA store
    const std::string tile =
        "heddle::sm90::TmaTile<" + std::to_string(e.to->rows) + ", " + std::to_string(e.to->cols) + ", " + T + ">";
    st << "const int lr = Mma::row_of(" << w << ", lane, fm, 2 * (h)), lc0 = Mma::col_of(" << w << ", lane, fn, 0);\n";
    st << "heddle::store_pair(q_slot + " << tile << "::offset(lr, lc0" << (c0 ? " - " + std::to_string(c0) : "")
       << "), heddle::pack_pair<" << T << ">({" << at << "] / qs, " << at << " + 1] / qs}), true, true);\n";
  } else {
    st << "const int row = m0 + Mma::row_of(" << w << ", lane, fm, 2 * (h)), col = n0 + Mma::col_of(" << w
       << ", lane, fn, 0);\n";
    st << "if (row < M && col < N)\n";
    st << "  heddle::store_pair(D + (long long)row * ldd + col, heddle::pack_pair<" << T << ">({" << at << "] / qs, "
       << at << " + 1] / qs}), pair_st, col + 1 < N);\n";
  }
  os << ind << "{  // " << kir::describe(e) << ": this thread's wgmma fragment quantized to " << dtypeName(k.outDtype)
     << " with a scale per row and " << (q.group == kQuantRow ? std::string("row") : std::to_string(q.group))
     << " columns (amax over the quad), "
     << (staged ? "q into the staging slot for the TMA store, s stored directly" : "stored directly") << "\n";
  if (!staged)
    os << ind << "const bool pair_st = heddle::pair_aligned(D, ldd, N);  // every pair store aligned (warp-uniform)\n";
  else  // the chunk's slot, once per group
    os << ind << T << "* const q_slot = " << e.to->name << " + (" << e.toStage.str() << ") * "
       << e.to->rows * e.to->cols << ";\n";
  printMacro(os, "HEDDLE_QUANT_Y", "fm, fn, h", val.str(), ind);
  printMacro(os, "HEDDLE_QUANT_ST", "fm, fn, h", st.str(), ind);
  const int groups = (FN + gfn - 1) / gfn;
  for (int fm = 0; fm < FM; ++fm)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < groups; ++j) {
        const int lo = j * gfn, hi = std::min(FN, lo + gfn);
        if (hi <= fnLo || lo >= fnHi) continue;  // a group of another chunk
        if (lo < fnLo || hi > fnHi)
          fail<HeddleError>("printer: ", kir::describe(e), " splits quantization group ", j, " between chunks");
        os << ind << "{  // row block " << fm << ", rows +" << 8 * h << ": group " << j << " (fragment columns " << lo
           << ".." << hi - 1 << ")\n";
        os << ind << "float amax = 0.0f;\n";
        for (int fn = lo; fn < hi; ++fn) os << ind << "HEDDLE_QUANT_Y(" << fm << ", " << fn << ", " << h << ");\n";
        os << ind
           << "amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));  // the quad holds the row's columns\n";
        os << ind << "amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));\n";
        os << ind << "const float qs = fmaxf(amax, " << floatLit(kQuantEps) << ") / " << floatLit(maxFinite(k.outDtype))
           << ";\n";
        const std::string g0 = "n0 + " + std::to_string(lo * 8);  // the group's first column
        os << ind << "const int qrow = m0 + Mma::row_of(" << w << ", lane, " << fm << ", " << 2 * h << ");\n";
        os << ind << "if ((lane & 3) == 0 && qrow < M && " << g0 << " < N)  // one lane per (row, group)\n";
        os << ind << "  " << q.scale << "[(long long)qrow * " << q.groups << " + "
           << (q.group == kQuantRow ? std::string("0") : "(" + g0 + ") / " + std::to_string(q.group)) << "] = qs;\n";
        for (int fn = lo; fn < hi; ++fn) os << ind << "HEDDLE_QUANT_ST(" << fm << ", " << fn << ", " << h << ");\n";
        os << ind << "}\n";
      }
  os << "#undef HEDDLE_QUANT_ST\n#undef HEDDLE_QUANT_Y\n";
  os << ind << "}\n";
}

// Every epilogue of a wgmma kernel: registers -> D (directPairEpilogue), registers -> sC (raw staging),
// or registers / sC -> sD for the TMA store (stagedEpilogue). The printer spells out one statement per
// fragment element or pair (a macro over compile-time (fm, fn, r)): a loop with a large body (an epilogue with erf) stops
// being unrolled at some size, and a dynamically indexed accumulator array lives in local memory.
void fragmentEpilogue(std::ostream& os, const kir::Kernel& k, const kir::EpilogueStore& e, const std::string& ind) {
  const auto& tl = k.tile;
  const int FM = (tl.coop ? tl.bm / tl.mmaWarpgroups : tl.bm) / 64, FN = tl.bn / 8;
  const std::string w = e.warpShift ? "warp - " + std::to_string(e.warpShift) : "warp";
  const bool chunk = e.colEnd > e.colBegin;
  const int fnLo = chunk ? e.colBegin / 8 : 0, fnHi = chunk ? e.colEnd / 8 : FN;
  if (k.quant) {  // the schedule rules (passes/build_epilogue.cpp): the direct store or the MMA role's TMA store
    if (e.raw || e.from || !e.toExtra.empty() || chunk != (e.to != nullptr))
      fail<HeddleError>("printer: ", kir::describe(e), " stages a quantized output another way than by chunks");
    return quantEpilogue(os, k, e, w, FM, FN, ind);
  }
  if (e.to && !e.raw) return stagedEpilogue(os, k, e, w, FM, fnLo, fnHi, ind);
  if (!e.raw) return directPairEpilogue(os, k, e, w, FM, fnLo, fnHi, ind);
  if (!e.to) fail<HeddleError>("printer: ", kir::describe(e), " stores raw accumulators nowhere");
  std::ostringstream body;  // raw accumulators -> the staging tile sC (an epilogue role stages from it)
  body << "const int lr = Mma::row_of(" << w << ", lane, fm, r), lc = Mma::col_of(" << w << ", lane, fn, r);\n";
  body << e.to->name << "[(" << e.toStage.str() << ") * " << e.to->rows * e.to->cols << " + lr * " << e.to->cols
       << " + lc] = " << e.acc->name << ".acc[fm][fn][r];\n";
  os << ind << "// " << kir::describe(e) << ": this thread's raw wgmma fragment, element by element\n";
  printMacro(os, "HEDDLE_FRAGMENT", "fm, fn, r", body.str(), ind);
  for (int fm = 0; fm < FM; ++fm)
    for (int fn = fnLo; fn < fnHi; ++fn) {
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
      os << ind << "unsigned long long* " << b.name << " = reinterpret_cast<unsigned long long*>(" << smemBase(k)
         << " + " << b.offset << ");  // " << b.stages << " mbarrier(s)\n";
      return true;
    }
    case kir::NodeKind::TileLoad: {
      auto& t = static_cast<const kir::TileLoad&>(n);
      if (t.kind != LoadKind::TmaLoad) return false;
      if (!t.mbar) fail<HeddleError>("printer: ", kir::describe(t), " completes on no mbarrier");
      // a bias row or residual tile, or block scales' scale_a slot (block_scale_ring.cpp: the [1, BM] box at
      // (k-block, m0) of the M-major scale_a map): one unswizzled [rows, cols] box
      if (t.dst->role == "epi_tma" || t.dst->role == "scale_a") {
        os << ind << "heddle::sm90::tma_load_plain<" << t.dst->rows << ", " << t.dst->cols << ">("
           << stagePtr(*t.dst, t.stage) << ", &" << t.tensorMap << ", " << t.row0.str() << ", " << t.col0.str() << ", "
           << mbarPtr(*t.mbar, t.mbarIndex) << ");\n";
        return true;
      }
      bool batched = false;  // a rank-2 B under a batched A is one matrix: a 2-D map
      for (auto& m : k.tensorMaps)
        if (m.param == t.tensorMap) batched = m.batched;
      const int rank = batched ? 3 : 2;
      if (t.multicast > 1) {  // this CTA's rows of a tile the cluster shares (passes/cluster_multicast.cpp)
        os << ind << "heddle::sm90::tma_load_tile_multicast<Mma::Tile" << t.dst->role << ", " << t.multicast << ">("
           << stagePtr(*t.dst, t.stage) << ", &" << t.tensorMap << ", " << t.row0.str() << ", " << t.col0.str() << ", "
           << mbarPtr(*t.mbar, t.mbarIndex) << ", crank, " << ((1 << t.multicast) - 1) << ");\n";
        return true;
      }
      os << ind << "heddle::sm90::tma_load_tile<Mma::Tile" << t.dst->role << ", " << rank << ">("
         << stagePtr(*t.dst, t.stage) << ", &" << t.tensorMap << ", " << t.row0.str() << ", " << t.col0.str() << ", "
         << (batched ? "batch_idx" : "0") << ", " << mbarPtr(*t.mbar, t.mbarIndex) << ");\n";
      return true;
    }
    case kir::NodeKind::EpilogueStore: {
      if (k.tile.mma != MmaKind::Wgmma ||
          static_cast<const kir::EpilogueStore&>(n).partial != kir::EpilogueStore::Partial::None)
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
      bool batched = false;  // a batched D: a 3-D map, the tile's batch_idx its third coordinate
      for (auto& m : k.tensorMaps)
        if (m.param == t.tensorMap) batched = m.batched;
      os << ind << "heddle::sm90::tma_store_tile<heddle::sm90::TmaTile<" << t.src->rows << ", " << t.src->cols << ", "
         << dtypeCudaName(t.src->dtype) << ">, " << (batched ? 3 : 2) << ">(&" << t.tensorMap << ", " << t.row0.str()
         << ", " << t.col0.str() << ", " << (batched ? "batch_idx" : "0") << ", " << stagePtr(*t.src, t.stage)
         << ");\n";
      return true;
    }
    case kir::NodeKind::MmaPromote: {
      auto& m = static_cast<const kir::MmaPromote&>(n);
      if (!m.scaleSmem) fail<HeddleError>("printer: ", kir::describe(m), " has no scale_a ring slot");
      const std::string sa = stagePtr(*m.scaleSmem, m.scaleStage);
      os << ind << m.acc->name << ".promote(" << m.tmp->name << ", " << sa << ", " << m.scaleB << ", M, N, "
         << m.kBlocks.str() << ", m0, n0, " << m.kBlock.str() << ", " << m.first.str() << ", warp, lane);\n"
         << ind << m.tmp->name << ".zero();  // the next interval's first wgmma overwrites " << m.tmp->name
         << " (scale-d = 0)\n";
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
      return "heddle::sm90::named_barrier(" + std::to_string(s.arg) +
             (s.index.isConst() && s.index.constValue() == 0 ? "" : " + " + s.index.str()) + ", " +
             std::to_string(s.count) + ");";
    case kir::SyncKind::BulkCommit: return "heddle::sm90::bulk_commit();";
    case kir::SyncKind::BulkWaitRead: return "heddle::sm90::bulk_wait_read<" + std::to_string(s.arg) + ">();";
    case kir::SyncKind::MbarArriveRemote: return "heddle::sm90::mbar_arrive_cluster(" + bar() + ", 1u - crank);";
    case kir::SyncKind::FenceMbarrierInit: return "heddle::sm90::fence_mbarrier_init_cluster();";
    case kir::SyncKind::ClusterSync: return "heddle::sm90::cluster_sync();";
    default: (void)k; return "";
  }
}

std::string mmaType(const kir::Kernel& k) {
  const auto& t = k.tile;
  std::ostringstream os;
  os << "heddle::MmaSm90<" << t.bm << ", " << t.bn << ", " << t.bk << ", " << t.mmaWarpgroups << ", "
     << (t.coop ? "true" : "false") << ", " << (t.aKMajor ? "true" : "false") << ", " << (t.bKMajor ? "true" : "false")
     << ", T, " << t.mmaWarpBase;
  if (t.inDtypeB != t.inDtype) os << ", " << dtypeCudaName(t.inDtypeB);  // mixed e4m3 / e5m2 operands
  os << ">";
  return os.str();
}

}  // namespace heddle::wgmmaprint
