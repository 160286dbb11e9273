// Launching compiled kernels: LoadedKernel loads a CUBIN lazily into whichever context is current
// (one module per binary key and context, shared by every LoadedKernel of that binary), looks the
// kernel up, opts into more than 48 KiB of dynamic shared memory when asked, and packs arguments
// into the void** array cuLaunchKernel takes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "heddle/runtime/cache.h"
#include "heddle/runtime/cuda_driver.h"

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

class LoadedKernel {
 public:
  // `binaryKey` names the binary in the shared module cache (the cache key; sha256 of cubin if empty).
  LoadedKernel(std::shared_ptr<const RtcResult> result, std::string binaryKey, std::string kernelName);
  static LoadedKernel fromCompiled(const CachedKernel& k, const std::string& kernelName) {
    return LoadedKernel(k.result, k.key, kernelName);
  }

  const std::string& name() const { return name_; }
  const std::string& binaryKey() const { return key_; }

  // Loads (once per context) and launches on `stream` (a CUstream handle as an integer; 0 = legacy
  // default stream). Throws RuntimeUnavailable without a driver, InputError on bad dimensions,
  // CompileError (naming the kernel and the driver error) when the driver refuses.
  // cluster: CTAs per thread-block cluster along x, y, z ({1, 1, 1}: a plain cuLaunchKernel; otherwise
  // cuLaunchKernelEx with the cluster dimension; each must divide the grid's, at most 8 CTAs in all).
  void launch(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
              uint64_t stream, const std::vector<KernelArg>& args,
              const std::array<unsigned, 3>& cluster = {1, 1, 1});
  // The same with the driver's argument array already packed (one pointer per parameter: LaunchPlan).
  void launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
                    uint64_t stream, void** params, const std::array<unsigned, 3>& cluster = {1, 1, 1});

  // Registers the driver reports for the loaded function (loads it in the current context).
  int numRegisters();

 private:
  struct PerContext {
    CUfunction fn = nullptr;
    int smemOptedIn = 48 * 1024;  // dynamic smem a launch may use without setting the attribute
  };
  PerContext& resolve();  // caller holds mu_

  std::shared_ptr<const RtcResult> result_;
  std::string key_;
  std::string name_;
  std::mutex mu_;
  std::map<CUcontext, PerContext> perContext_;
};

}  // namespace heddle::rt
