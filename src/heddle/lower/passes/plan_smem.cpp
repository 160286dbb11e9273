// plan_smem: offsets for every shared buffer (stack allocation with alignment, aliasing of
// buffers whose lifetimes do not overlap) and the target's limit check.
//
// Before: buffers sA f16[4][128][32], sB f16[4][32][128] without offsets
// After:  sA @0 (32768 B), sB @32768 (32768 B); launch.smemBytes = 65536; SmemPlan slots listed
// Lifetimes are [first, last] node ids touching the buffer; a buffer may take the place of one
// whose lifetime ended before it starts (the smaller one aliases into the larger's bytes). Over
// the limit is a ScheduleError listing every buffer and size and what to shrink.
//
// Runs when: always.
#include <algorithm>
#include <map>
#include <sstream>

#include "heddle/lower/lower.h"

namespace heddle::passes {

namespace {

struct Placed {
  kir::Buffer* b;
  int64_t off, end;
  int first, last;
  std::string aliasOf;
};
using Lifetimes = std::map<const kir::Buffer*, std::pair<int, int>>;

// Stack placement with aliasing of dead buffers. `bytesOf` gives each buffer's size (the real one,
// or a what-if size for the advice below).
template <typename BytesOf>
std::vector<Placed> place(const kir::Kernel& k, const Lifetimes& life, int64_t& top, BytesOf bytesOf) {
  std::vector<Placed> placed;
  top = 0;
  for (auto& bp : k.buffers) {
    auto* b = bp.get();
    if (b->memory != MemoryType::Shared) continue;
    auto it = life.find(b);
    auto lt = it != life.end() ? it->second : std::make_pair(0, 1 << 30);
    int64_t bytes = bytesOf(*b);
    std::string aliasOf;
    int64_t off = -1;
    // reuse a dead buffer's bytes when they fit (not across concurrent roles: program order is not time)
    for (auto& p : placed)
      if (!k.syncsPlanned && (p.last < lt.first || lt.second < p.first) && p.end - p.off >= bytes &&
          p.off % b->align == 0) {
        bool clash = false;
        for (auto& q : placed)
          if (q.b != p.b && q.off < p.off + bytes && p.off < q.end && !(q.last < lt.first || lt.second < q.first))
            clash = true;
        if (!clash) {
          off = p.off;
          aliasOf = p.b->name;
          break;
        }
      }
    if (off < 0) {
      off = (top + b->align - 1) / b->align * b->align;
      top = off + bytes;
    }
    placed.push_back({b, off, off + bytes, lt.first, lt.second, aliasOf});
  }
  return placed;
}

// Shared bytes the kernel would need with `stages` ring slots and an m x n tile: the operand
// tiles ("A" / "B") scale with the tile, every buffer with the ring's depth scales with it.
int64_t bytesWith(const kir::Kernel& k, const Lifetimes& life, const MatmulTiling& t, int stages, int bm, int bn) {
  int64_t top = 0;
  place(k, life, top, [&](const kir::Buffer& b) {
    int64_t bytes = b.bytesPerStage();
    if (b.role == "A") bytes = bytes * bm / t.bm;
    if (b.role == "B") bytes = bytes * bn / t.bn;
    return bytes * (t.stages > 1 && b.stages == t.stages ? stages : b.stages);
  });
  return top;
}

// What to change when the plan is over the limit: the largest stage count that fits, else the
// largest tile (halving n, then m) that the schedule rules accept and that fits.
std::string overLimitAdvice(const LowerContext& c, const Lifetimes& life) {
  auto& k = c.kernel;
  auto& t = c.tiling;
  const int64_t limit = c.target.smemLimit;
  std::ostringstream os;
  if (!t.bm) return "\nshrink the largest buffers";
  if (t.stages > 2) {
    int best = 0;
    for (int s = t.stages - 1; s >= 2 && !best; --s)
      if (bytesWith(k, life, t, s, t.bm, t.bn) <= limit) best = s;
    if (best) {
      os << "\nuse circular_buffer(stages=" << best << ") (" << bytesWith(k, life, t, best, t.bm, t.bn)
         << " bytes; the largest stage count that fits)";
      return os.str();
    }
  }
  for (int bm = t.bm; bm >= 16; bm /= 2)
    for (int bn = t.bn; bn >= 16; bn /= 2) {
      if ((bm == t.bm && bn == t.bn) || !tileShapeProblem(t, c.target, bm, bn).empty()) continue;
      for (int stages : {t.stages, std::min(t.stages, 2)}) {
        int64_t bytes = bytesWith(k, life, t, stages, bm, bn);
        if (bytes > limit) continue;
        os << "\nuse a smaller tile: " << bm << "x" << bn << "x" << t.bk;
        if (stages != t.stages) os << " with circular_buffer(stages=" << stages << ")";
        os << " (" << bytes << " bytes)";
        return os.str();
      }
    }
  return "\nno smaller valid tile fits: shrink the k-tile (split 'k' by 16) or the largest buffers";
}

}  // namespace

void planSmem(LowerContext& c) {
  auto& k = c.kernel;
  Lifetimes life;
  kir::walk(k.body, [&](const kir::Node& n) {
    for (auto& a : kir::accessesOf(n)) {
      auto it = life.find(a.buf);
      if (it == life.end()) life[a.buf] = {n.id, n.id};
      else it->second.second = std::max(it->second.second, n.id);
    }
  });
  int64_t top = 0;
  for (auto& p : place(k, life, top, [](const kir::Buffer& b) { return b.bytes(); })) {
    p.b->offset = p.off;
    k.smemPlan.slots.push_back({p.b->name, p.off, p.end - p.off, p.b->align, p.aliasOf});
  }
  k.smemPlan.total = top;
  k.launch.smemBytes = top;
  if (top > c.target.smemLimit) {
    std::ostringstream os;
    for (auto& s : k.smemPlan.slots) os << "\n  " << s.buffer << ": " << s.bytes << " bytes";
    fail<ScheduleError>("shared memory: the kernel needs ", top, " bytes but ", c.target.name, " allows ",
                        c.target.smemLimit, " per block:", os.str(), overLimitAdvice(c, life));
  }
}

}  // namespace heddle::passes
