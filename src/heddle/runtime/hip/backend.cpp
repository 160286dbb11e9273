// The HIP runtime backend (backend.h): hiprtc through the kernel cache (compileHip), kernels loaded
// and launched through the HIP runtime (HipLoadedKernel).
#include <memory>

#include "heddle/runtime/backend.h"
#include "heddle/runtime/hip/hip_driver.h"
#include "heddle/runtime/hip/hip_rtc.h"

namespace heddle::rt {

namespace {

class HipBackend final : public RuntimeBackend {
 public:
  const char* name() const override { return "hip"; }
  bool compilerReport() const override { return false; }  // hiprtc reports no registers or spills
  CachedKernel compile(const CompileRequest& req) const override {
    CompileRequest r = req;
    r.options.wantPtx = false;  // a code object has no PTX
    return compileHip(r);
  }
  std::unique_ptr<KernelLauncher> load(const CachedKernel& binary, const std::string& kernelName) const override {
    return std::make_unique<HipLoadedKernel>(binary.result, binary.key, kernelName);
  }
};

}  // namespace

const RuntimeBackend& hipBackend() {
  static const HipBackend b;
  return b;
}

}  // namespace heddle::rt
