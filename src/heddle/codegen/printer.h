// Printers: a C-like base that prints kernel IR (loops, ifs, index math, the tile ops and the
// epilogue program) and thin per-target subclasses that spell the target's qualifiers,
// intrinsics and sync ops. Printing makes no decisions: every sync is already in the kernel IR.
#pragma once

#include <sstream>
#include <string>

#include "heddle/kir/kir.h"
#include "heddle/target/target.h"

namespace heddle {

class CLikePrinter {
 public:
  explicit CLikePrinter(const TargetInfo& t) : target_(t) {}
  virtual ~CLikePrinter() = default;
  std::string print(const kir::Kernel& k);

 protected:
  // target spellings
  virtual std::string prelude(const kir::Kernel& k) = 0;  // includes, helpers
  virtual std::string kernelQualifiers(const kir::Kernel& k) = 0;
  virtual std::string syncOp(const kir::Sync& s) = 0;
  virtual std::string mmaType(const kir::Kernel& k) = 0;  // accumulator fragment type

  void block(const kir::Block& b, int depth);
  void node(const kir::Node& n, int depth);
  void epilogue(const kir::Kernel& k, int depth);      // per accumulator element
  void pairEpilogue(const kir::Kernel& k, int depth);  // per column pair (EpilogueStore::columnPairs)
  void groupedWalk(const kir::Kernel& k);              // a grouped matmul's m tile from offs (tile.grouped)
  void maskedRows(const kir::Kernel& k);               // the masked layout's row count from counts (tile.masked)
  std::string bufferPtr(const kir::Buffer& b, const kir::IExpr& stage);
  std::string paramDecl(const kir::Param& p);
  std::string ind(int d) { return std::string(2 * d, ' '); }

  const TargetInfo& target_;
  const kir::Kernel* k_ = nullptr;
  std::ostringstream os_;
};

// Returns the CUDA (or HIP) source for a lowered kernel.
// A float constant as CUDA/HIP source: the double rounded to float, inf/NaN through
// heddle::f32_bits (heddle_math.cuh), e.g. "0.5f", "1e+30f", "heddle::f32_bits(0x7f800000u)".
std::string floatLit(double v);
// A global epilogue operand read at (batch_idx, row, `col`) through its stride params (broadcast axes have
// none), as a float: "heddle::to_float(T[(long long)row * ldT + ...])".
std::string epilogueGlobalRead(const kir::EpiOp& op, const std::string& col);
// The epilogue program on a pair of adjacent columns of one fragment row (`const heddle::pairf rN = ...;` per
// op, r0 = the two accumulators; heddle_math.cuh): element-wise arithmetic on both halves, transcendental
// activations by one out-of-line call per pair (heddle::ool: their code exists once per kernel), a TMA-loaded
// 16-bit operand (ring slot `stage`, tile position lr, lc0) as one 32-bit word, an operand read in pairs
// (EpiOp::pairs) by one load of the whole, aligned pair at `colv`, other global operands at (row, col_0) and
// (row, col_1),
// a matmul group member's slice at the same pair (fm, fn, h). Used by the sm_90a staged epilogue and the
// mma.sync register epilogue (CLikePrinter::pairEpilogue).
void epilogueOpsPair(std::ostream& os, const kir::Kernel& k, const kir::IExpr& stage);
// The epilogue program on one element (`const float rN = ...;` per op, at indentation `ind`; r0 = the
// accumulator acc[fm][fn][r]): a TMA-loaded operand from its ring slot `stage` at the tile's (lr,) lc, a global
// one at (batch_idx, row, col), a matmul group member's slice at the same element. Used by the per-element
// register epilogue (CLikePrinter::epilogue: AMD) and the tcgen05 one (tcgen05_printer.cpp).
void epilogueOps(std::ostream& os, const kir::Kernel& k, const kir::IExpr& stage, const std::string& ind);
// Whether any epilogue operand is read in pairs (EpiOp::pairs, vectorize_epilogue_reads): the pair epilogues
// then print the pair read's column `colv`.
bool readsPairs(const kir::Kernel& k);
// The element index of that read (the column term unscaled when `unitCol`: an operand read in pairs,
// whose column stride the launch checked to be 1).
std::string epilogueGlobalIndex(const kir::EpiOp& op, const std::string& col, bool unitCol = false);
// The shared-memory base the buffers are placed at: heddle_smem, or in a cluster kernel this CTA's part of
// it (heddle_cta_smem = heddle::sm90::cta_smem(heddle_smem): the interpreter's window holds the cluster's CTAs).
inline std::string smemBase(const kir::Kernel& k) { return k.cluster > 1 ? "heddle_cta_smem" : "heddle_smem"; }

std::string printKernel(const kir::Kernel& k, const TargetInfo& t);
// The HIP subclass (codegen/hip_printer.cpp); printKernel dispatches to it for Backend::Hip.
std::string printHipKernel(const kir::Kernel& k, const TargetInfo& t);
// The HIP spelling of every sync op of `k`, in program order (hand-built kernels have no full source).
std::vector<std::string> printHipSyncOps(const kir::Kernel& k, const TargetInfo& t);

}  // namespace heddle
