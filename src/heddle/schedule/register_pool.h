// The setmaxnreg register pool (PTX ISA "setmaxnreg": "A pool of available registers is maintained per-CTA").
// A CTA is launched with registers-per-thread-at-entry x threads registers; setmaxnreg.dec returns a warpgroup's
// surplus to that pool and setmaxnreg.inc takes from it, blocking until enough are free. Role budgets whose sum
// exceeds the pool therefore hang on the GPU (issue 28: load 48 / mma 232 on a 384-thread kernel needs 65,536
// of a 64,512-register pool = 168 x 384), though they compile without a ptxas warning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/schedule/role_pipeline_schedule.h"

namespace heddle {

struct RegisterPool {
  int perThread = 0;       // registers per thread at entry, rounded up to the allocation unit of 8
  int threads = 0;         // of one CTA
  bool fromPtxas = false;  // perThread is the compiled kernel's count (else the __launch_bounds__ cap)
  int64_t size() const { return (int64_t)perThread * threads; }
};

// The registers per thread a CTA of `threads` threads launched with __launch_bounds__(threads, 1) holds at most at
// entry: 65536 / threads rounded down to a multiple of 8, at most 256 (168 for 384 threads, 96 for 640).
int launchBoundsRegisters(int threads);
// The pool of such a CTA: ptxas's count where the kernel was compiled (ptxasRegisters > 0), else the cap.
RegisterPool registerPool(int threads, int ptxasRegisters = 0);

// Accumulators live in registers: a thread needs about this many besides them (addresses, descriptors, the
// epilogue); with fewer ptxas spills (sm_90a: 192x256 on one warpgroup holds 384 and spilled ~14 KB).
constexpr int kSpareRegisters = 48;
// The registers a thread of a `threads`-thread kernel without setmaxnreg may hold: launchBoundsRegisters, at most
// 255 (an instruction names registers R0..R254).
int entryRegisterCap(int threads);
// Whether `accumulators` f32 accumulators per thread leave kSpareRegisters of a `cap`-register thread: the rule of
// the sm_90a warpgroup tiles (role_pipeline_schedule.cpp) and the sm_80 warp tiles (matmul_schedule.cpp).
inline bool accumulatorsFit(int accumulators, int cap) { return accumulators <= cap - kSpareRegisters; }

// A role's warpgroups and the per-thread budget it sets with setmaxnreg (0: none, it keeps the entry count).
struct WarpgroupBudget {
  std::string role;
  int warpgroups = 0;
  int registers = 0;
};
std::vector<WarpgroupBudget> roleBudgets(const RolePipelineSchedule& h);

// "" when the budgets fit the pool; else what they need, the pool, and which budget to lower to what.
std::string registerPoolProblem(const std::vector<WarpgroupBudget>& budgets, const RegisterPool& pool);
// ScheduleError "warp_specialize(<mm>): <problem>" when they do not fit.
void checkRegisterPool(const std::string& mm, const std::vector<WarpgroupBudget>& budgets, const RegisterPool& pool);

}  // namespace heddle
