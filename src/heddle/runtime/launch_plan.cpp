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

bool LaunchPlan::bind(const std::vector<uint64_t>& addresses, std::vector<KernelArg>* out) const {
  if (addresses.size() != tensors_) return false;
  for (const PlanSlot& s : slots_) {
    uint64_t a = addresses[s.tensor];
    if (a % s.align || (s.pinned && a != s.pinned)) return false;
  }
  *out = args_;
  for (const PlanSlot& s : slots_)
    if (s.arg >= 0) (*out)[s.arg].bits = addresses[s.tensor];
  return true;
}

}  // namespace heddle::rt
