// Findings of a simulation, de-duplicated: many dynamic instances of the same defect (every
// element of a tile, every k-iteration) become one message with an occurrence count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "heddle/verify/simulator.h"

namespace heddle::verify {

enum class Finding { Race, Deadlock, AsyncMisuse, Mismatch, BarrierMisuse };
constexpr int kFindingKinds = 5;

class Reports {
 public:
  explicit Reports(int maxPerKind) : max_(maxPerKind) {}
  // `key` groups instances of one defect; `text` is only called for the first instance.
  void add(Finding f, const std::string& key, const std::function<std::string()>& text, int64_t count = 1);
  int64_t total() const { return total_; }
  void into(SimResult& r) const;

 private:
  struct Entry {
    std::string text;
    int64_t count = 0;
  };
  int max_;
  int64_t total_ = 0;
  std::map<std::string, size_t> index_[kFindingKinds];
  std::vector<Entry> lists_[kFindingKinds];
  int64_t dropped_[kFindingKinds] = {};
};

// "thread 37 (warp 1, lane 5)"
std::string threadName(int tid, int warpSize);
// "threads 0-31, 40, 42-63"
std::string threadSet(const std::vector<int>& tids);

}  // namespace heddle::verify
