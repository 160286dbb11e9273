// Hopper sync mutations (with delete_sync and loosen_wait of mutate.cpp, which also cover the
// mbarrier, wgmma, proxy-fence, named-barrier and bulk-group ops):
//   flip_parity    mbarrier.try_wait.parity P -> parity (P + 1) % 2
//   over_arrive    one more mbarrier.arrive right after an arrive (or arrive.expect_tx)
//   under_arrive   mbarrier.init count n -> n + 1 (every phase misses one arrival)
//   role_cycle     a wait moves to its partner barrier (full <-> empty, fullC <-> emptyC, accFull <-> accEmpty, order[c] <->
//                  order[1-c]): the producer then waits for what only it produces, the consumer for
//                  what only it releases -- the two sides wait on each other
//   own_half_tx    clusters: arrive.expect_tx counts this CTA's half of the multicast tile only (not the peer's)
#include "heddle/verify/mutate.h"

namespace heddle::verify {

namespace {

bool isSyncKind(const kir::Node& n, kir::SyncKind k) {
  return n.kind == kir::NodeKind::Sync && static_cast<const kir::Sync&>(n).sync == k;
}

std::string partnerName(const std::string& n) {
  if (n.rfind("full", 0) == 0) return "empty" + n.substr(4);
  if (n.rfind("empty", 0) == 0) return "full" + n.substr(5);
  if (n.rfind("accFull", 0) == 0) return "accEmpty" + n.substr(7);  // the tcgen05 accumulator ring
  if (n.rfind("accEmpty", 0) == 0) return "accFull" + n.substr(8);
  return n;
}

}  // namespace

std::vector<MutationKind> ringMutationKinds() {
  std::vector<MutationKind> v;
  v.push_back({"flip_parity", [](const kir::Node& n) { return isSyncKind(n, kir::SyncKind::MbarWait); },
               [](const kir::Node& n) {
                 auto& s = static_cast<const kir::Sync&>(n);
                 return "flip the parity of " + kir::describe(n) + " to (" + s.parity.str() + " + 1) % 2";
               },
               [](kir::Block& p, size_t i) {
                 auto& s = static_cast<kir::Sync&>(*p.stmts[i]);
                 s.parity = (s.parity + 1) % 2;
               }});
  v.push_back({"over_arrive",
               [](const kir::Node& n) {
                 return isSyncKind(n, kir::SyncKind::MbarArrive) || isSyncKind(n, kir::SyncKind::MbarArriveExpectTx);
               },
               [](const kir::Node& n) { return "arrive twice: " + kir::describe(n) + " + mbarrier.arrive"; },
               [](kir::Block& p, size_t i) {
                 auto& s = static_cast<kir::Sync&>(*p.stmts[i]);
                 auto extra = std::make_unique<kir::Sync>(kir::SyncKind::MbarArrive);
                 extra->buf = s.buf;
                 extra->index = s.index;
                 p.stmts.insert(p.stmts.begin() + (long)i + 1, std::move(extra));
               }});
  v.push_back({"under_arrive", [](const kir::Node& n) { return isSyncKind(n, kir::SyncKind::MbarInit); },
               [](const kir::Node& n) {
                 return "expect one arrival too many: " + kir::describe(n) + " -> count " +
                        std::to_string(static_cast<const kir::Sync&>(n).count + 1);
               },
               [](kir::Block& p, size_t i) { static_cast<kir::Sync&>(*p.stmts[i]).count += 1; }});
  MutationKind cycle{"role_cycle", [](const kir::Node& n) { return isSyncKind(n, kir::SyncKind::MbarWait); },
                     [](const kir::Node& n) {
                       auto& s = static_cast<const kir::Sync&>(n);
                       std::string to = s.buf ? partnerName(s.buf->name) : "?";
                       return "wait on the partner barrier: " + kir::describe(n) + " -> " +
                              (to == (s.buf ? s.buf->name : "") ? to + "[1 - index]" : to + "[" + s.index.str() + "]");
                     },
                     [](kir::Block&, size_t) {}};
  cycle.appliesInKernel = [](const kir::Kernel& k, const kir::Node& n) {  // a partner must exist
    auto& s = static_cast<const kir::Sync&>(n);
    std::string to = s.buf ? partnerName(s.buf->name) : "";
    if (s.buf && to == s.buf->name) return s.buf->stages == 2;
    for (auto& b : k.buffers)
      if (b->name == to && s.buf && b->stages == s.buf->stages) return true;
    return false;
  };
  cycle.applyInKernel = [](kir::Kernel& k, kir::Block& p, size_t i) {
    auto& s = static_cast<kir::Sync&>(*p.stmts[i]);
    std::string to = partnerName(s.buf->name);
    if (to == s.buf->name) {
      s.index = 1 - s.index;  // a two-party token ring (ping-pong order)
      return;
    }
    for (auto& b : k.buffers)
      if (b->name == to && b->stages == s.buf->stages) s.buf = b.get();
  };
  v.push_back(cycle);
  MutationKind half{
      "own_half_tx", [](const kir::Node& n) { return isSyncKind(n, kir::SyncKind::MbarArriveExpectTx); },
      [](const kir::Node& n) { return "count only this CTA's half of the shared tile: " + kir::describe(n); },
      [](kir::Block&, size_t) {}};
  auto sharedHalf = [](const kir::Kernel& k) -> int64_t {  // the multicast tile's bytes the peer delivers
    int64_t bytes = 0;
    kir::walk(k.body, [&](const kir::Node& n) {
      if (n.kind != kir::NodeKind::TileLoad) return;
      auto& l = static_cast<const kir::TileLoad&>(n);
      if (l.multicast > 1) bytes = l.dst->bytesPerStage() / l.multicast;
    });
    return bytes;
  };
  half.appliesInKernel = [sharedHalf](const kir::Kernel& k, const kir::Node& n) {
    return k.cluster > 1 && static_cast<const kir::Sync&>(n).buf &&
           static_cast<const kir::Sync&>(n).buf->name == "full" && sharedHalf(k) > 0;
  };
  half.applyInKernel = [sharedHalf](kir::Kernel& k, kir::Block& p, size_t i) {
    static_cast<kir::Sync&>(*p.stmts[i]).arg -= (int)sharedHalf(k);
  };
  v.push_back(half);
  return v;
}

}  // namespace heddle::verify
