// Loop-domain helpers: names, printing, lookup.
#include "heddle/ir/iter_domain.h"

#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle {

const char* parallelName(ParallelType p) {
  switch (p) {
    case ParallelType::Serial: return "serial";
    case ParallelType::BIDx: return "BIDx";
    case ParallelType::BIDy: return "BIDy";
    case ParallelType::BIDz: return "BIDz";
    case ParallelType::TIDx: return "TIDx";
    case ParallelType::TIDy: return "TIDy";
    case ParallelType::TIDz: return "TIDz";
    case ParallelType::Warp: return "warp";
    case ParallelType::Unroll: return "unroll";
    case ParallelType::Vectorize: return "vectorize";
  }
  return "?";
}

ParallelType parallelFromName(const std::string& s) {
  for (auto p :
       {ParallelType::Serial, ParallelType::BIDx, ParallelType::BIDy, ParallelType::BIDz, ParallelType::TIDx,
        ParallelType::TIDy, ParallelType::TIDz, ParallelType::Warp, ParallelType::Unroll, ParallelType::Vectorize})
    if (s == parallelName(p)) return p;
  if (s == "blockIdx.x") return ParallelType::BIDx;
  if (s == "blockIdx.y") return ParallelType::BIDy;
  if (s == "blockIdx.z") return ParallelType::BIDz;
  if (s == "threadIdx.x") return ParallelType::TIDx;
  if (s == "threadIdx.y") return ParallelType::TIDy;
  fail<ScheduleError>("unknown parallel type '", s,
                      "'; valid: serial, BIDx, BIDy, BIDz, TIDx, TIDy, TIDz, warp, unroll, vectorize");
}

std::string IterDomain::str() const {
  std::ostringstream os;
  os << name;
  if (isReduction) os << "(r)";
  if (extent >= 0) os << "{" << extent << "}";
  if (parallel != ParallelType::Serial) os << "(" << parallelName(parallel) << ")";
  return os.str();
}

int LoopDomain::find(const std::string& n) const {
  for (int i = 0; i < size(); ++i)
    if (axes[i].name == n) return i;
  return -1;
}

std::string LoopDomain::str() const {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < size(); ++i) os << (i ? ", " : "") << axes[i].str();
  os << "]";
  return os.str();
}

}  // namespace heddle
