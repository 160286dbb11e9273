// Slot binding of a prepared launch (launch_plan.h).
#include "heddle/runtime/launch_plan.h"

#include <algorithm>

#include "heddle/ir/errors.h"

namespace heddle::rt {

LaunchPlan::LaunchPlan(std::array<unsigned, 3> grid, std::array<unsigned, 3> block, unsigned smemBytes,
                       std::vector<KernelArg> args, std::vector<PlanSlot> slots)
    : grid_(grid), block_(block), smem_(smemBytes), args_(std::move(args)), slots_(std::move(slots)) {
  for (const PlanSlot& s : slots_) {
    if (s.arg >= (int)args_.size() || (s.arg >= 0 && args_[s.arg].kind != KernelArg::Kind::Ptr))
      fail<InputError>("launch plan: slot for tensor ", s.tensor, " names argument ", s.arg,
                       ", which is not a pointer argument of this kernel (", args_.size(), " arguments)");
    if (s.align == 0) fail<InputError>("launch plan: slot for tensor ", s.tensor, " has alignment 0");
    tensors_ = std::max<size_t>(tensors_, s.tensor + 1);
  }
}

namespace {
bool fits(const std::vector<PlanSlot>& slots, size_t tensors, const std::vector<uint64_t>& addresses) {
  if (addresses.size() != tensors) return false;
  for (const PlanSlot& s : slots) {
    uint64_t a = addresses[s.tensor];
    if (a % s.align || (s.pinned && a != s.pinned)) return false;
  }
  return true;
}
}  // namespace

bool LaunchPlan::bind(const std::vector<uint64_t>& addresses, BoundArgs* out) const {
  if (!fits(slots_, tensors_, addresses)) return false;
  out->scalars.resize(args_.size());  // sized before any pointer into it is taken
  out->ptrs.resize(args_.size());
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i].kind == KernelArg::Kind::Bytes) {
      out->ptrs[i] = const_cast<char*>(args_[i].blob.data());  // the driver only reads it
    } else {
      out->scalars[i] = args_[i].bits;  // little-endian: a 4-byte parameter reads the low half
      out->ptrs[i] = &out->scalars[i];
    }
  }
  for (const PlanSlot& s : slots_)
    if (s.arg >= 0) out->scalars[s.arg] = addresses[s.tensor];
  return true;
}

bool LaunchPlan::bind(const std::vector<uint64_t>& addresses, std::vector<KernelArg>* out) const {
  if (!fits(slots_, tensors_, addresses)) return false;
  *out = args_;
  for (const PlanSlot& s : slots_)
    if (s.arg >= 0) (*out)[s.arg].bits = addresses[s.tensor];
  return true;
}

}  // namespace heddle::rt
