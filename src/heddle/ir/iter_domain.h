// Loop domains: the axes of a tensor after split / reorder / parallelize.
//
// Every tensor starts with one IterDomain per logical axis (named after the axis: "m", "n", "k",
// "b"; reduction axes are marked). split(axis, f) replaces an axis by (outer = ceil(e/f), inner = f),
// reorder permutes, parallelize binds an axis to a hardware dimension. The lowering reads the
// resulting domain of the matmul output to find its tiles (schedule/matmul_tiling.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace heddle {

enum class ParallelType { Serial, BIDx, BIDy, BIDz, TIDx, TIDy, TIDz, Warp, Unroll, Vectorize };
const char* parallelName(ParallelType p);
ParallelType parallelFromName(const std::string& s);  // throws ScheduleError listing valid names

struct IterDomain {
  std::string name;     // "m", "m.o", "m.i", ...
  std::string root;     // the logical axis it derives from: "b", "m", "n" or "k"
  int64_t factor = 1;   // product of inner split factors below this axis in its root
  int64_t extent = -1;  // concrete extent when known (inner splits), else -1 (symbolic)
  bool isReduction = false;
  ParallelType parallel = ParallelType::Serial;
  std::string str() const;
};

struct LoopDomain {
  std::vector<IterDomain> axes;
  bool empty() const { return axes.empty(); }
  int size() const { return (int)axes.size(); }
  int find(const std::string& name) const;  // -1 when absent
  std::string str() const;                  // "[m.o(BIDy), n.o(BIDx), k.o, m.i{128}, ...]"
};

}  // namespace heddle
