// Targets and their capabilities. Shared lowering asks TargetInfo what the hardware offers
// (async copies, TMA, wgmma, split barriers, wavefront width, shared-memory limit) and never
// asks "CUDA or HIP?".
#pragma once

#include <string>
#include <vector>

#include "heddle/ir/mma_kind.h"

namespace heddle {

enum class Backend { Cuda, Hip };

// How a target lowers a matmul group (2-4 matmuls sharing A, Fusion::matmuls): the group kernel is built
// with mma.sync + cp.async only (schedule/matmul_schedule.cpp, validateMatmulGroup).
//   Best:   on the pipeline a single matmul of this target takes too (sm_80)
//   Weaker: on a pipeline weaker than a single matmul's (sm_90a: TMA + wgmma, sm_100a: TMA + tcgen05)
//   None:   refused with a ScheduleError (AMD MFMA / WMMA targets, targets without mma.sync)
enum class GroupLowering { None, Weaker, Best };

struct TargetInfo {
  std::string name;                 // "sm_80", "sm_90a", "sm_100a", "gfx90a", "gfx942", "gfx1200", "gfx1250"
  Backend backend = Backend::Cuda;  // selects the printer and the runtime compiler only
  int warpSize = 32;
  long smemLimit = 0;  // bytes of shared memory / LDS one block may use (opt-in maximum)
  int maxThreads = 1024;
  bool cpAsync = false;  // global->shared asynchronous copies with commit/wait groups
  bool tma = false;      // bulk tensor copies completing on mbarriers
  bool mbarrier = false;
  MmaKinds mma;         // the MMA mechanisms offered (mma.sync, wgmma, tcgen05, MFMA, WMMA)
  int tmemColumns = 0;  // tensor-memory columns per CTA (128 lanes x tmemColumns 32-bit cells)
  bool setmaxnreg = false;
  bool electSync = false;     // PTX elect.sync: a single issuing thread is elected in its warp (sm_90+)
  bool splitBarrier = false;  // GFX12 s_barrier_signal / s_barrier_wait
  // GFX12.5 named barrier objects: ids 1..namedBarriers (and the NULL barrier 0) with s_barrier_init
  // (expected count in waves through m0), s_barrier_join / s_barrier_leave, s_barrier_signal id,
  // s_barrier_signal_isfirst id, s_barrier_wait id (docs/backends.md, "Barrier objects"). 0: none.
  int namedBarriers = 0;
  bool asyncLds = false;   // AMD async global->LDS loads counted by vmcnt
  bool gridFlags = false;  // gpu-scope release/acquire flags between CTAs (split-K, heddle_grid.cuh)
  std::string rtcArch;     // what the runtime compiler is given
  // AMD (docs/backends.md): the vmcnt counter width, and whether s_barrier may be
  // issued with memory counters outstanding (LLVM FeatureBackOffBarrier; without it they drain first).
  bool backOffBarrier = true;
  // The workgroup barrier is a per-wave scalar op (wave-uniform control flow suffices) and a wave that
  // ends drops it (AMDGPU execution synchronization); false: a per-thread barrier (bar.sync).
  bool waveBarrier = false;
  int vmcntMax = 0;  // largest s_waitcnt vmcnt / s_wait_loadcnt immediate (0 = no counter)
  // Shared-memory operand tiles of the register-MMA path (cp_async / plain / async_lds caches):
  // rows are XOR-swizzled inside lines of this many bytes (heddle_copy.cuh SmemTile), so a row is
  // 16, 32 or 64 bytes or a whole number of lines. 0: rows are unswizzled (heddle_hip_copy.cuh
  // LdsTile) and any multiple of 16 bytes.
  int smemSwizzleLine = 0;
  std::string describe() const;
  // The one rule for matmul groups (see GroupLowering).
  GroupLowering matmulGroup() const;
  // The one rule for operand-tile rows (see smemSwizzleLine): a row of `bytes` bytes is accepted.
  bool smemRowOk(long bytes) const;
  // The global->shared load kinds this target offers, for advice: "'cp_async' or 'plain'".
  std::string loadKindsAvailable() const;
};

// Known targets; throws ScheduleError listing the valid names for an unknown one.
const TargetInfo& targetInfo(const std::string& name);
std::vector<std::string> knownTargets();

// CUDA binaries and devices (docs/runtime.md, "Driver and launch": target vs device). Why a binary compiled for `arch`
// (an rtcArch: sm_XY, sm_XYa, sm_XYf; compute_XY is PTX) cannot load on a device of compute capability
// major.minor, as one phrase; "" when it loads (or `arch` is not a CUDA architecture). A plain sm_XY
// cubin runs on X.y devices with y >= Y (its own major version only), an 'a' (architecture-specific)
// one only on exactly X.Y, an 'f' (family) one on X.y with y >= Y; PTX is compiled by the driver for
// any capability >= X.Y ('a': exactly X.Y).
std::string cudaArchMismatch(const std::string& arch, int major, int minor);
// The heddle CUDA target whose binaries load on a device of this capability (the most capable such
// target: sm_80 on 8.x, sm_90a on 9.0, sm_100a on 10.0). ScheduleError otherwise, naming heddle's CUDA
// targets and the capabilities each loads on.
std::string cudaTargetFor(int major, int minor);

}  // namespace heddle
