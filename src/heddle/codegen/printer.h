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
  virtual std::string prelude(const kir::Kernel& k) = 0;       // includes, helpers
  virtual std::string kernelQualifiers(const kir::Kernel& k) = 0;
  virtual std::string syncOp(const kir::Sync& s) = 0;
  virtual std::string mmaType(const kir::Kernel& k) = 0;       // accumulator fragment type

  void block(const kir::Block& b, int depth);
  void node(const kir::Node& n, int depth);
  void epilogue(const kir::Kernel& k, int depth);
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
