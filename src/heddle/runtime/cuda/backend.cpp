// The CUDA runtime backend (backend.h): NVRTC through the kernel cache (rtc.h compile), kernels
// loaded and launched through the CUDA driver (LoadedKernel, launch.h).
#include <memory>

#include "heddle/runtime/backend.h"
#include "heddle/runtime/launch.h"

namespace heddle::rt {

namespace {

class CudaBackend final : public RuntimeBackend {
 public:
  const char* name() const override { return "cuda"; }
  bool compilerReport() const override { return true; }  // ptxas -v
  CachedKernel compile(const CompileRequest& req) const override { return rt::compile(req); }
  std::unique_ptr<KernelLauncher> load(const CachedKernel& binary, const std::string& kernelName) const override {
    return std::make_unique<LoadedKernel>(binary.result, binary.key, kernelName);
  }
};

}  // namespace

const RuntimeBackend& cudaBackend() {
  static const CudaBackend b;
  return b;
}

}  // namespace heddle::rt
