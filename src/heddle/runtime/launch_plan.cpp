// Slot binding of a prepared launch (launch_plan.h).
#include "heddle/runtime/launch_plan.h"

#include <algorithm>
#include <cstring>

#include "heddle/ir/errors.h"

namespace heddle::rt {

MapPatcher driverMapPatcher() {
  return [](TensorMap* map, const TiledTensorMapSpec& spec, uint64_t address) {
    CudaDriver::instance().replaceTensorMapAddress(map, spec, address);
  };
}

void WorkspaceTable::set(int device, uint64_t stream, const Entry& e) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[{device, stream}] = e;
}

bool WorkspaceTable::find(int device, uint64_t stream, uint64_t slots, Entry* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find({device, stream});
  if (it == entries_.end() || it->second.slots < slots) return false;
  *out = it->second;
  return true;
}

size_t WorkspaceTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void WorkspaceTable::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
}

namespace {

void requireArg(const std::vector<KernelArg>& args, int arg, KernelArg::Kind kind, const char* what, uint32_t tensor) {
  if (arg < 0 || arg >= (int)args.size() || args[arg].kind != kind)
    fail<InputError>("launch plan: ", what, " for tensor ", tensor, " names argument ", arg, ", which is not a ",
                     kind == KernelArg::Kind::Ptr ? "pointer" : "tensor-map ('bytes')", " argument of this kernel (",
                     args.size(), " arguments)");
}

}  // namespace

LaunchPlan::LaunchPlan(std::array<unsigned, 3> grid, std::array<unsigned, 3> block, unsigned smemBytes,
                       std::vector<KernelArg> args, std::vector<PlanSlot> slots, std::vector<MapSlot> maps,
                       WorkspaceUse workspace, MapPatcher patcher)
    : grid_(grid),
      block_(block),
      smem_(smemBytes),
      args_(std::move(args)),
      slots_(std::move(slots)),
      maps_(std::move(maps)),
      ws_(std::move(workspace)),
      patcher_(std::move(patcher)) {
  for (const PlanSlot& s : slots_) {
    requireArg(args_, s.arg, KernelArg::Kind::Ptr, "slot", s.tensor);
    if (s.align == 0) fail<InputError>("launch plan: slot for tensor ", s.tensor, " has alignment 0");
    tensors_ = std::max<size_t>(tensors_, s.tensor + 1);
  }
  for (const MapSlot& m : maps_) {
    requireArg(args_, m.arg, KernelArg::Kind::Bytes, "tensor map", m.tensor);
    if (args_[m.arg].blob.size() != sizeof(TensorMap))
      fail<InputError>("launch plan: the tensor map for tensor ", m.tensor, " (argument ", m.arg, ") has ",
                       args_[m.arg].blob.size(), " bytes; a CUtensorMap has ", sizeof(TensorMap));
    tensors_ = std::max<size_t>(tensors_, m.tensor + 1);
  }
  if (ws_.table) {
    requireArg(args_, ws_.wsArg, KernelArg::Kind::Ptr, "workspace", 0);
    requireArg(args_, ws_.flagsArg, KernelArg::Kind::Ptr, "workspace flags", 0);
  }
  if (!maps_.empty() && !patcher_) patcher_ = driverMapPatcher();
}

bool LaunchPlan::fits(const std::vector<uint64_t>& addresses, uint64_t stream, WorkspaceTable::Entry* ws) const {
  if (addresses.size() != tensors_) return false;
  for (const PlanSlot& s : slots_)
    if (addresses[s.tensor] % s.align) return false;
  for (const MapSlot& m : maps_)
    if (addresses[m.tensor] % tensorMapAddressAlignment(m.spec)) return false;
  return !ws_.table || ws_.table->find(device_, stream, ws_.slots, ws);
}

void LaunchPlan::patch(const MapSlot& m, uint64_t address, TensorMap* map) const {
  std::memcpy(map, args_[m.arg].blob.data(), sizeof(TensorMap));
  patcher_(map, m.spec, address);
}

bool LaunchPlan::bind(const std::vector<uint64_t>& addresses, uint64_t stream, BoundArgs* out) const {
  WorkspaceTable::Entry ws;
  if (!fits(addresses, stream, &ws)) return false;
  out->scalars.resize(args_.size());  // sized before any pointer into it is taken
  out->ptrs.resize(args_.size());
  out->maps.resize(maps_.size());
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i].kind == KernelArg::Kind::Bytes) {
      out->ptrs[i] = const_cast<char*>(args_[i].blob.data());  // the driver only reads it
    } else {
      out->scalars[i] = args_[i].bits;  // little-endian: a 4-byte parameter reads the low half
      out->ptrs[i] = &out->scalars[i];
    }
  }
  for (const PlanSlot& s : slots_) out->scalars[s.arg] = addresses[s.tensor];
  for (size_t i = 0; i < maps_.size(); ++i) {
    const MapSlot& m = maps_[i];
    if (addresses[m.tensor] == m.spec.globalAddress) continue;  // the plan's own map
    patch(m, addresses[m.tensor], &out->maps[i]);
    out->ptrs[m.arg] = &out->maps[i];
  }
  if (ws_.table) {
    out->scalars[ws_.wsArg] = ws.ws;
    out->scalars[ws_.flagsArg] = ws.flags;
  }
  return true;
}

bool LaunchPlan::bind(const std::vector<uint64_t>& addresses, uint64_t stream, std::vector<KernelArg>* out) const {
  WorkspaceTable::Entry ws;
  if (!fits(addresses, stream, &ws)) return false;
  *out = args_;
  for (const PlanSlot& s : slots_) (*out)[s.arg].bits = addresses[s.tensor];
  for (const MapSlot& m : maps_) {
    if (addresses[m.tensor] == m.spec.globalAddress) continue;
    TensorMap map;
    patch(m, addresses[m.tensor], &map);
    (*out)[m.arg].blob.assign(reinterpret_cast<const char*>(&map), sizeof map);
  }
  if (ws_.table) {
    (*out)[ws_.wsArg].bits = ws.ws;
    (*out)[ws_.flagsArg].bits = ws.flags;
  }
  return true;
}

}  // namespace heddle::rt
