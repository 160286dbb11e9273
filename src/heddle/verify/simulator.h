// CPU simulator of the kernel IR: runs one or more CTAs of a kernel thread by thread under an
// explicit (adversarial or seeded random) schedule, with real data, and reports
//   races         conflicting shared/global accesses of different threads not ordered by
//                 happens-before (program order, block barriers, retired cp.async groups)
//   deadlocks     every live thread blocked (a barrier some threads never reach, threads waiting
//                 at different barriers, the step limit)
//   async misuse  reads/writes of cp.async results before the wait_group that retires them
//   mismatches    output elements that differ from a reference (numbers), or reads that see a
//                 different write than program order says (hand-built kernels)
//   barrier misuse  AMD barrier objects (verify/barrier_objects.cpp): the undefined-behaviour cases of
//                 the AMDGPU execution-synchronization model (an operation on an uninitialized
//                 barrier, a wait without a join, a drop race, an expected count driven negative)
//                 and misuse the model leaves defined but a plan must not rely on (arrive after drop)
// See docs/verification.md for what is and is not modelled.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "heddle/kir/kir.h"

namespace heddle::verify {

enum class Schedule { Adversarial, Random };
const char* scheduleName(Schedule s);
Schedule scheduleFromName(const std::string& s);

struct SimOptions {
  Schedule schedule = Schedule::Adversarial;
  uint64_t seed = 0;
  int64_t maxSteps = 50'000'000;             // all CTAs together; beyond it: reported as a hang
  std::vector<std::array<int64_t, 3>> ctas;  // (x, y, z) block indices; empty = the whole grid
  int maxReportsPerKind = 12;                // distinct messages kept per list
  bool stopAtFirstError = false;             // mutation runs: any finding kills the mutant
  double atol = -1, rtol = -1;               // < 0: chosen by the output dtype
  int warpSize = 32;
  // AMD (verify/amdgcn_sim.cpp): the matrix-core fragment layout of MmaStep/EpilogueStore ownership
  // (0: sm80 m16n8, 1: MFMA 16x16 wave64, 2: WMMA 16x16 wave32, as heddle_hip_mma.cuh), and whether
  // a barrier may be reached with LDS DMA in flight (false: reported, as LLVM drains counters there).
  int mmaFragment = 0;
  bool backOffBarrier = true;
  // AMD barrier model: a thread that ends drops the workgroup barrier (GFX6-11 s_barrier, GFX12
  // barrier -1), so the others complete it without the thread; false (CUDA): a barrier an exited
  // thread never reaches is a deadlock.
  bool dropOnExit = false;
  // AMD workgroup fences (verify/workgroup_fences.cpp): the workgroup barrier orders execution only; it
  // publishes a thread's accesses through the release fence before its arrive and makes them visible
  // through the acquire fence after its wait (kir::Sync::noReleaseFence / noAcquireFence). false (CUDA):
  // bar.sync orders memory by itself.
  bool amdFences = false;
};

struct SimInputs {
  std::map<std::string, int64_t> scalars;             // M, N, K, lda, ldb, ldd, strides, batch
  std::map<std::string, std::vector<float>> tensors;  // by kernel param name (A, B, E_bias): storage
                                                      // from the tensor's first element, as float
  std::vector<float> reference;                       // optional: D in the output's layout, or D and then
                                                      // each further output (D1, ...) in the same layout
};

struct SimResult {
  std::vector<std::string> races, deadlocks, asyncMisuse, mismatches, barrierMisuse;
  std::vector<float> output;  // D, then D1, ... as simulated (NaN where no simulated CTA wrote)
  int64_t steps = 0;
  int ctas = 0;
  int64_t findings = 0;  // all findings, before de-duplication
  std::string schedule;  // "adversarial" | "random(seed=7)"
  bool ok() const {
    return races.empty() && deadlocks.empty() && asyncMisuse.empty() && mismatches.empty() && barrierMisuse.empty();
  }
  std::string report() const;
};

SimResult simulate(const kir::Kernel& k, const SimInputs& in, const SimOptions& opt);

}  // namespace heddle::verify
