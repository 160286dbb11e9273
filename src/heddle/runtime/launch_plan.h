// LaunchPlan: a kernel launch prepared once per call signature, so that an eager call does no more
// than write the tensors' addresses into their argument slots and launch.
//
// heddle.Kernel builds one after the first full launch for a signature (shapes, strides, dtypes,
// device: docs/runtime.md, "Eager calls"): grid, block, shared memory and every scalar argument
// (sizes, leading dimensions, batch strides, tensor maps) are fixed by it. Per call, bind() takes one
// address per tensor (inputs, then the output) and the stream:
//   slot {arg, tensor, align}        the address goes into argument `arg`; it must be a multiple of
//                                    `align` bytes (the kernel's vector copies)
//   map {arg, tensor, spec}          argument `arg` is a tensor map encoded from `spec` over the tensor:
//                                    a call with another address passes a copy whose global address is
//                                    replaced (cuTensorMapReplaceAddress, or encoded again from `spec`);
//                                    the address must be 16-byte aligned, 32 with a 32-byte interleave
//                                    (TMA's rule: tensorMapAddressAlignment, cuda_driver.h)
//   workspace {wsArg, flagsArg, slots, table}
//                                    a split-K / stream-K kernel's partial sums and flags: the ones the
//                                    kernel's WorkspaceTable holds for (the plan's device, the call's
//                                    stream), which must hold `slots` slots
// A broken slot (a misaligned address, no workspace for this stream or one too small) binds nothing and
// returns false; the caller then takes the full path (checks, prepare: the InputError naming the
// misaligned tensor, a workspace allocated or grown for the stream) and re-plans.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "heddle/runtime/cuda/cuda_driver.h"
#include "heddle/runtime/launch.h"

namespace heddle::rt {

struct PlanSlot {
  int arg = -1;         // index into the argument list
  uint32_t tensor = 0;  // index into the call's tensors
  uint64_t align = 1;   // bytes
};

struct MapSlot {
  int arg = -1;             // a 'bytes' argument: the encoded map
  uint32_t tensor = 0;      // the tensor it maps
  TiledTensorMapSpec spec;  // what it was encoded from (spec.globalAddress: the address the plan's map holds)
};

// Gives `map`, encoded from `spec`, the global address `address` (already checked for TMA's alignment).
using MapPatcher = std::function<void(TensorMap* map, const TiledTensorMapSpec& spec, uint64_t address)>;
// The CUDA driver's: cuTensorMapReplaceAddress, or encoded again from spec where the driver lacks it.
MapPatcher driverMapPatcher();

// A kernel's workspaces by (device, stream): the addresses of its partial sums and flags, and how many
// slots they hold. Filled by the full path (Kernel.workspace: allocated per device and stream, grown when
// a launch needs more), read by every planned launch, so that a plan never uses another stream's
// workspace or one replaced by a larger one. Thread-safe.
class WorkspaceTable {
 public:
  struct Entry {
    uint64_t ws = 0, flags = 0;
    uint64_t slots = 0;
  };
  void set(int device, uint64_t stream, const Entry& e);
  // False when (device, stream) has none, or one of fewer than `slots` slots.
  bool find(int device, uint64_t stream, uint64_t slots, Entry* out) const;
  size_t size() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::map<std::pair<int, uint64_t>, Entry> entries_;
};

struct WorkspaceUse {
  int wsArg = -1, flagsArg = -1;
  uint64_t slots = 0;
  std::shared_ptr<const WorkspaceTable> table;  // null: the kernel has no workspace
};

// One call's driver argument array, packed by LaunchPlan::bind without copying the plan's arguments:
// scalars and addresses by value here, by-value blobs (tensor maps) read in place from the plan (which
// must outlive it), or from `maps` where the call's address differs from the plan's.
struct BoundArgs {
  std::vector<uint64_t> scalars;
  std::vector<TensorMap> maps;
  std::vector<void*> ptrs;
  void** pointers() { return ptrs.empty() ? nullptr : ptrs.data(); }
};

class LaunchPlan {
 public:
  LaunchPlan(std::array<unsigned, 3> grid, std::array<unsigned, 3> block, unsigned smemBytes,
             std::vector<KernelArg> args, std::vector<PlanSlot> slots, std::vector<MapSlot> maps = {},
             WorkspaceUse workspace = {}, MapPatcher patcher = nullptr);

  // The argument list with the addresses in their slots (in *out); false when one breaks its slot.
  // Const: one plan serves concurrent calls.
  bool bind(const std::vector<uint64_t>& addresses, uint64_t stream, std::vector<KernelArg>* out) const;
  // The launch path: the driver's argument array, the plan's arguments neither copied nor re-packed.
  bool bind(const std::vector<uint64_t>& addresses, uint64_t stream, BoundArgs* out) const;
  size_t tensorCount() const { return tensors_; }

  const std::array<unsigned, 3>& grid() const { return grid_; }
  const std::array<unsigned, 3>& block() const { return block_; }
  unsigned smemBytes() const { return smem_; }
  const std::vector<KernelArg>& args() const { return args_; }
  // CTAs per thread-block cluster ({1, 1, 1}: none; a clustered kernel launches through cuLaunchKernelEx)
  const std::array<unsigned, 3>& cluster() const { return cluster_; }
  void setCluster(const std::array<unsigned, 3>& c) { cluster_ = c; }
  // The CUDA device whose primary context the launch runs in (the tensors' device; -1: the current
  // context, LoadedKernel::launch); also the device of the workspace it looks up
  int device() const { return device_; }
  void setDevice(int d) { device_ = d; }

 private:
  // Checks every slot; the workspace for `stream` into *ws. False when one breaks.
  bool fits(const std::vector<uint64_t>& addresses, uint64_t stream, WorkspaceTable::Entry* ws) const;
  void patch(const MapSlot& m, uint64_t address, TensorMap* map) const;

  std::array<unsigned, 3> grid_, block_, cluster_ = {1, 1, 1};
  int device_ = -1;
  unsigned smem_;
  std::vector<KernelArg> args_;
  std::vector<PlanSlot> slots_;
  std::vector<MapSlot> maps_;
  WorkspaceUse ws_;
  MapPatcher patcher_;
  size_t tensors_ = 0;
};

}  // namespace heddle::rt
