// The HIP runtime through dlopen (libamdhip64; no ROCm headers at build time), and HipLoadedKernel:
// the HIP counterpart of LoadedKernel (launch.h) with the same launch interface.
//
// HipRuntime::instance() never throws: without libamdhip64, or when hipInit / hipGetDeviceCount
// finds no AMD GPU, available() is false and unavailableReason() says why; every call that needs a
// device first calls require(), which throws RuntimeUnavailable with that reason.
// Library search: $HEDDLE_LIBAMDHIP64_PATH, $ROCM_PATH/lib, /opt/rocm/lib, then the sonames
// libamdhip64.so.6, libamdhip64.so.5, libamdhip64.so.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "heddle/runtime/dynlib.h"
#include "heddle/runtime/launch.h"

namespace heddle::rt {

using HipModule = struct HipModuleOpaque*;
using HipFunction = struct HipFunctionOpaque*;

class HipRuntime {
 public:
  static HipRuntime& instance();
  bool available() const { return available_; }
  const std::string& unavailableReason() const { return reason_; }
  const std::string& libraryPath() const { return lib_.path; }
  void require() const;
  int deviceCount() const { return deviceCount_; }
  int currentDevice() const;
  HipModule loadModule(const std::string& image, const std::string& what) const;
  HipFunction getFunction(HipModule m, const std::string& name) const;
  void launchKernel(HipFunction f, const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                    unsigned smemBytes, uint64_t stream, void** params, const std::string& what) const;

 private:
  HipRuntime();
  void check(int rc, const char* call, const std::string& what) const;
  DynLib lib_;
  bool available_ = false;
  std::string reason_;
  int deviceCount_ = 0;
  int (*hipInit_)(unsigned) = nullptr;
  int (*hipGetDeviceCount_)(int*) = nullptr;
  int (*hipGetDevice_)(int*) = nullptr;
  int (*hipModuleLoadData_)(HipModule*, const void*) = nullptr;
  int (*hipModuleGetFunction_)(HipFunction*, HipModule, const char*) = nullptr;
  int (*hipModuleLaunchKernel_)(HipFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                void*, void**, void**) = nullptr;
  const char* (*hipGetErrorString_)(int) = nullptr;
  const char* (*hipGetErrorName_)(int) = nullptr;
};

// A compiled HIP code object, loaded lazily (once per device) and launched like LoadedKernel.
class HipLoadedKernel final : public KernelLauncher {
 public:
  HipLoadedKernel(std::shared_ptr<const RtcResult> result, std::string binaryKey, std::string kernelName);
  const std::string& name() const override { return name_; }
  const std::string& binaryKey() const override { return key_; }
  // stream: a hipStream_t as an integer (0 = the null stream). Throws RuntimeUnavailable without an
  // AMD GPU, InputError on a zero dimension, DriverError when the runtime refuses.
  void launch(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
              uint64_t stream, const std::vector<KernelArg>& args);
  void launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
                    uint64_t stream, void** params);  // the argument array already packed (LaunchPlan)
  // KernelLauncher's: the same (HIP launches have no cluster; the device is the current one; arguments unchecked)
  void launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
                    uint64_t stream, void** params, const std::array<unsigned, 3>& cluster, int device,
                    const std::vector<KernelArg>* args) override {
    launchPacked(grid, block, smemBytes, stream, params);
  }

 private:
  std::shared_ptr<const RtcResult> result_;
  std::string key_, name_;
  std::mutex mu_;
  std::map<int, HipFunction> perDevice_;
};

}  // namespace heddle::rt
