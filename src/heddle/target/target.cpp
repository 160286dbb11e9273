// The table of known targets and what each offers.
#include "heddle/target/target.h"

#include <map>
#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle {

static std::map<std::string, TargetInfo> makeTargets() {
  std::map<std::string, TargetInfo> t;
  TargetInfo a;
  a.name = a.rtcArch = "sm_80";
  a.smemLimit = 166912;  // 163 KiB opt-in per block on A100
  a.cpAsync = a.gridFlags = true;
  a.mma = {MmaKind::MmaSync};
  a.smemSwizzleLine = 128;  // SmemTile: 8 chunks of 16 bytes = all 32 banks
  t[a.name] = a;

  TargetInfo h = a;
  h.name = h.rtcArch = "sm_90a";
  h.smemLimit = 232448;  // 227 KiB
  h.tma = h.mbarrier = h.setmaxnreg = h.electSync = true;
  h.mma.add(MmaKind::Wgmma);
  t[h.name] = h;

  TargetInfo b = h;
  b.name = b.rtcArch = "sm_100a";
  b.mma.remove(MmaKind::Wgmma).add(MmaKind::Tcgen05);
  b.tmemColumns = 512;
  b.gridFlags = false;  // split-K is not lowered for the tcgen05 path yet
  t[b.name] = b;

  // AMD (checked with clang-19 / LLVM 19, docs/backends.md): CDNA2/3 are wave64 with MFMA and LDS
  // DMA (buffer_load_dword ... lds, counted by vmcnt) and back off s_barrier with counters
  // outstanding; GFX12 is wave32 with WMMA and split barriers, has no LDS DMA, and drains its
  // counters before a barrier (no FeatureBackOffBarrier in LLVM 19).
  TargetInfo g;
  g.backend = Backend::Hip;
  g.warpSize = 64;
  g.smemLimit = 65536;
  g.maxThreads = 1024;
  g.asyncLds = g.waveBarrier = true;
  g.mma = {MmaKind::Mfma};
  g.vmcntMax = 63;  // 6-bit vmcnt on GFX9
  g.name = g.rtcArch = "gfx90a";
  t[g.name] = g;
  g.name = g.rtcArch = "gfx942";
  t[g.name] = g;
  TargetInfo r = g;
  r.name = r.rtcArch = "gfx1200";
  r.warpSize = 32;
  r.asyncLds = false;
  r.splitBarrier = true;
  r.mma = {MmaKind::Wmma};
  r.backOffBarrier = false;
  r.vmcntMax = 63;  // 6-bit s_wait_loadcnt
  t[r.name] = r;
  // GFX12.5: named barrier objects 1..16 (LLVM AMDGPUExecutionSynchronization, "s_barrier IDs GFX12").
  // No compiler reachable here knows gfx1250 (clang-19 rejects the name), so heddle offers it for
  // the barrier model only: the kernel IR, the printer's spellings and the simulator. No matmul path
  // (wmma stays off: whether gfx1200's WMMA spellings and layouts hold there cannot be checked
  // without a compiler), and the LDS limit is GFX12's 64 KiB, not a gfx1250 figure.
  TargetInfo n = r;
  n.name = n.rtcArch = "gfx1250";
  n.mma = {};
  n.namedBarriers = 16;
  t[n.name] = n;
  return t;
}

static const std::map<std::string, TargetInfo>& targets() {
  static const auto t = makeTargets();
  return t;
}

const TargetInfo& targetInfo(const std::string& name) {
  auto it = targets().find(name);
  if (it == targets().end()) {
    std::ostringstream os;
    for (auto& n : knownTargets()) os << " " << n;
    fail<ScheduleError>("unknown target '", name, "'; known targets:", os.str());
  }
  return it->second;
}

std::vector<std::string> knownTargets() {
  std::vector<std::string> r;
  for (auto& [k, v] : targets()) r.push_back(k);
  return r;
}

bool TargetInfo::smemRowOk(long bytes) const {
  if (bytes <= 0 || bytes % 16) return false;
  if (!smemSwizzleLine) return true;
  return bytes == 16 || bytes == 32 || bytes == 64 || bytes % smemSwizzleLine == 0;
}

std::string TargetInfo::loadKindsAvailable() const {
  std::string s;
  auto add = [&](const char* k) { s += (s.empty() ? "'" : " or '") + std::string(k) + "'"; };
  if (tma && mma.has(MmaKind::Wgmma)) add("tma_load");
  if (cpAsync) add("cp_async");
  if (asyncLds) add("async_lds");
  add("plain");
  return s;
}

GroupLowering TargetInfo::matmulGroup() const {
  if (!mma.has(MmaKind::MmaSync) || mma.has(MmaKind::Mfma) || mma.has(MmaKind::Wmma)) return GroupLowering::None;
  return (mma.has(MmaKind::Wgmma) || mma.has(MmaKind::Tcgen05)) && tma ? GroupLowering::Weaker : GroupLowering::Best;
}

std::string TargetInfo::describe() const {
  std::ostringstream os;
  os << name << " (warp " << warpSize << ", smem " << smemLimit / 1024 << " KiB";
  if (cpAsync) os << ", cp.async";
  if (tma) os << ", tma";
  if (mma.has(MmaKind::Wgmma)) os << ", wgmma";
  if (mma.has(MmaKind::Tcgen05)) os << ", tcgen05";
  if (splitBarrier) os << ", split barriers";
  if (namedBarriers) os << ", named barriers 1.." << namedBarriers;
  if (mma.has(MmaKind::Mfma)) os << ", mfma";
  if (mma.has(MmaKind::Wmma)) os << ", wmma";
  if (asyncLds) os << ", LDS DMA";
  os << ")";
  return os.str();
}

namespace {

// sm_XY[a|f] / compute_XY[a|f] -> {X, Y, suffix, is PTX}; false when `arch` is none of these.
struct CudaArch {
  int major = 0, minor = 0;
  char suffix = 0;  // 0, 'a' or 'f'
  bool ptx = false;
};

bool parseCudaArch(const std::string& arch, CudaArch* out) {
  std::string rest;
  if (arch.rfind("sm_", 0) == 0) rest = arch.substr(3);
  else if (arch.rfind("compute_", 0) == 0) rest = arch.substr(8), out->ptx = true;
  else return false;
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) out->suffix = rest.back(), rest.pop_back();
  if (rest.size() < 2 || rest.find_first_not_of("0123456789") != std::string::npos) return false;
  out->major = std::stoi(rest.substr(0, rest.size() - 1));
  out->minor = rest.back() - '0';
  return true;
}

// Where a binary for `a` loads, for messages: "8.x", "only 9.0", "10.3 and later 10.x".
std::string loadsOn(const CudaArch& a) {
  std::ostringstream os;
  if (a.suffix == 'a') os << "only " << a.major << "." << a.minor;
  else if (a.ptx) os << a.major << "." << a.minor << " and newer";
  else if (a.minor == 0) os << a.major << ".x";
  else os << a.major << "." << a.minor << " and later " << a.major << ".x";
  return os.str();
}

}  // namespace

std::string cudaArchMismatch(const std::string& arch, int major, int minor) {
  CudaArch a;
  if (!parseCudaArch(arch, &a)) return "";
  std::ostringstream os;
  if (a.suffix == 'a') {
    if (major == a.major && minor == a.minor) return "";
    os << "an architecture-specific ('a') binary runs only on compute capability " << a.major << "." << a.minor;
  } else if (a.ptx) {
    if (major * 10 + minor >= a.major * 10 + a.minor) return "";
    os << "PTX for " << arch << " needs compute capability " << a.major << "." << a.minor << " or newer";
  } else {
    if (major == a.major && minor >= a.minor) return "";
    os << "a binary for " << arch << " runs only on compute capability " << loadsOn(a)
       << " (a cubin loads within its own major version, never on a newer one)";
  }
  return os.str();
}

std::string cudaTargetFor(int major, int minor) {
  std::map<int, std::string> byCc;  // heddle's CUDA targets by capability, for the message
  std::string best;
  int bestCc = -1;
  for (const auto& [name, t] : targets()) {
    CudaArch a;
    if (t.backend != Backend::Cuda || !parseCudaArch(t.rtcArch, &a)) continue;
    byCc[a.major * 10 + a.minor] = name + " (" + loadsOn(a) + ")";
    if (cudaArchMismatch(t.rtcArch, major, minor).empty() && a.major * 10 + a.minor > bestCc)
      best = name, bestCc = a.major * 10 + a.minor;
  }
  std::string all;
  for (const auto& [cc, text] : byCc) all += (all.empty() ? "" : ", ") + text;
  if (best.empty())
    fail<ScheduleError>("no heddle target runs on a CUDA device of compute capability ", major, ".", minor,
                        ": heddle's CUDA targets are ", all,
                        "; a cubin loads only within its own major version, "
                        "and an 'a' target only on its exact capability",
                        major < 8 ? ". heddle needs compute capability 8.0 or newer"
                                  : ". heddle has no kernels for this device yet (a target for it is new work)");
  return best;
}

}  // namespace heddle
