// Parses the ptxas report that `--ptxas-options=-v` leaves in the NVRTC program log: registers,
// spills, stack frame and static shared memory per entry function, plus warnings such as an ignored
// setmaxnreg. Compile checks (no spills, no ignored setmaxnreg) read these numbers.
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
  std::vector<std::string> warnings;  // "ptxas warning" lines and "Potential Performance Loss" lines
  std::vector<PtxasKernelStats> kernels;
};

struct PtxasReport {
  std::string text;  // only the lines of the log that ptxas wrote
  PtxasStats stats;
};

PtxasReport parsePtxasReport(const std::string& log);

}  // namespace heddle::rt
