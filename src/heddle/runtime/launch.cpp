// LoadedKernel and argument packing (launch.h). Modules live for the process: a module is shared by
// binary key and context and is never unloaded, because a launched kernel may still be running.
#include "heddle/runtime/launch.h"

#include <cstring>

#include "heddle/ir/errors.h"
#include "heddle/runtime/sha256.h"

namespace heddle::rt {
namespace {

std::mutex gModulesMutex;
std::map<std::pair<std::string, CUcontext>, CUmodule>& sharedModules() {
  static std::map<std::pair<std::string, CUcontext>, CUmodule> modules;
  return modules;
}

CUmodule moduleFor(const std::string& key, CUcontext ctx, const std::string& image, const std::string& what) {
  std::lock_guard<std::mutex> lock(gModulesMutex);
  auto& modules = sharedModules();
  auto it = modules.find({key, ctx});
  if (it != modules.end()) return it->second;
  CUmodule m = CudaDriver::instance().loadModule(image, what);
  modules[{key, ctx}] = m;
  return m;
}

template <typename T>
uint64_t bitsOf(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  return bits;
}

}  // namespace

KernelArg KernelArg::ptr(uint64_t address) { return {Kind::Ptr, address, {}}; }
KernelArg KernelArg::i32(int32_t v) { return {Kind::I32, bitsOf(v), {}}; }
KernelArg KernelArg::i64(int64_t v) { return {Kind::I64, bitsOf(v), {}}; }
KernelArg KernelArg::f32(float v) { return {Kind::F32, bitsOf(v), {}}; }
KernelArg KernelArg::bytes(std::string b) { return {Kind::Bytes, 0, std::move(b)}; }

ArgPack::ArgPack(const std::vector<KernelArg>& args) {
  // Storage is sized up front so the pointers taken below stay valid.
  scalars_.resize(args.size());
  blobs_.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == KernelArg::Kind::Bytes) {
      blobs_.push_back(args[i].blob);
      ptrs_.push_back(blobs_.back().data());
    } else {
      scalars_[i] = args[i].bits;  // little-endian: a 4-byte param reads the low half
      ptrs_.push_back(&scalars_[i]);
    }
  }
}

LoadedKernel::LoadedKernel(std::shared_ptr<const RtcResult> result, std::string binaryKey, std::string kernelName)
    : result_(std::move(result)), key_(std::move(binaryKey)), name_(std::move(kernelName)) {
  if (!result_) throw InputError("LoadedKernel needs a compiled result");
  if (key_.empty()) key_ = sha256Hex(result_->cubin);
}

LoadedKernel::PerContext& LoadedKernel::resolve() {
  const CudaDriver& drv = CudaDriver::instance();
  CUcontext ctx = drv.ensureContext();
  auto it = perContext_.find(ctx);
  if (it != perContext_.end()) return it->second;
  std::string what = "kernel '" + name_ + "' (" + result_->name + ", " + result_->arch + ")";
  CUmodule m = moduleFor(key_, ctx, result_->cubin, what);
  PerContext pc;
  pc.fn = drv.getFunction(m, name_);
  return perContext_[ctx] = pc;
}

void LoadedKernel::launch(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                          unsigned smemBytes, uint64_t stream, const std::vector<KernelArg>& args,
                          const std::array<unsigned, 3>& cluster) {
  ArgPack pack(args);
  launchPacked(grid, block, smemBytes, stream, pack.pointers(), cluster);
}

void LoadedKernel::launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                                unsigned smemBytes, uint64_t stream, void** params,
                                const std::array<unsigned, 3>& cluster) {
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || block[i] == 0)
      fail<InputError>("launch of kernel '", name_, "': grid ", grid[0], "x", grid[1], "x", grid[2], " and block ",
                       block[0], "x", block[1], "x", block[2], " must have no zero dimension");
  if (grid[0] > 2147483647u || grid[1] > 65535u || grid[2] > 65535u)  // cuLaunchKernel's limits
    fail<InputError>("launch of kernel '", name_, "': grid ", grid[0], "x", grid[1], "x", grid[2],
                     " exceeds the driver's limits (x < 2^31, y and z <= 65535); split the launch");
  const bool clustered = cluster[0] * cluster[1] * cluster[2] != 1;
  for (int i = 0; clustered && i < 3; ++i)
    if (cluster[i] == 0 || grid[i] % cluster[i])
      fail<InputError>("launch of kernel '", name_, "': clusters of ", cluster[0], "x", cluster[1], "x", cluster[2],
                       " CTAs must divide the grid ", grid[0], "x", grid[1], "x", grid[2], " (grid.", "xyz"[i], " = ",
                       grid[i], " is not a multiple of ", cluster[i], "); round the grid up to whole clusters");
  if (clustered && cluster[0] * cluster[1] * cluster[2] > 8)
    fail<InputError>("launch of kernel '", name_, "': a cluster of ", cluster[0], "x", cluster[1], "x", cluster[2],
                     " = ", cluster[0] * cluster[1] * cluster[2], " CTAs exceeds the portable cluster size of 8");
  const CudaDriver& drv = CudaDriver::instance();
  drv.require();
  std::string what = "kernel '" + name_ + "'";
  CUfunction fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PerContext& pc = resolve();
    if (static_cast<int>(smemBytes) > pc.smemOptedIn) {
      drv.setFuncAttribute(pc.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smemBytes),
                           what + " (opting into " + std::to_string(smemBytes) + " B of dynamic shared memory)");
      pc.smemOptedIn = static_cast<int>(smemBytes);
    }
    fn = pc.fn;
  }
  const auto cuStream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream));
  if (clustered)
    drv.launchKernelCluster(fn, grid, block, cluster, smemBytes, cuStream, params, what);
  else
    drv.launchKernel(fn, grid, block, smemBytes, cuStream, params, what);
}

int LoadedKernel::numRegisters() {
  std::lock_guard<std::mutex> lock(mu_);
  return CudaDriver::instance().getFuncAttribute(resolve().fn, CU_FUNC_ATTRIBUTE_NUM_REGS, "kernel '" + name_ + "'");
}

}  // namespace heddle::rt
