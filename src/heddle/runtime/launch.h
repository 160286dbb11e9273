// Launching compiled kernels: LoadedKernel loads a CUBIN lazily into the primary context of the device
// a launch names (one module per binary key and context, shared by every LoadedKernel of that binary),
// after checking that the binary's architecture loads on that device; looks the kernel up and its
// parameter table (cuFuncGetParamInfo, where the driver has it), checks each launch's arguments against
// it, opts into more than 48 KiB of dynamic shared memory when asked, and packs arguments into the
// void** array cuLaunchKernel takes. HEDDLE_SYNC_LAUNCH=1 waits for the stream after every launch.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "heddle/runtime/backend.h"
#include "heddle/runtime/cache/cache.h"
#include "heddle/runtime/cuda/cuda_driver.h"

namespace heddle::rt {

struct KernelArg {
  enum class Kind { Ptr, I32, I64, F32, Bytes };
  Kind kind = Kind::Ptr;
  uint64_t bits = 0;  // Ptr/I32/I64/F32: the value's bytes, little-endian, zero-extended
  std::string blob;   // Bytes: passed by value (e.g. a 128-byte CUtensorMap for a __grid_constant__ param)

  static KernelArg ptr(uint64_t address);
  static KernelArg i32(int32_t v);
  static KernelArg i64(int64_t v);
  static KernelArg f32(float v);
  static KernelArg bytes(std::string b);
};

// Owns the argument storage and the pointer array handed to the driver.
class ArgPack {
 public:
  explicit ArgPack(const std::vector<KernelArg>& args);
  void** pointers() { return ptrs_.empty() ? nullptr : ptrs_.data(); }
  size_t size() const { return ptrs_.size(); }

 private:
  std::vector<uint64_t> scalars_;
  std::vector<std::string> blobs_;
  std::vector<void*> ptrs_;
};

// HEDDLE_SYNC_LAUNCH (read once per process): every launch waits for its stream and turns an
// asynchronous error into a DriverError naming the kernel and its launch.
bool syncLaunchEnabled();

class LoadedKernel final : public KernelLauncher {
 public:
  // `binaryKey` names the binary in the shared module cache (the cache key; sha256 of cubin if empty).
  LoadedKernel(std::shared_ptr<const RtcResult> result, std::string binaryKey, std::string kernelName);
  static LoadedKernel fromCompiled(const CachedKernel& k, const std::string& kernelName) {
    return LoadedKernel(k.result, k.key, kernelName);
  }

  const std::string& name() const override { return name_; }
  const std::string& binaryKey() const override { return key_; }

  // Loads (once per context) and launches on `stream` (a CUstream handle as an integer; 0 = legacy
  // default stream) in the primary context of `device` (the tensors' device; < 0: the current context,
  // else device 0's, CudaDriver::bindContext). Throws RuntimeUnavailable without a driver; InputError on
  // bad dimensions, on a binary whose architecture does not load on the device, and on arguments that do
  // not match the kernel's parameters; DriverError (naming the kernel and the driver error) when the
  // driver refuses, or (HEDDLE_SYNC_LAUNCH=1) when the kernel fails on the device.
  // cluster: CTAs per thread-block cluster along x, y, z ({1, 1, 1}: a plain cuLaunchKernel; otherwise
  // cuLaunchKernelEx with the cluster dimension; each must divide the grid's, at most 8 CTAs in all).
  void launch(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
              uint64_t stream, const std::vector<KernelArg>& args, const std::array<unsigned, 3>& cluster = {1, 1, 1},
              int device = -1);
  // The same with the driver's argument array already packed (one pointer per parameter: LaunchPlan);
  // args: the arguments it holds, checked against the parameter table (nullptr: not checked).
  void launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
                    uint64_t stream, void** params, const std::array<unsigned, 3>& cluster = {1, 1, 1}, int device = -1,
                    const std::vector<KernelArg>* args = nullptr) override;

  // Registers the driver reports for the loaded function (loads it in `device`'s context, as launch).
  int numRegisters(int device = -1);
  // The byte size of each parameter as the driver reports it (loads it as launch); false when the
  // driver cannot say (cuFuncGetParamInfo needs a driver for CUDA 12.4 or newer).
  bool paramSizes(std::vector<size_t>* sizes, int device = -1);

 private:
  struct PerContext {
    CUfunction fn = nullptr;
    int smemOptedIn = 48 * 1024;  // dynamic smem a launch may use without setting the attribute
    bool haveParams = false;      // the driver reported the parameter table (or its first entries)
    bool paramsComplete = false;  // ... the whole table (cuFuncGetParamCount, or fewer entries than asked)
    bool paramsAsked = false;     // asked: at the first launch with arguments, or by paramSizes (again only to
                                  // ask further than before, when the driver cannot count)
    std::vector<size_t> params;   // byte size of each parameter
  };
  PerContext& resolve(const BoundContext& bound);  // caller holds mu_
  void checkArgs(PerContext& pc, const std::vector<KernelArg>& args) const;
  void askParams(PerContext& pc, size_t upTo) const;

  std::shared_ptr<const RtcResult> result_;
  std::string key_;
  std::string name_;
  std::string what_;  // "kernel '<name>'": the driver's error context, made once (not per launch)
  std::mutex mu_;
  std::map<CUcontext, PerContext> perContext_;
};

}  // namespace heddle::rt
