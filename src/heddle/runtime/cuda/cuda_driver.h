// The CUDA driver API through dlopen (no CUDA headers at build time): the few types, enums and
// entry points heddle needs, with checked wrappers whose errors name the call, the driver's error
// name and message, and what heddle was doing.
//
// CudaDriver::instance() never throws: on a machine without libcuda, or where cuInit fails or finds
// no device, available() is false and unavailableReason() says why. Every wrapper first calls
// require(), which throws RuntimeUnavailable with that reason. Driver call failures throw
// DriverError naming the call, what heddle was doing and the driver's error; bad arguments throw
// InputError.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "heddle/runtime/dynlib.h"

namespace heddle::rt {

// Driver types, declared by hand with the same layout as cuda.h.
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUdeviceptr = unsigned long long;

constexpr CUresult CUDA_SUCCESS = 0;
// CUdevice_attribute values used here.
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
// CUfunction_attribute values used here.
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// cuLaunchKernelEx's configuration (cuda.h CUlaunchConfig / CUlaunchAttribute; the attribute value is a
// 64-byte union of which heddle sets only clusterDim {x, y, z}).
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
struct CUlaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union Value {
    char pad[64];
    struct {
      unsigned x, y, z;
    } clusterDim;
  } value{};
};
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute layout of cuda.h");
struct CUlaunchConfig {
  unsigned gridDimX = 1, gridDimY = 1, gridDimZ = 1, blockDimX = 1, blockDimY = 1, blockDimZ = 1, sharedMemBytes = 0;
  CUstream hStream = nullptr;
  CUlaunchAttribute* attrs = nullptr;
  unsigned numAttrs = 0;
};
static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig layout of cuda.h");

// CUtensorMap: 128 opaque bytes, 128-byte aligned (CUDA 13 layout; 64-aligned before, so 128 fits both).
struct alignas(128) TensorMap {
  uint64_t opaque[16];
};

// Arguments of cuTensorMapEncodeTiled as plain integers (values of the CUtensorMap* enums of cuda.h:
// dataType 0=UINT8 .. 6=FLOAT16, 7=FLOAT32, 9=BFLOAT16; interleave/swizzle/l2Promotion/oobFill 0=none).
struct TiledTensorMapSpec {
  int dataType = 0;
  uint64_t globalAddress = 0;
  std::vector<uint64_t> globalDim;       // rank entries, innermost first
  std::vector<uint64_t> globalStrides;   // rank-1 entries in bytes (dimension 0 is contiguous)
  std::vector<uint32_t> boxDim;          // rank entries
  std::vector<uint32_t> elementStrides;  // rank entries (1 = dense)
  int interleave = 0;
  int swizzle = 0;
  int l2Promotion = 0;
  int oobFill = 0;
};

// The alignment TMA demands of a tensor map's global address: 32 bytes with CU_TENSOR_MAP_INTERLEAVE_32B
// (interleave 2), else 16. CUDA Driver API, "Tensor Map Object Management", cuTensorMapEncodeTiled's rule for
// globalAddress, which cuTensorMapReplaceAddress's new address "must follow" as well; the interpreter checks
// the same rule (interp/rt/hrt_ptx.h, "TMA"), and so does the stand-in libcuda (tests/fake_cuda).
inline uint64_t tensorMapAddressAlignment(const TiledTensorMapSpec& s) { return s.interleave == 2 ? 32 : 16; }

// A launch's context (CudaDriver::bindContext): the context and its device, and the context the thread
// had current before, made current again by restoreContext when `restore` is set.
struct BoundContext {
  CUcontext ctx = nullptr;
  int device = 0;
  CUcontext previous = nullptr;
  bool restore = false;
};

struct DeviceInfo {
  int ccMajor = 0;
  int ccMinor = 0;
  int smCount = 0;
  int smemOptin = 0;  // max dynamic shared memory per block after opting in (bytes)
};

class CudaDriver {
 public:
  static CudaDriver& instance();

  bool available() const { return available_; }
  const std::string& unavailableReason() const { return reason_; }
  const std::string& libraryPath() const { return lib_.path; }
  void require() const;  // throws RuntimeUnavailable(unavailableReason())

  int deviceCount() const { return deviceCount_; }
  DeviceInfo deviceInfo(int device) const;
  int deviceAttribute(int attribute, int device) const;

  // The context a launch on `device` runs in. device >= 0: that device's primary context (the one torch
  // uses; retained once per process), made current for the calling thread when another context or none
  // is, and the previous one restored by restoreContext. device < 0 (callers with no device, raw
  // pointers): the current context, or with none device 0's primary context, made current and kept.
  BoundContext bindContext(int device) const;
  void restoreContext(const BoundContext& bound) const noexcept;
  // The primary context of `device`, retained on first use and kept for the process.
  CUcontext primaryContext(int device) const;

  CUmodule loadModule(const std::string& image, const std::string& what) const;
  void unloadModule(CUmodule m) const;  // never throws (used from destructors)
  CUfunction getFunction(CUmodule m, const std::string& name) const;
  void setFuncAttribute(CUfunction f, int attribute, int value, const std::string& what) const;
  int getFuncAttribute(CUfunction f, int attribute, const std::string& what) const;
  void launchKernel(CUfunction f, const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                    unsigned smemBytes, CUstream stream, void** params, const std::string& what) const;
  // A launch in thread-block clusters of cluster[0] x cluster[1] x cluster[2] CTAs (cuLaunchKernelEx with
  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, driver 12.0+; RuntimeUnavailable naming the call without it).
  void launchKernelCluster(CUfunction f, const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                           const std::array<unsigned, 3>& cluster, unsigned smemBytes, CUstream stream, void** params,
                           const std::string& what) const;

  // Waits for `stream`; DriverError naming `what` (the kernel and its launch) on an asynchronous error.
  void synchronize(CUstream stream, const std::string& what) const;

  // The byte size of each parameter of `f` (cuFuncGetParamInfo, driver 12.4+). With cuFuncGetParamCount
  // the whole table; without it only indices [0, upTo) are asked (a table shorter than upTo shows as fewer
  // entries), so heddle never asks for an index past the last parameter: that call fails with
  // CUDA_ERROR_INVALID_VALUE, which compute-sanitizer reports as an API error on every kernel load (seen on
  // the first GPU window, 2026-11-27). *complete says whether the table is the whole one. false when the
  // driver cannot say (an older driver, or the call refused): nothing to check against.
  bool paramSizes(CUfunction f, std::vector<size_t>* sizes, size_t upTo, bool* complete) const;

  // cuTensorMapEncodeTiled (driver 12.0+); validates rank and alignments first (InputError). A map the
  // driver rejects is a DriverError listing everything it was given; `what` names the tensor.
  TensorMap encodeTiledTensorMap(const TiledTensorMapSpec& spec, const std::string& what = "") const;
  // Gives `map` (encoded from `spec`) the global address `address`: cuTensorMapReplaceAddress (driver
  // 12.0+), or, where the driver lacks it, the map encoded again from `spec` with that address. An address
  // TMA cannot take is an InputError; a refusal a DriverError naming `what`.
  void replaceTensorMapAddress(TensorMap* map, const TiledTensorMapSpec& spec, uint64_t address,
                               const std::string& what = "") const;
  bool hasReplaceAddress() const { return cuTensorMapReplaceAddress_ != nullptr; }

  // "CUDA_ERROR_X: message" for a driver result.
  std::string errorText(CUresult r) const;

 private:
  CudaDriver();
  void check(CUresult r, const char* call, const std::string& what) const;

  DynLib lib_;
  mutable std::mutex primaryMutex_;
  mutable std::vector<CUcontext> primary_;  // per device, retained on first use
  bool available_ = false;
  std::string reason_;
  int deviceCount_ = 0;

  CUresult (*cuInit_)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount_)(int*) = nullptr;
  CUresult (*cuDeviceGet_)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute_)(int*, int, CUdevice) = nullptr;
  CUresult (*cuCtxGetCurrent_)(CUcontext*) = nullptr;
  CUresult (*cuCtxSetCurrent_)(CUcontext) = nullptr;
  CUresult (*cuCtxGetDevice_)(CUdevice*) = nullptr;
  CUresult (*cuStreamSynchronize_)(CUstream) = nullptr;
  CUresult (*cuFuncGetParamInfo_)(CUfunction, size_t, size_t*, size_t*) = nullptr;  // 12.4+, optional
  CUresult (*cuFuncGetParamCount_)(CUfunction, size_t*) = nullptr;                  // newer, optional
  CUresult (*cuDevicePrimaryCtxRetain_)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuModuleLoadData_)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload_)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction_)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncSetAttribute_)(CUfunction, int, int) = nullptr;
  CUresult (*cuFuncGetAttribute_)(int*, int, CUfunction) = nullptr;
  CUresult (*cuLaunchKernel_)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**) = nullptr;
  CUresult (*cuLaunchKernelEx_)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
  CUresult (*cuGetErrorName_)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString_)(CUresult, const char**) = nullptr;
  CUresult (*cuTensorMapEncodeTiled_)(TensorMap*, int, uint32_t, void*, const uint64_t*, const uint64_t*,
                                      const uint32_t*, const uint32_t*, int, int, int, int) = nullptr;
  CUresult (*cuTensorMapReplaceAddress_)(TensorMap*, void*) = nullptr;  // 12.0+, optional
};

// CudaDriver::bindContext for a scope: the launch's context bound on construction, the thread's previous
// context restored when the scope ends (also when a call inside it throws).
class ContextScope {
 public:
  explicit ContextScope(int device) : bound_(CudaDriver::instance().bindContext(device)) {}
  ~ContextScope() { CudaDriver::instance().restoreContext(bound_); }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  const BoundContext& bound() const { return bound_; }

 private:
  BoundContext bound_;
};

}  // namespace heddle::rt
