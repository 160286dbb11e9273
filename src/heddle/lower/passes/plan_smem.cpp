// plan_smem: offsets for every shared buffer (stack allocation with alignment, aliasing of
// buffers whose lifetimes do not overlap) and the target's limit check.
//
// Before: buffers sA f16[4][128][32], sB f16[4][32][128] without offsets
// After:  sA @0 (32768 B), sB @32768 (32768 B); launch.smemBytes = 65536; SmemPlan slots listed
// Lifetimes are [first, last] node ids touching the buffer; a buffer may take the place of one
// whose lifetime ended before it starts (the smaller one aliases into the larger's bytes). Over
// the limit is a ScheduleError listing every buffer and size and what to shrink.
#include <algorithm>
#include <map>
#include <sstream>

#include "heddle/lower/lower.h"

namespace heddle::passes {

void planSmem(LowerContext& c) {
  auto& k = c.kernel;
  std::map<const kir::Buffer*, std::pair<int, int>> life;
  kir::walk(k.body, [&](const kir::Node& n) {
    for (auto& a : kir::accessesOf(n)) {
      auto it = life.find(a.buf);
      if (it == life.end()) life[a.buf] = {n.id, n.id};
      else it->second.second = std::max(it->second.second, n.id);
    }
  });
  struct Placed { kir::Buffer* b; int64_t off, end; int first, last; };
  std::vector<Placed> placed;
  int64_t top = 0;
  for (auto& bp : k.buffers) {
    auto* b = bp.get();
    if (b->memory != MemoryType::Shared) continue;
    auto lt = life.count(b) ? life[b] : std::make_pair(0, 1 << 30);
    int64_t bytes = b->bytes();
    std::string aliasOf;
    int64_t off = -1;
    // reuse a dead buffer's bytes when they fit (not across concurrent roles: program order is not time)
    for (auto& p : placed)
      if (!k.syncsPlanned && (p.last < lt.first || lt.second < p.first) && p.end - p.off >= bytes && p.off % b->align == 0) {
        bool clash = false;
        for (auto& q : placed)
          if (q.b != p.b && q.off < p.off + bytes && p.off < q.end && !(q.last < lt.first || lt.second < q.first))
            clash = true;
        if (!clash) { off = p.off; aliasOf = p.b->name; break; }
      }
    if (off < 0) {
      off = (top + b->align - 1) / b->align * b->align;
      top = off + bytes;
    }
    b->offset = off;
    placed.push_back({b, off, off + bytes, lt.first, lt.second});
    k.smemPlan.slots.push_back({b->name, off, bytes, b->align, aliasOf});
  }
  k.smemPlan.total = top;
  k.launch.smemBytes = top;
  if (top > c.target.smemLimit) {
    std::ostringstream os;
    for (auto& s : k.smemPlan.slots) os << "\n  " << s.buffer << ": " << s.bytes << " bytes";
    auto& t = c.tiling;
    std::ostringstream advice;
    if (t.stages > 1)
      advice << "\nuse fewer stages (circular_buffer stages=" << t.stages << " -> " << std::max(2, t.stages - 1)
             << ") or a smaller tile (" << t.bm << "x" << t.bn << "x" << t.bk << ")";
    else if (t.bm)
      advice << "\nuse a smaller tile (" << t.bm << "x" << t.bn << "x" << t.bk << ")";
    else
      advice << "\nshrink the largest buffers";
    fail<ScheduleError>("shared memory: the kernel needs ", top, " bytes but ", c.target.name, " allows ",
                        c.target.smemLimit, " per block:", os.str(), advice.str());
  }
}

}  // namespace heddle::passes
