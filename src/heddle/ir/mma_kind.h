// The matrix-multiply mechanism a kernel's MMA uses, named by mechanism, not by chip generation.
// A target offers a set of them (TargetInfo::mmaKinds); a kernel uses exactly one (kir::Kernel::Tile::mma,
// kir::MmaStep::kind).
#pragma once

#include <initializer_list>

namespace heddle {

enum class MmaKind {
  MmaSync,  // warp-level mma.sync (register fragments; CUDA sm_80+)
  Wgmma,    // asynchronous warpgroup MMA, operands in shared memory, retired by wgmma.wait_group
  Tcgen05,  // single-thread tcgen05.mma into a tensor-memory accumulator, completed by tcgen05.commit
  Mfma,     // AMD v_mfma_* (wave64)
  Wmma,     // AMD v_wmma_*_w32 (wave32)
};

// "mma.sync", "wgmma", "tcgen05", "MFMA", "WMMA"
constexpr const char* mmaKindName(MmaKind k) {
  switch (k) {
    case MmaKind::MmaSync: return "mma.sync";
    case MmaKind::Wgmma: return "wgmma";
    case MmaKind::Tcgen05: return "tcgen05";
    case MmaKind::Mfma: return "MFMA";
    case MmaKind::Wmma: return "WMMA";
  }
  return "?";
}

// A set of MMA kinds (what a target offers).
class MmaKinds {
 public:
  constexpr MmaKinds() = default;
  constexpr MmaKinds(std::initializer_list<MmaKind> ks) {
    for (MmaKind k : ks) add(k);
  }
  constexpr bool has(MmaKind k) const { return bits_ & bit(k); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr MmaKinds& add(MmaKind k) {
    bits_ |= bit(k);
    return *this;
  }
  constexpr MmaKinds& remove(MmaKind k) {
    bits_ &= ~bit(k);
    return *this;
  }

 private:
  static constexpr unsigned bit(MmaKind k) { return 1u << static_cast<unsigned>(k); }
  unsigned bits_ = 0;
};

}  // namespace heddle
