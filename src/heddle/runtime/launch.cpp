// LoadedKernel and argument packing (launch.h). Modules live for the process: a module is shared by
// binary key and context and is never unloaded, because a launched kernel may still be running.
#include "heddle/runtime/launch.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "heddle/ir/errors.h"
#include "heddle/runtime/sha256.h"
#include "heddle/target/target.h"

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

// HEDDLE_SYNC_LAUNCH, read once per process: set and not "0", every launch waits for its stream.
bool syncLaunch() {
  static const bool on = [] {
    const char* v = std::getenv("HEDDLE_SYNC_LAUNCH");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

size_t argBytes(const KernelArg& a) {
  switch (a.kind) {
    case KernelArg::Kind::I32:
    case KernelArg::Kind::F32: return 4;
    case KernelArg::Kind::Ptr:
    case KernelArg::Kind::I64: return 8;
    case KernelArg::Kind::Bytes: return a.blob.size();
  }
  return 0;
}

const char* argKind(const KernelArg& a) {
  switch (a.kind) {
    case KernelArg::Kind::Ptr: return "ptr";
    case KernelArg::Kind::I32: return "i32";
    case KernelArg::Kind::I64: return "i64";
    case KernelArg::Kind::F32: return "f32";
    case KernelArg::Kind::Bytes: return "bytes";
  }
  return "?";
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
    : result_(std::move(result)),
      key_(std::move(binaryKey)),
      name_(std::move(kernelName)),
      what_("kernel '" + name_ + "'") {
  if (!result_) throw InputError("LoadedKernel needs a compiled result");
  if (key_.empty()) key_ = sha256Hex(result_->cubin);
}

LoadedKernel::PerContext& LoadedKernel::resolve(const BoundContext& bound) {
  const CudaDriver& drv = CudaDriver::instance();
  auto it = perContext_.find(bound.ctx);
  if (it != perContext_.end()) return it->second;
  DeviceInfo info = drv.deviceInfo(bound.device);
  std::string why = cudaArchMismatch(result_->arch, info.ccMajor, info.ccMinor);
  if (!why.empty()) {  // the driver would say CUDA_ERROR_NO_BINARY_FOR_GPU, or load something that cannot run
    std::string advice;
    try {
      advice = "Compile it for this device's target, '" + cudaTargetFor(info.ccMajor, info.ccMinor) +
               "' (heddle.runtime.target_for_device(); Fusion.compile() and Kernel.build() with no target take it "
               "when a CUDA device is present)";
    } catch (const ScheduleError& e) { advice = std::string("heddle has no target for this device: ") + e.what(); }
    fail<InputError>("kernel '", name_, "' was compiled for ", result_->arch, ", which does not load on CUDA device ",
                     bound.device, " (compute capability ", info.ccMajor, ".", info.ccMinor, "): ", why, ". ", advice);
  }
  std::string what = "kernel '" + name_ + "' (" + result_->name + ", " + result_->arch + ")";
  CUmodule m = moduleFor(key_, bound.ctx, result_->cubin, what);
  PerContext pc;
  pc.fn = drv.getFunction(m, name_);
  return perContext_[bound.ctx] = pc;
}

void LoadedKernel::askParams(PerContext& pc, size_t upTo) const {
  if (pc.paramsAsked && (pc.paramsComplete || !pc.haveParams || pc.params.size() >= upTo)) return;
  pc.paramsAsked = true;
  pc.haveParams = CudaDriver::instance().paramSizes(pc.fn, &pc.params, upTo, &pc.paramsComplete);
}

void LoadedKernel::checkArgs(PerContext& pc, const std::vector<KernelArg>& args) const {
  askParams(pc, args.size());  // once per loaded function: the table, or its first args.size() entries
  if (!pc.haveParams) return;
  // without the driver's count the table was asked only up to the arguments' count: parameters after them
  // cannot show (heddle's own argument lists are checked against the printed signatures on the CPU)
  bool same = pc.paramsComplete ? args.size() == pc.params.size() : pc.params.size() >= args.size();
  if (!pc.paramsComplete && same) pc.params.resize(args.size());
  for (size_t i = 0; same && i < args.size(); ++i) same = argBytes(args[i]) == pc.params[i];
  if (same) return;
  std::ostringstream want, got;
  for (size_t i = 0; i < pc.params.size(); ++i) want << (i ? ", " : "") << pc.params[i];
  for (size_t i = 0; i < args.size(); ++i) got << (i ? ", " : "") << argKind(args[i]) << " " << argBytes(args[i]);
  size_t i = 0;
  while (i < args.size() && i < pc.params.size() && argBytes(args[i]) == pc.params[i]) ++i;
  std::string first = i < args.size() && i < pc.params.size()
                          ? "argument " + std::to_string(i) + " is " + std::to_string(argBytes(args[i])) +
                                " bytes where the parameter takes " + std::to_string(pc.params[i])
                          : "the counts differ from argument " + std::to_string(i) + " on";
  fail<InputError>("launch of kernel '", name_, "': its ", pc.params.size(), " parameters take [", want.str(),
                   "] bytes (the driver's parameter table), but the launch passes ", args.size(), " arguments [",
                   got.str(), "]: ", first,
                   ". The argument list does not match the kernel's signature (kinds: "
                   "'i32'/'f32' are 4 bytes, 'ptr'/'i64' 8, 'bytes' its length)");
}

void LoadedKernel::launch(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block, unsigned smemBytes,
                          uint64_t stream, const std::vector<KernelArg>& args, const std::array<unsigned, 3>& cluster,
                          int device) {
  ArgPack pack(args);
  launchPacked(grid, block, smemBytes, stream, pack.pointers(), cluster, device, &args);
}

void LoadedKernel::launchPacked(const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
                                unsigned smemBytes, uint64_t stream, void** params,
                                const std::array<unsigned, 3>& cluster, int device,
                                const std::vector<KernelArg>* args) {
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
  const std::string& what = what_;
  const ContextScope scope(device);  // the thread's context as it was afterwards, whatever happens below
  const BoundContext& bound = scope.bound();
  CUfunction fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PerContext& pc = resolve(bound);
    if (args) checkArgs(pc, *args);
    if (static_cast<int>(smemBytes) > pc.smemOptedIn) {
      drv.setFuncAttribute(pc.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smemBytes),
                           what + " (opting into " + std::to_string(smemBytes) + " B of dynamic shared memory)");
      pc.smemOptedIn = static_cast<int>(smemBytes);
    }
    fn = pc.fn;
  }
  const auto cuStream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream));
  if (clustered) drv.launchKernelCluster(fn, grid, block, cluster, smemBytes, cuStream, params, what);
  else drv.launchKernel(fn, grid, block, smemBytes, cuStream, params, what);
  if (syncLaunch()) {
    std::ostringstream os;
    os << what << " (" << result_->arch << ", grid " << grid[0] << "x" << grid[1] << "x" << grid[2] << ", block "
       << block[0] << "x" << block[1] << "x" << block[2] << ", " << smemBytes << " B dynamic smem";
    if (clustered) os << ", clusters of " << cluster[0] << "x" << cluster[1] << "x" << cluster[2];
    os << ", device " << bound.device << ", stream " << stream << ")";
    drv.synchronize(cuStream, os.str());
  }
}

int LoadedKernel::numRegisters(int device) {
  const CudaDriver& drv = CudaDriver::instance();
  const ContextScope scope(device);  // the thread's context as it was afterwards, whatever happens below
  const BoundContext& bound = scope.bound();
  std::lock_guard<std::mutex> lock(mu_);
  return drv.getFuncAttribute(resolve(bound).fn, CU_FUNC_ATTRIBUTE_NUM_REGS, "kernel '" + name_ + "'");
}

bool LoadedKernel::paramSizes(std::vector<size_t>* sizes, int device) {
  const ContextScope scope(device);  // the thread's context as it was afterwards, whatever happens below
  const BoundContext& bound = scope.bound();
  std::lock_guard<std::mutex> lock(mu_);
  PerContext& pc = resolve(bound);
  askParams(pc, 0);  // the whole table where the driver can count it; else unknown until a launch asks
  *sizes = pc.params;
  return pc.haveParams && pc.paramsComplete;
}

bool syncLaunchEnabled() { return syncLaunch(); }

}  // namespace heddle::rt
