// The runtime backend: what a target's kernels need from a vendor runtime, in three calls -- compile a
// source to a binary (with the compiler's report, through the kernel cache), load a binary's kernel, and
// launch it. Chosen once from TargetInfo::backend (backendFor); nothing above the runtime asks which
// vendor it runs on. runtime/cuda/ implements it with NVRTC and the CUDA driver, runtime/hip/ with
// hiprtc and the HIP runtime; both compile through the one KernelCache (runtime/cache/).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "heddle/runtime/rtc.h"
#include "heddle/target/target.h"

namespace heddle::rt {

struct KernelArg;  // launch.h

// A loaded kernel as the launch paths call it (LoadedKernel: CUDA, HipLoadedKernel: HIP).
class KernelLauncher {
 public:
  virtual ~KernelLauncher() = default;
  virtual const std::string& name() const = 0;
  virtual const std::string& binaryKey() const = 0;
  // One launch with the driver's argument array already packed (one pointer per parameter: LaunchPlan).
  // cluster, device and args (the arguments the array holds, checked against the kernel's parameters
  // where the runtime reports them; nullptr: not checked) are honoured where the runtime has them.
  virtual void launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                            unsigned smemBytes, uint64_t stream, void** params, const std::array<unsigned, 3>& cluster,
                            int device, const std::vector<KernelArg>* args) = 0;
};

class RuntimeBackend {
 public:
  virtual ~RuntimeBackend() = default;
  // "cuda", "hip": what Python reads (LoweredKernel.backend) and hands back to load
  virtual const char* name() const = 0;
  // The compiler reports registers, spills and advisories (a ptxas report): what Kernel.build checks.
  virtual bool compilerReport() const = 0;
  // Source -> binary (+ the compiler's log and report), through KernelCache::global() unless
  // req.useCache is false. Throws RuntimeUnavailable (no compiler) or CompileError.
  virtual CachedKernel compile(const CompileRequest& req) const = 0;
  // The kernel `kernelName` of a compiled binary, loaded lazily at its first launch.
  virtual std::unique_ptr<KernelLauncher> load(const CachedKernel& binary, const std::string& kernelName) const = 0;
};

const RuntimeBackend& cudaBackend();  // runtime/cuda/backend.cpp
const RuntimeBackend& hipBackend();   // runtime/hip/backend.cpp
const RuntimeBackend& backendFor(Backend b);
const RuntimeBackend& backendFor(const TargetInfo& t);
// By name() ("cuda", "hip"); InputError naming the backends for any other.
const RuntimeBackend& backendNamed(const std::string& name);

}  // namespace heddle::rt
