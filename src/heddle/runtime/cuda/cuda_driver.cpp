// CudaDriver: loads libcuda once, records why it is unavailable instead of throwing, and wraps the
// driver calls heddle makes with messages that name the call and the driver error.
#include "heddle/runtime/cuda/cuda_driver.h"

#include <initializer_list>
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
  bind(lib_, cuCtxGetDevice_, "cuCtxGetDevice", missing);
  bind(lib_, cuStreamSynchronize_, "cuStreamSynchronize", missing);
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
  cuTensorMapReplaceAddress_ =
      reinterpret_cast<decltype(cuTensorMapReplaceAddress_)>(lib_.symbol("cuTensorMapReplaceAddress"));      // 12.0+
  cuLaunchKernelEx_ = reinterpret_cast<decltype(cuLaunchKernelEx_)>(lib_.symbol("cuLaunchKernelEx"));        // 12.0+
  cuFuncGetParamInfo_ = reinterpret_cast<decltype(cuFuncGetParamInfo_)>(lib_.symbol("cuFuncGetParamInfo"));  // 12.4+
  cuFuncGetParamCount_ = reinterpret_cast<decltype(cuFuncGetParamCount_)>(lib_.symbol("cuFuncGetParamCount"));
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
  if (r != CUDA_SUCCESS) fail<DriverError>(call, " failed for ", what, ": ", errorText(r));
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

CUcontext CudaDriver::primaryContext(int device) const {
  require();
  if (device < 0 || device >= deviceCount_)
    fail<InputError>("CUDA device ", device, " does not exist (", deviceCount_, " devices)");
  std::lock_guard<std::mutex> lock(primaryMutex_);
  if (primary_.empty()) primary_.assign(deviceCount_, nullptr);
  if (!primary_[device]) {
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    std::string what = "the primary context of device " + std::to_string(device);
    check(cuDeviceGet_(&dev, device), "cuDeviceGet", what);
    check(cuDevicePrimaryCtxRetain_(&ctx, dev), "cuDevicePrimaryCtxRetain", what);  // kept for the process
    primary_[device] = ctx;
  }
  return primary_[device];
}

BoundContext CudaDriver::bindContext(int device) const {
  require();
  BoundContext b;
  CUcontext current = nullptr;
  check(cuCtxGetCurrent_(&current), "cuCtxGetCurrent", "the calling thread");
  if (device < 0 && current) {  // no device named: the thread's context, whichever device it is on
    CUdevice dev = 0;
    check(cuCtxGetDevice_(&dev), "cuCtxGetDevice", "the current context");
    b.ctx = current;
    b.device = dev;
    return b;
  }
  b.device = device < 0 ? 0 : device;
  b.ctx = primaryContext(b.device);
  if (current != b.ctx) {
    check(cuCtxSetCurrent_(b.ctx), "cuCtxSetCurrent", "the primary context of device " + std::to_string(b.device));
    b.previous = current;
    b.restore = device >= 0;  // a named device: leave the thread as it was found
  }
  return b;
}

void CudaDriver::restoreContext(const BoundContext& b) const noexcept {
  if (b.restore && available_) cuCtxSetCurrent_(b.previous);
}

void CudaDriver::synchronize(CUstream stream, const std::string& what) const {
  require();
  CUresult r = cuStreamSynchronize_(stream);
  if (r != CUDA_SUCCESS)
    fail<DriverError>(what,
                      " failed on the device: cuStreamSynchronize after its launch (HEDDLE_SYNC_LAUNCH=1) "
                      "returned ",
                      errorText(r),
                      ". An error like this (an illegal address, a trap, a misaligned "
                      "access) leaves the process's CUDA context unusable: later CUDA calls in this process fail "
                      "too. Rerun the failing call in a fresh process, under compute-sanitizer to find the access");
}

bool CudaDriver::paramSizes(CUfunction f, std::vector<size_t>* sizes, size_t upTo, bool* complete) const {
  require();
  sizes->clear();
  *complete = false;
  if (!cuFuncGetParamInfo_) return false;
  size_t count = 0;
  const bool counted = cuFuncGetParamCount_ && cuFuncGetParamCount_(f, &count) == CUDA_SUCCESS;
  constexpr CUresult kInvalidValue = 1;  // CUDA_ERROR_INVALID_VALUE: the index is past the last parameter
  for (size_t i = 0; i < (counted ? count : upTo); ++i) {
    size_t offset = 0, size = 0;
    CUresult r = cuFuncGetParamInfo_(f, i, &offset, &size);
    if (r == kInvalidValue && !counted) {  // fewer parameters than asked for: the table is whole
      *complete = true;
      return true;
    }
    if (r != CUDA_SUCCESS) return false;  // refused: nothing to check against
    sizes->push_back(size);
  }
  *complete = counted;
  return true;
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
    fail<DriverError>("kernel '", name, "' not found in its module (", errorText(r),
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
  CUresult r =
      cuLaunchKernel_(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], smemBytes, stream, params, nullptr);
  if (r != CUDA_SUCCESS)
    fail<DriverError>("cuLaunchKernel failed for ", what, " (grid ", grid[0], "x", grid[1], "x", grid[2], ", block ",
                      block[0], "x", block[1], "x", block[2], ", ", smemBytes, " B dynamic smem): ", errorText(r));
}

void CudaDriver::launchKernelCluster(CUfunction f, const std::array<unsigned, 3>& grid,
                                     const std::array<unsigned, 3>& block, const std::array<unsigned, 3>& cluster,
                                     unsigned smemBytes, CUstream stream, void** params,
                                     const std::string& what) const {
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
    fail<DriverError>("cuLaunchKernelEx failed for ", what, " (grid ", grid[0], "x", grid[1], "x", grid[2], ", block ",
                      block[0], "x", block[1], "x", block[2], ", clusters of ", cluster[0], "x", cluster[1], "x",
                      cluster[2], ", ", smemBytes, " B dynamic smem): ", errorText(r));
}

namespace {

template <typename T>
std::string list(const std::vector<T>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

const char* enumName(int v, std::initializer_list<const char*> names) {
  return v >= 0 && v < (int)names.size() ? names.begin()[v] : "unknown";
}

// Everything cuTensorMapEncodeTiled was given, and the rules of its documentation that these values break.
std::string describeTensorMap(const TiledTensorMapSpec& s) {
  static const int elementBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  std::ostringstream os;
  const char* type =
      enumName(s.dataType, {"UINT8", "UINT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "FLOAT32", "FLOAT64",
                            "BFLOAT16", "FLOAT32_FTZ", "TFLOAT32", "TFLOAT32_FTZ"});
  os << "data type " << s.dataType << " (" << type << "), rank " << s.globalDim.size() << ", address 0x" << std::hex
     << s.globalAddress << std::dec << ", dims " << list(s.globalDim) << " (innermost first), strides "
     << list(s.globalStrides) << " bytes, box " << list(s.boxDim) << ", element strides " << list(s.elementStrides)
     << ", interleave " << enumName(s.interleave, {"NONE", "16B", "32B"}) << ", swizzle "
     << enumName(s.swizzle, {"NONE", "32B", "64B", "128B", "128B_ATOM_32B", "128B_ATOM_32B_FLIP_8B", "128B_ATOM_64B"})
     << ", L2 promotion " << enumName(s.l2Promotion, {"NONE", "64B", "128B", "256B"}) << ", OOB fill "
     << enumName(s.oobFill, {"NONE", "NAN_REQUEST_ZERO_FMA"});
  std::vector<std::string> broken;
  const int span = s.swizzle == 1 ? 32 : s.swizzle == 2 ? 64 : s.swizzle >= 3 ? 128 : 0;
  if (s.dataType >= 0 && s.dataType <= 12 && span && !s.boxDim.empty() &&
      (uint64_t)s.boxDim[0] * elementBytes[s.dataType] > (uint64_t)span)
    broken.push_back("the inner box (" + std::to_string(s.boxDim[0]) + " x " +
                     std::to_string(elementBytes[s.dataType]) + " bytes) exceeds the " + std::to_string(span) +
                     "-byte swizzle span");
  for (size_t i = 0; i < s.globalDim.size(); ++i)
    if (s.globalDim[i] == 0 || s.globalDim[i] > (1ull << 32))
      broken.push_back("dim " + std::to_string(i) + " = " + std::to_string(s.globalDim[i]) + " is outside 1..2^32");
  for (size_t i = 0; i < s.globalStrides.size(); ++i)
    if (s.globalStrides[i] >= (1ull << 40))
      broken.push_back("stride " + std::to_string(i + 1) + " is not below 2^40 bytes");
  if (s.dataType < 0 || s.dataType > 12) broken.push_back("the data type is not a CUtensorMapDataType");
  if (!broken.empty()) {
    os << "; it breaks: ";
    for (size_t i = 0; i < broken.size(); ++i) os << (i ? "; " : "") << broken[i];
  }
  return os.str();
}

}  // namespace

TensorMap CudaDriver::encodeTiledTensorMap(const TiledTensorMapSpec& s, const std::string& what) const {
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
  uint64_t align = tensorMapAddressAlignment(s);
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
  if (r != CUDA_SUCCESS)
    fail<DriverError>("cuTensorMapEncodeTiled rejected the tensor map", what.empty() ? "" : " of ", what, " (",
                      errorText(r), "): it was given ", describeTensorMap(s),
                      ". Check these against the tensor (and the kernel's box and swizzle against its tile)");
  return map;
}

void CudaDriver::replaceTensorMapAddress(TensorMap* map, const TiledTensorMapSpec& spec, uint64_t address,
                                         const std::string& what) const {
  require();
  if (!cuTensorMapReplaceAddress_) {  // encoded again from its description
    TiledTensorMapSpec s = spec;
    s.globalAddress = address;
    *map = encodeTiledTensorMap(s, what);
    return;
  }
  // every planned launch of a kernel with tensor maps comes here once per map: the address's text (an
  // ostringstream, ~0.25 us) is built only for an error
  auto hex = [address] {
    std::ostringstream addr;
    addr << "0x" << std::hex << address;
    return addr.str();
  };
  uint64_t align = tensorMapAddressAlignment(spec);
  if (address % align) fail<InputError>("tensor map base address ", hex(), " is not ", align, "-byte aligned");
  CUresult r = cuTensorMapReplaceAddress_(map, reinterpret_cast<void*>(static_cast<uintptr_t>(address)));
  if (r != CUDA_SUCCESS)
    fail<DriverError>("cuTensorMapReplaceAddress rejected the address ", hex(), " for the tensor map",
                      what.empty() ? "" : " of ", what, " (", errorText(r), ")");
}

}  // namespace heddle::rt
