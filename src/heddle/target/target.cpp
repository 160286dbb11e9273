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
  a.cpAsync = a.mmaSync = a.gridFlags = true;
  a.smemSwizzleLine = 128;  // SmemTile: 8 chunks of 16 bytes = all 32 banks
  t[a.name] = a;

  TargetInfo h = a;
  h.name = h.rtcArch = "sm_90a";
  h.smemLimit = 232448;  // 227 KiB
  h.tma = h.mbarrier = h.wgmma = h.setmaxnreg = h.electSync = true;
  t[h.name] = h;

  TargetInfo b = h;
  b.name = b.rtcArch = "sm_100a";
  b.wgmma = false;
  b.tcgen05 = true;
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
  g.mfma = g.asyncLds = g.waveBarrier = true;
  g.vmcntMax = 63;  // 6-bit vmcnt on GFX9
  g.name = g.rtcArch = "gfx90a";
  t[g.name] = g;
  g.name = g.rtcArch = "gfx942";
  t[g.name] = g;
  TargetInfo r = g;
  r.name = r.rtcArch = "gfx1200";
  r.warpSize = 32;
  r.mfma = r.asyncLds = false;
  r.wmma = r.splitBarrier = true;
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
  n.wmma = false;
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
  if (tma && wgmma) add("tma_load");
  if (cpAsync) add("cp_async");
  if (asyncLds) add("async_lds");
  add("plain");
  return s;
}

GroupLowering TargetInfo::matmulGroup() const {
  if (!mmaSync || mfma || wmma) return GroupLowering::None;
  return (wgmma || tcgen05) && tma ? GroupLowering::Weaker : GroupLowering::Best;
}

std::string TargetInfo::describe() const {
  std::ostringstream os;
  os << name << " (warp " << warpSize << ", smem " << smemLimit / 1024 << " KiB";
  if (cpAsync) os << ", cp.async";
  if (tma) os << ", tma";
  if (wgmma) os << ", wgmma";
  if (tcgen05) os << ", tcgen05";
  if (splitBarrier) os << ", split barriers";
  if (namedBarriers) os << ", named barriers 1.." << namedBarriers;
  if (mfma) os << ", mfma";
  if (wmma) os << ", wmma";
  if (asyncLds) os << ", LDS DMA";
  os << ")";
  return os.str();
}

}  // namespace heddle
