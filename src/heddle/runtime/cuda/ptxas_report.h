// Parses the ptxas report that `--ptxas-options=-v` leaves in the NVRTC program log: registers,
// spills, stack frame and static shared memory per entry function, plus warnings such as an ignored
// setmaxnreg. Compile checks (no spills, no advisory) read these numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace heddle::rt {

// One entry function ("Compiling entry function 'k' for 'sm_90a'").
struct PtxasKernelStats {
  std::string name;
  int registers = 0;
  int64_t spillStoreBytes = 0;
  int64_t spillLoadBytes = 0;
  int64_t stackFrame = 0;
  int64_t smemBytes = 0;  // static shared memory only; dynamic smem is a launch parameter
};

// The whole program: worst case over kernels (max registers/stack/smem, summed spills over every
// function ptxas reported, including non-inlined device functions).
struct PtxasStats {
  int registers = 0;
  int64_t spillStoreBytes = 0;
  int64_t spillLoadBytes = 0;
  int64_t stackFrame = 0;
  int64_t smemBytes = 0;
  bool setmaxnregIgnored = false;  // ptxas said it ignored a setmaxnreg (C7508 and similar)
  // ptxas serialised the wgmma pipeline: "wgmma.mma_async instructions are serialized due to ..." (C7510 a
  // function call, C7514 accumulators read, C7515 accumulators defined, ...) or it injected a
  // warpgroup.arrive / wait of its own (C7519 and similar): every wgmma then waits for the one before.
  bool wgmmaSerialized = false;
  // Every line that means slow or wrong code: a serialised wgmma pipeline or an ignored instruction.
  // Kernel.build refuses a kernel with one; the autotuner drops it.
  std::vector<std::string> advisories;
  std::vector<std::string> warnings;  // "ptxas warning" lines and "Potential Performance Loss" lines
  std::vector<PtxasKernelStats> kernels;
};

struct PtxasReport {
  std::string text;  // only the lines of the log that ptxas wrote
  PtxasStats stats;
};

PtxasReport parsePtxasReport(const std::string& log);

}  // namespace heddle::rt
