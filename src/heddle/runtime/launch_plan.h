// LaunchPlan: a kernel launch prepared once per call signature, so that an eager call does no more
// than write the tensors' addresses into their argument slots and launch.
//
// heddle.Kernel builds one after the first full launch for a signature (shapes, strides, dtypes,
// device: docs/runtime.md, "Eager calls"): grid, block, shared memory and every scalar argument
// (sizes, leading dimensions, batch strides, tensor maps) are fixed by it. Per call, bind() takes one
// address per tensor (inputs, then the output):
//   slot {arg, tensor, align, 0}        the address goes into argument `arg`; it must be a multiple
//                                       of `align` bytes (the kernel's vector copies)
//   slot {arg or -1, tensor, 1, pinned} the address is baked into a tensor map: it must equal `pinned`
// A broken slot binds nothing and returns false; the caller then takes the full path (checks,
// prepare: new tensor maps or the InputError naming the misaligned tensor) and re-plans.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "heddle/runtime/launch.h"

namespace heddle::rt {

struct PlanSlot {
  int arg = -1;          // index into the argument list, -1: checked only (a pinned address)
  uint32_t tensor = 0;   // index into the call's tensors
  uint64_t align = 1;    // bytes
  uint64_t pinned = 0;   // != 0: the only address this plan takes for the tensor
};

// One call's driver argument array, packed by LaunchPlan::bind without copying the plan's arguments:
// scalars and addresses by value here, by-value blobs (tensor maps) read in place from the plan (which
// must outlive it).
struct BoundArgs {
  std::vector<uint64_t> scalars;
  std::vector<void*> ptrs;
  void** pointers() { return ptrs.empty() ? nullptr : ptrs.data(); }
};

class LaunchPlan {
 public:
  LaunchPlan(std::array<unsigned, 3> grid, std::array<unsigned, 3> block, unsigned smemBytes,
             std::vector<KernelArg> args, std::vector<PlanSlot> slots);

  // The argument list with the addresses in their slots (in *out); false when one breaks its slot.
  // Const: one plan serves concurrent calls.
  bool bind(const std::vector<uint64_t>& addresses, std::vector<KernelArg>* out) const;
  // The launch path: the driver's argument array, the plan's arguments neither copied nor re-packed.
  bool bind(const std::vector<uint64_t>& addresses, BoundArgs* out) const;
  size_t tensorCount() const { return tensors_; }

  const std::array<unsigned, 3>& grid() const { return grid_; }
  const std::array<unsigned, 3>& block() const { return block_; }
  unsigned smemBytes() const { return smem_; }
  const std::vector<KernelArg>& args() const { return args_; }
  // CTAs per thread-block cluster ({1, 1, 1}: none; a clustered kernel launches through cuLaunchKernelEx)
  const std::array<unsigned, 3>& cluster() const { return cluster_; }
  void setCluster(const std::array<unsigned, 3>& c) { cluster_ = c; }
  // The CUDA device whose primary context the launch runs in (the tensors' device; -1: the current
  // context, LoadedKernel::launch)
  int device() const { return device_; }
  void setDevice(int d) { device_ = d; }

 private:
  std::array<unsigned, 3> grid_, block_, cluster_ = {1, 1, 1};
  int device_ = -1;
  unsigned smem_;
  std::vector<KernelArg> args_;
  std::vector<PlanSlot> slots_;
  size_t tensors_ = 0;
};

}  // namespace heddle::rt
