// The launch tables of the eager path (bindings/plan_bindings.cpp: PlanTable; call_table.cpp: CallTable), the part
// that is not reading Python objects: a call's key is a list of int64 (per tensor: ndim, sizes, ndim,
// strides, dtype, device index, address modulo 16; per plain argument: its ArgTag and value), looked
// up in a SignatureTable of bounded size; a hit launches its LaunchPlan through the backend's launcher
// (launchBound). The binding computes the keys from the arguments' Python attributes and allocates the
// outputs; docs/runtime.md, "Eager calls".
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "heddle/runtime/backend.h"
#include "heddle/runtime/launch_plan.h"

namespace heddle::rt {

using SignatureKey = std::vector<int64_t>;

struct SignatureHash {  // FNV-1a over the key's values
  size_t operator()(const SignatureKey& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ (uint64_t)v) * 1099511628211ull;
    return (size_t)h;
  }
};

// What each argument of a CallTable key starts with.
enum ArgTag : int64_t {
  TagTensor = 1,
  TagNone = 2,
  TagFalse = 3,
  TagTrue = 4,
  TagInt = 5,
  TagFloat = 6,
  TagStr = 7,
  TagIdentity = 8
};

// Entries by key, at most `capacity` of them: a table that is full is emptied at once (its calls re-plan
// on use). Entries are shared and never changed once made, so a caller's copy outlives a clear.
template <class Entry>
class SignatureTable {
 public:
  explicit SignatureTable(size_t capacity = 64) : capacity_(capacity) {}
  std::shared_ptr<const Entry> find(const SignatureKey& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second;
  }
  bool contains(const SignatureKey& key) const { return entries_.count(key) > 0; }
  void put(SignatureKey key, std::shared_ptr<const Entry> e) {
    if (entries_.size() >= capacity_) entries_.clear();  // forgotten all at once, re-planned on use
    entries_[std::move(key)] = std::move(e);
  }
  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::unordered_map<SignatureKey, std::shared_ptr<const Entry>, SignatureHash> entries_;
};

// The launch of `plan` with the argument array `bound` (LaunchPlan::bind) through `launcher` on `stream`.
inline void launchBound(const LaunchPlan& plan, KernelLauncher& launcher, uint64_t stream, BoundArgs& bound) {
  launcher.launchPacked(plan.grid(), plan.block(), plan.smemBytes(), stream, bound.pointers(), plan.cluster(),
                        plan.device(), &plan.args());
}

}  // namespace heddle::rt
