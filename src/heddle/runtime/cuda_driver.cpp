// CudaDriver: loads libcuda once, records why it is unavailable instead of throwing, and wraps the
// driver calls heddle makes with messages that name the call and the driver error.
#include "heddle/runtime/cuda_driver.h"

#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle::rt {
namespace {

template <typename Fn>
bool bind(const DynLib& lib, Fn& fn, const char* name, std::string& missing) {
  fn = reinterpret_cast<Fn>(lib.symbol(name));
  if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

}  // namespace

CudaDriver& CudaDriver::instance() {
  static CudaDriver driver;  // thread-safe initialisation
  return driver;
}

CudaDriver::CudaDriver() {
  try {
    lib_ = loadCudaLibrary();
  } catch (const RuntimeUnavailable& e) {
    reason_ = e.what();
    return;
  }
  std::string missing;
  bind(lib_, cuInit_, "cuInit", missing);
  bind(lib_, cuDeviceGetCount_, "cuDeviceGetCount", missing);
  bind(lib_, cuDeviceGet_, "cuDeviceGet", missing);
  bind(lib_, cuDeviceGetAttribute_, "cuDeviceGetAttribute", missing);
  bind(lib_, cuCtxGetCurrent_, "cuCtxGetCurrent", missing);
  bind(lib_, cuCtxSetCurrent_, "cuCtxSetCurrent", missing);
  bind(lib_, cuDevicePrimaryCtxRetain_, "cuDevicePrimaryCtxRetain", missing);
  bind(lib_, cuModuleLoadData_, "cuModuleLoadData", missing);
  bind(lib_, cuModuleUnload_, "cuModuleUnload", missing);
  bind(lib_, cuModuleGetFunction_, "cuModuleGetFunction", missing);
  bind(lib_, cuFuncSetAttribute_, "cuFuncSetAttribute", missing);
  bind(lib_, cuFuncGetAttribute_, "cuFuncGetAttribute", missing);
  bind(lib_, cuLaunchKernel_, "cuLaunchKernel", missing);
  bind(lib_, cuGetErrorName_, "cuGetErrorName", missing);
  bind(lib_, cuGetErrorString_, "cuGetErrorString", missing);
  // Optional: only drivers for CUDA 12.0+ have it; encodeTiledTensorMap reports its absence.
  cuTensorMapEncodeTiled_ = reinterpret_cast<decltype(cuTensorMapEncodeTiled_)>(lib_.symbol("cuTensorMapEncodeTiled"));
  cuLaunchKernelEx_ = reinterpret_cast<decltype(cuLaunchKernelEx_)>(lib_.symbol("cuLaunchKernelEx"));  // 12.0+
  if (!missing.empty()) {
    reason_ = "libcuda at " + lib_.path + " lacks " + missing + " (driver too old: update the NVIDIA driver)";
    return;
  }
  if (CUresult r = cuInit_(0); r != CUDA_SUCCESS) {
    reason_ = "cuInit(0) failed with " + errorText(r) + " (libcuda: " + lib_.path + ")";
    return;
  }
  if (CUresult r = cuDeviceGetCount_(&deviceCount_); r != CUDA_SUCCESS || deviceCount_ <= 0) {
    reason_ = "no CUDA device found (libcuda: " + lib_.path + ")";
    return;
  }
  available_ = true;
}

void CudaDriver::require() const {
  if (!available_) throw RuntimeUnavailable("CUDA driver unavailable: " + reason_);
}

std::string CudaDriver::errorText(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName_) cuGetErrorName_(r, &name);
  if (cuGetErrorString_) cuGetErrorString_(r, &text);
  std::ostringstream os;
  os << (name ? name : "CUresult " + std::to_string(r));
  if (text) os << ": " << text;
  return os.str();
}

void CudaDriver::check(CUresult r, const char* call, const std::string& what) const {
  if (r != CUDA_SUCCESS) fail<CompileError>(call, " failed for ", what, ": ", errorText(r));
}

int CudaDriver::deviceAttribute(int attribute, int device) const {
  require();
  if (device < 0 || device >= deviceCount_)
    fail<InputError>("CUDA device ", device, " does not exist (", deviceCount_, " devices)");
  CUdevice dev = 0;
  std::string what = "device " + std::to_string(device);
  check(cuDeviceGet_(&dev, device), "cuDeviceGet", what);
  int value = 0;
  check(cuDeviceGetAttribute_(&value, attribute, dev), "cuDeviceGetAttribute", what);
  return value;
}

DeviceInfo CudaDriver::deviceInfo(int device) const {
  DeviceInfo info;
  info.ccMajor = deviceAttribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  info.ccMinor = deviceAttribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  info.smCount = deviceAttribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  info.smemOptin = deviceAttribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
  return info;
}

CUcontext CudaDriver::ensureContext(int device) const {
  require();
  CUcontext ctx = nullptr;
  check(cuCtxGetCurrent_(&ctx), "cuCtxGetCurrent", "the calling thread");
  if (ctx) return ctx;
  int ordinal = device < 0 ? 0 : device;
  if (ordinal >= deviceCount_) fail<InputError>("CUDA device ", ordinal, " does not exist (", deviceCount_, " devices)");
  CUdevice dev = 0;
  std::string what = "the primary context of device " + std::to_string(ordinal);
  check(cuDeviceGet_(&dev, ordinal), "cuDeviceGet", what);
  check(cuDevicePrimaryCtxRetain_(&ctx, dev), "cuDevicePrimaryCtxRetain", what);  // kept for the process
  check(cuCtxSetCurrent_(ctx), "cuCtxSetCurrent", what);
  return ctx;
}

CUmodule CudaDriver::loadModule(const std::string& image, const std::string& what) const {
  require();
  if (image.empty()) fail<InputError>("cannot load ", what, ": the binary is empty (compiled for compute_XX?)");
  CUmodule m = nullptr;
  check(cuModuleLoadData_(&m, image.data()), "cuModuleLoadData", what);
  return m;
}

void CudaDriver::unloadModule(CUmodule m) const {
  if (available_ && m) cuModuleUnload_(m);
}

CUfunction CudaDriver::getFunction(CUmodule m, const std::string& name) const {
  require();
  CUfunction f = nullptr;
  CUresult r = cuModuleGetFunction_(&f, m, name.c_str());
  if (r != CUDA_SUCCESS)
    fail<CompileError>("kernel '", name, "' not found in its module (", errorText(r),
                       "); is it declared extern \"C\" __global__?");
  return f;
}

void CudaDriver::setFuncAttribute(CUfunction f, int attribute, int value, const std::string& what) const {
  require();
  check(cuFuncSetAttribute_(f, attribute, value), "cuFuncSetAttribute", what);
}

int CudaDriver::getFuncAttribute(CUfunction f, int attribute, const std::string& what) const {
  require();
  int value = 0;
  check(cuFuncGetAttribute_(&value, attribute, f), "cuFuncGetAttribute", what);
  return value;
}

void CudaDriver::launchKernel(CUfunction f, const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                              unsigned smemBytes, CUstream stream, void** params, const std::string& what) const {
  require();
  CUresult r = cuLaunchKernel_(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], smemBytes, stream,
                               params, nullptr);
  if (r != CUDA_SUCCESS)
    fail<CompileError>("cuLaunchKernel failed for ", what, " (grid ", grid[0], "x", grid[1], "x", grid[2], ", block ",
                       block[0], "x", block[1], "x", block[2], ", ", smemBytes, " B dynamic smem): ", errorText(r));
}

void CudaDriver::launchKernelCluster(CUfunction f, const std::array<unsigned, 3>& grid,
                                     const std::array<unsigned, 3>& block, const std::array<unsigned, 3>& cluster,
                                     unsigned smemBytes, CUstream stream, void** params, const std::string& what) const {
  require();
  if (!cuLaunchKernelEx_)
    throw RuntimeUnavailable("cuLaunchKernelEx is missing from " + lib_.path +
                             ": a launch in thread-block clusters needs a driver for CUDA 12.0 or newer");
  CUlaunchAttribute attr;
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim = {cluster[0], cluster[1], cluster[2]};
  CUlaunchConfig cfg;
  cfg.gridDimX = grid[0], cfg.gridDimY = grid[1], cfg.gridDimZ = grid[2];
  cfg.blockDimX = block[0], cfg.blockDimY = block[1], cfg.blockDimZ = block[2];
  cfg.sharedMemBytes = smemBytes;
  cfg.hStream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CUresult r = cuLaunchKernelEx_(&cfg, f, params, nullptr);
  if (r != CUDA_SUCCESS)
    fail<CompileError>("cuLaunchKernelEx failed for ", what, " (grid ", grid[0], "x", grid[1], "x", grid[2], ", block ",
                       block[0], "x", block[1], "x", block[2], ", clusters of ", cluster[0], "x", cluster[1], "x",
                       cluster[2], ", ", smemBytes, " B dynamic smem): ", errorText(r));
}

TensorMap CudaDriver::encodeTiledTensorMap(const TiledTensorMapSpec& s) const {
  require();
  if (!cuTensorMapEncodeTiled_)
    throw RuntimeUnavailable("cuTensorMapEncodeTiled is missing from " + lib_.path +
                             ": TMA needs a driver for CUDA 12.0 or newer");
  size_t rank = s.globalDim.size();
  if (rank < 1 || rank > 5) fail<InputError>("tensor map rank ", rank, " is out of range: TMA supports rank 1..5");
  if (s.globalStrides.size() != rank - 1 || s.boxDim.size() != rank || s.elementStrides.size() != rank)
    fail<InputError>("tensor map of rank ", rank, " needs ", rank - 1, " global strides and ", rank,
                     " box dims and element strides; got ", s.globalStrides.size(), ", ", s.boxDim.size(), ", ",
                     s.elementStrides.size());
  uint64_t align = s.interleave == 2 ? 32 : 16;  // CU_TENSOR_MAP_INTERLEAVE_32B needs 32-byte alignment
  if (s.globalAddress % align != 0) {
    std::ostringstream addr;
    addr << std::hex << s.globalAddress;
    fail<InputError>("tensor map base address 0x", addr.str(), " is not ", align, "-byte aligned");
  }
  for (size_t i = 0; i < s.globalStrides.size(); ++i)
    if (s.globalStrides[i] % align != 0)
      fail<InputError>("tensor map stride ", i + 1, " (", s.globalStrides[i], " bytes) is not a multiple of ", align);
  for (size_t i = 0; i < rank; ++i) {
    if (s.boxDim[i] < 1 || s.boxDim[i] > 256)
      fail<InputError>("tensor map box dim ", i, " = ", s.boxDim[i], " is out of range 1..256");
    if (s.elementStrides[i] < 1 || s.elementStrides[i] > 8)
      fail<InputError>("tensor map element stride ", i, " = ", s.elementStrides[i], " is out of range 1..8");
  }
  TensorMap map{};
  CUresult r = cuTensorMapEncodeTiled_(&map, s.dataType, static_cast<uint32_t>(rank),
                                       reinterpret_cast<void*>(static_cast<uintptr_t>(s.globalAddress)),
                                       s.globalDim.data(), s.globalStrides.data(), s.boxDim.data(),
                                       s.elementStrides.data(), s.interleave, s.swizzle, s.l2Promotion, s.oobFill);
  if (r != CUDA_SUCCESS) fail<InputError>("cuTensorMapEncodeTiled rejected the tensor map: ", errorText(r));
  return map;
}

}  // namespace heddle::rt
