// HipRuntime and HipLoadedKernel (hip_driver.h). Modules are shared by binary key and device and
// never unloaded (a launched kernel may still be running), as for CUDA.
#include "heddle/runtime/hip/hip_driver.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <sstream>

#include "heddle/ir/errors.h"
#include "heddle/runtime/sha256.h"

namespace heddle::rt {
namespace {

constexpr int kHipSuccess = 0;

DynLib loadHip(std::string& why) {
  std::vector<std::pair<std::string, bool>> cands;  // (path, soname)
  std::string env = envOr("HEDDLE_LIBAMDHIP64_PATH");
  if (!env.empty()) cands.push_back({env, false});
  for (const std::string& d :
       {envOr("ROCM_PATH").empty() ? std::string() : envOr("ROCM_PATH") + "/lib", std::string("/opt/rocm/lib")})
    if (!d.empty())
      for (const char* n : {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"})
        cands.push_back({d + "/" + n, false});
  for (const char* n : {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"}) cands.push_back({n, true});
  std::ostringstream tried;
  for (auto& [path, soname] : cands) {
    struct stat st{};
    if (!soname && ::stat(path.c_str(), &st) != 0) continue;
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h && ::dlsym(h, "hipModuleLaunchKernel")) return DynLib{h, path};
    const char* err = ::dlerror();
    tried << "\n  " << path << ": " << (h ? "no hipModuleLaunchKernel" : err ? err : "dlopen failed");
  }
  why = "the HIP runtime (libamdhip64) could not be loaded; tried:" + tried.str() +
        "\nInstall ROCm, or set HEDDLE_LIBAMDHIP64_PATH to libamdhip64.so.";
  return DynLib{};
}

template <typename F>
void bind(const DynLib& lib, F*& fn, const char* name) {
  fn = reinterpret_cast<F*>(lib.requireSymbol(name));
}

std::mutex gModulesMutex;
std::map<std::pair<std::string, int>, HipModule>& modules() {
  static std::map<std::pair<std::string, int>, HipModule> m;
  return m;
}

}  // namespace

HipRuntime& HipRuntime::instance() {
  static HipRuntime rt;
  return rt;
}

HipRuntime::HipRuntime() {
  lib_ = loadHip(reason_);
  if (!lib_.handle) return;
  try {
    bind(lib_, hipInit_, "hipInit");
    bind(lib_, hipGetDeviceCount_, "hipGetDeviceCount");
    bind(lib_, hipGetDevice_, "hipGetDevice");
    bind(lib_, hipModuleLoadData_, "hipModuleLoadData");
    bind(lib_, hipModuleGetFunction_, "hipModuleGetFunction");
    bind(lib_, hipModuleLaunchKernel_, "hipModuleLaunchKernel");
    bind(lib_, hipGetErrorString_, "hipGetErrorString");
    bind(lib_, hipGetErrorName_, "hipGetErrorName");
  } catch (const RuntimeUnavailable& e) {
    reason_ = e.what();
    return;
  }
  int rc = hipInit_(0);
  int n = 0;
  int rc2 = rc == kHipSuccess ? hipGetDeviceCount_(&n) : rc;
  if (rc != kHipSuccess || rc2 != kHipSuccess || n <= 0) {
    int bad = rc != kHipSuccess ? rc : rc2;
    std::ostringstream os;
    os << "no AMD GPU is usable through " << lib_.path << ": "
       << (bad != kHipSuccess ? std::string(rc != kHipSuccess ? "hipInit" : "hipGetDeviceCount") + " returned " +
                                    hipGetErrorName_(bad) + " (" + hipGetErrorString_(bad) + ")"
                              : std::string("hipGetDeviceCount found 0 devices"));
    reason_ = os.str();
    return;
  }
  deviceCount_ = n;
  available_ = true;
}

void HipRuntime::require() const {
  if (!available_) throw RuntimeUnavailable(reason_);
}

void HipRuntime::check(int rc, const char* call, const std::string& what) const {
  if (rc == kHipSuccess) return;
  fail<DriverError>(call, " failed for ", what, ": ", hipGetErrorName_(rc), " (", hipGetErrorString_(rc), ")");
}

int HipRuntime::currentDevice() const {
  require();
  int d = 0;
  check(hipGetDevice_(&d), "hipGetDevice", "the current device");
  return d;
}

HipModule HipRuntime::loadModule(const std::string& image, const std::string& what) const {
  require();
  HipModule m = nullptr;
  check(hipModuleLoadData_(&m, image.data()), "hipModuleLoadData", what);
  return m;
}

HipFunction HipRuntime::getFunction(HipModule m, const std::string& name) const {
  HipFunction f = nullptr;
  check(hipModuleGetFunction_(&f, m, name.c_str()), "hipModuleGetFunction", "kernel '" + name + "'");
  return f;
}

void HipRuntime::launchKernel(HipFunction f, const std::array<unsigned, 3>& g, const std::array<unsigned, 3>& b,
                              unsigned smem, uint64_t stream, void** params, const std::string& what) const {
  require();
  check(hipModuleLaunchKernel_(f, g[0], g[1], g[2], b[0], b[1], b[2], smem,
                               reinterpret_cast<void*>(static_cast<uintptr_t>(stream)), params, nullptr),
        "hipModuleLaunchKernel", what);
}

HipLoadedKernel::HipLoadedKernel(std::shared_ptr<const RtcResult> result, std::string binaryKey, std::string name)
    : result_(std::move(result)), key_(std::move(binaryKey)), name_(std::move(name)) {
  if (!result_) throw InputError("HipLoadedKernel needs a compiled result");
  if (key_.empty()) key_ = sha256Hex(result_->cubin);
}

void HipLoadedKernel::launch(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                             unsigned smemBytes, uint64_t stream, const std::vector<KernelArg>& args) {
  ArgPack pack(args);
  launchPacked(grid, block, smemBytes, stream, pack.pointers());
}

void HipLoadedKernel::launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                                   unsigned smemBytes, uint64_t stream, void** params) {
  const HipRuntime& hip = HipRuntime::instance();
  hip.require();
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || block[i] == 0)
      fail<InputError>("launch of kernel '", name_, "': grid and block must have no zero dimension");
  if (smemBytes > 65536)
    fail<InputError>("launch of kernel '", name_, "': ", smemBytes, " B of LDS exceed the 64 KiB an AMD workgroup has");
  HipFunction fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int dev = hip.currentDevice();
    auto it = perDevice_.find(dev);
    if (it == perDevice_.end()) {
      std::string what = "kernel '" + name_ + "' (" + result_->name + ", " + result_->arch + ")";
      HipModule m;
      {
        std::lock_guard<std::mutex> ml(gModulesMutex);
        auto& mods = modules();
        auto mi = mods.find({key_, dev});
        m = mi != mods.end() ? mi->second : (mods[{key_, dev}] = hip.loadModule(result_->cubin, what));
      }
      it = perDevice_.emplace(dev, hip.getFunction(m, name_)).first;
    }
    fn = it->second;
  }
  hip.launchKernel(fn, grid, block, smemBytes, stream, params, "kernel '" + name_ + "'");
}

}  // namespace heddle::rt
