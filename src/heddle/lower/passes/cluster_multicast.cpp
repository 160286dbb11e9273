// cluster_multicast: cluster(2, along) on the sm_90a warp-specialized cooperative kernel. The two CTAs of a
// cluster (ranks crank = bid % 2 of cluster cid = bid / 2) compute neighbouring tiles along m (they share
// the B tile) or along n (the A tile): each loads half of the shared tile and multicasts it to both, so
// the shared operand is read from L2 once per pair of tiles (docs/hopper.md "Clusters of 2 with TMA
// multicast"; the protocol in docs/sync-plan.md "Clusters of 2").
//
// Before (warp_specialize, load -> mma ring full[s] / empty[s]):
//   let bid; if (tid == 0) { init full[st] (1), empty[st] (T mma threads) }; block_sync
//   load role, per tile tl: let tile = bid + tl * num_ctas, m0, n0 (grouped order over nM x nN)
//     wait empty[g%s]; expect_tx full[g%s] (A + B bytes); tma A; tma B
//   mma role: pre-arrive empty[0..p]; per tile: wait full; wgmma ...; arrive empty[(g+p+1)%s]
// After (along m; along n swaps the roles of A and B, of m and n):
//   let bid, cid = bid / 2, crank = bid % 2, ncl = num_ctas / 2
//   if (tid == 0) { init full[st] (1), empty[st] (2 T: both CTAs' consumers); fence.mbarrier_init.cluster }
//   barrier.cluster                                       # the peer's inits visible before any remote op
//   every role, per tile tl < ceil(pairs - cid, ncl): let tile = cid + tl * ncl (pair index, grouped
//     order over ceil(nM/2) x nN pair rows), m0 = (2 * mp + crank) * bm, n0 = np * bn
//     load: wait empty[g%s]; expect_tx full[g%s] (A + B bytes: own A, own half of B, the peer's half)
//           tma A; tma B rows [crank * R/2, +R/2) multicast to both CTAs
//     mma: pre-arrive and release: arrive empty[...] and, mapa, the peer's empty[...]
//          if (m0 < M) { the k loop } else { for kt: wait full[g%s]; arrive empty[...] (own, the peer's) }
//   barrier.cluster                                       # before exit: no remote arrive / multicast in flight
// With an odd tile count along the cluster axis the last pair row's partner tiles lie beyond M (N): their
// CTA still walks them in step -- loads its own operand (all out of bounds: zero-filled, every byte
// counted), its half of the shared tile, waits for each item and releases it, computing nothing (no
// wgmma), and its epilogue's bounds store nothing; skipping the tile would leave the peer waiting for the
// half it multicasts.
//
// Runs when: cluster(2, along) schedules (the body still refuses a kernel without the cooperative ring).
#include <sstream>

#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes {

using namespace build;

namespace {

struct Rewriter {
  kir::Kernel& k;
  const MatmulTiling& t;
  kir::Buffer *shared = nullptr, *full = nullptr, *empty = nullptr;
  bool alongM = true;
  int inits = 0, remotes = 0, multicasts = 0, skips = 0;
  std::string map;  // the shared operand's tensor map

  // the paired walk: pair `tile` in grouped order over the pair grid, then this rank's tile of the pair
  IExpr pairRows() const { return alongM ? ceilDiv(ceilDiv(var("M"), t.bm), 2) : ceilDiv(var("M"), t.bm); }
  IExpr pairCols() const { return alongM ? ceilDiv(var("N"), t.bn) : ceilDiv(ceilDiv(var("N"), t.bn), 2); }
  IExpr pairs() const { return pairRows() * pairCols(); }
  std::unique_ptr<kir::Let> let(const std::string& v) const {
    const IExpr G =
        alongM ? std::max(1, t.rolePipeline.groupM / 2) : t.rolePipeline.groupM;  // groupM m-tiles per group
    IExpr tile = var("tile"), per = G * pairCols(), first = (tile / per) * G;
    IExpr gsz = min(pairRows() - first, G);
    IExpr mi = first + (tile % per) % gsz, ni = (tile % per) / gsz;
    if (v == "tile") return std::make_unique<kir::Let>(v, var("cid") + var("tl") * var("ncl"));
    if (v == "m0") return std::make_unique<kir::Let>(v, (alongM ? mi * 2 + var("crank") : mi) * t.bm);
    return std::make_unique<kir::Let>(v, (alongM ? ni : ni * 2 + var("crank")) * t.bn);
  }

  std::unique_ptr<kir::Sync> remoteRelease(const kir::Sync& local) {
    ++remotes;
    return sync::remoteRelease(k, local, empty, shared->name);
  }

  static bool hasMma(const kir::Block& b) {
    for (auto& s : b.stmts)
      if (s->kind == kir::NodeKind::MmaStep) return true;
    return false;
  }

  // The MMA role's k loop -> if (this rank's tile exists) { the k loop } else { per item: wait full, release
  // (own and the peer's) }: an absent partner tile computes nothing, but takes every item of its walk off
  // the ring once it landed (the previous tile's wgmma groups are retired: its k loop ends with wait_group(0))
  kir::NodePtr skipAbsent(kir::NodePtr loop) {
    auto& f = static_cast<kir::ForLoop&>(*loop);
    auto idle = forLoop(f.var, f.start, f.stop);
    idle->cbStages = f.cbStages;
    idle->cbPrefetch = f.cbPrefetch;
    for (auto& st : f.body.stmts) {
      if (st->kind != kir::NodeKind::Sync) continue;
      auto& sy = static_cast<kir::Sync&>(*st);
      const bool keep =
          (sy.sync == kir::SyncKind::MbarWait && sy.buf == full) ||
          ((sy.sync == kir::SyncKind::MbarArrive || sy.sync == kir::SyncKind::MbarArriveRemote) && sy.buf == empty);
      if (!keep) continue;
      auto c = kir::clone(sy, {});
      auto& cs = static_cast<kir::Sync&>(*c);
      cs.reason = sync::copyPlanEntry(k, sy);
      k.syncPlan.entries.back().origin = {"", "mbarrier ring (idle partner copy)"};  // pass: stamped cluster_multicast
      amend(cs, std::string("; the absent partner tile (") + (alongM ? "m0 >= M" : "n0 >= N") +
                    "): no wgmma reads the slot, it is released once its data landed");
      idle->body.stmts.push_back(std::move(c));
    }
    auto w = when(alongM ? var("m0") < var("M") : var("n0") < var("N"));
    w->thenBody.stmts.push_back(std::move(loop));
    w->elseBody.stmts.push_back(std::move(idle));
    ++skips;
    return w;
  }

  void amend(const kir::Sync& s, const std::string& more) { k.syncPlan.entries.at(s.reason).mechanism += more; }

  void rewrite(kir::Block& b, bool top) {
    for (size_t i = 0; i < b.stmts.size(); ++i) {
      kir::Node& n = *b.stmts[i];
      switch (n.kind) {
        case kir::NodeKind::For: {
          auto& f = static_cast<kir::ForLoop&>(n);
          if (f.var == "tl") f.stop = ceilDiv(pairs() - var("cid"), var("ncl"));
          rewrite(f.body, false);
          if (f.var == "kt" && hasMma(f.body)) b.stmts[i] = skipAbsent(std::move(b.stmts[i]));
          break;
        }
        case kir::NodeKind::If: {
          auto& x = static_cast<kir::IfThenElse&>(n);
          rewrite(x.thenBody, false);
          rewrite(x.elseBody, false);
          bool initBlock = false;
          for (auto& s : x.thenBody.stmts)
            initBlock |= s->kind == kir::NodeKind::Sync && static_cast<kir::Sync&>(*s).sync == kir::SyncKind::MbarInit;
          if (initBlock && top)
            x.thenBody.stmts.push_back(makeSync(
                k, kir::SyncKind::FenceMbarrierInit,
                {"init " + full->name + ", " + empty->name + " (cluster)", "", "", full->name + ", " + empty->name, "",
                 "fence.mbarrier_init.release.cluster: the peer CTA arrives remotely on " + empty->name +
                     " and its multicast completes bytes on " + full->name +
                     "; the inits must be visible at cluster "
                     "scope before the cluster barrier releases it"}));
          break;
        }
        case kir::NodeKind::Let: {
          auto& l = static_cast<kir::Let&>(n);
          if (l.var == "tile" && !l.value.uses("tl"))
            fail<HeddleError>("cluster_multicast: the persistent walk's tile index ", l.value.str(), " is not per tl");
          if (l.var == "tile" || l.var == "m0" || l.var == "n0") b.stmts[i] = let(l.var);
          break;
        }
        case kir::NodeKind::TileLoad: {
          auto& l = static_cast<kir::TileLoad&>(n);
          if (l.dst == shared && l.kind == LoadKind::TmaLoad) {
            l.multicast = 2;
            map = l.tensorMap;
            ++multicasts;
          }
          break;
        }
        case kir::NodeKind::Sync: {
          auto& s = static_cast<kir::Sync&>(n);
          if (s.sync == kir::SyncKind::MbarInit && s.buf == empty) {
            s.count *= 2;
            ++inits;
            amend(s,
                  "; doubled for the cluster: the consumers of both CTAs release each slot (the peer's through "
                  "remote arrivals), since both producers multicast into it");
          } else if (s.sync == kir::SyncKind::MbarArriveExpectTx && s.buf == full) {
            amend(s, "; with the cluster: this CTA's own " + std::string(alongM ? "A" : "B") + " tile, its half of " +
                         shared->name + " and the peer's multicast half (the whole shared tile's bytes)");
          } else if (s.sync == kir::SyncKind::MbarArrive && s.buf == empty) {
            b.stmts.insert(b.stmts.begin() + (long)i + 1, remoteRelease(s));
            ++i;
          } else if (s.sync == kir::SyncKind::BlockSync && top) {
            b.stmts[i] = makeSync(
                k, kir::SyncKind::ClusterSync,
                {"init mbarriers (cluster)", "", "", "", "",
                 "barrier.cluster (arrive.release + wait.acquire, every thread of both CTAs): thread 0's fenced "
                 "mbarrier.init of each CTA is visible to its own roles and to the peer's remote arrivals and "
                 "multicast before either starts (the block barrier it replaces did the first half)"});
          }
          break;
        }
        default: break;
      }
    }
  }
};

kir::Buffer* byName(kir::Kernel& k, const std::string& name) {
  for (auto& b : k.buffers)
    if (b->name == name) return b.get();
  fail<HeddleError>("cluster_multicast: no buffer ", name, " in ", k.name);
}

}  // namespace

void clusterMulticast(LowerContext& c) {
  auto& t = c.tiling;
  auto& h = t.rolePipeline;
  auto& k = c.kernel;
  requireWhen(c, "cluster_multicast");
  if (!h.enabled || !h.warpSpecialized || h.tcgen05 || !h.coop)
    fail<HeddleError>("cluster_multicast: cluster(", h.cluster, ") reached a kernel without the cooperative ring");
  Rewriter r{k, t};
  r.alongM = h.clusterAlong == 'm';
  r.shared = byName(k, r.alongM ? "sB" : "sA");
  r.full = byName(k, "full");
  r.empty = byName(k, "empty");
  k.cluster = h.cluster;
  k.clusterAlong = h.clusterAlong;

  size_t at = 0;  // the cluster coordinates, right after `let bid`
  while (at < k.body.stmts.size() &&
         !(k.body.stmts[at]->kind == kir::NodeKind::Let && static_cast<kir::Let&>(*k.body.stmts[at]).var == "bid"))
    ++at;
  if (at == k.body.stmts.size()) fail<HeddleError>("cluster_multicast: no `let bid` in ", k.name);
  std::vector<kir::NodePtr> lets;
  lets.push_back(std::make_unique<kir::Let>("cid", var("bid") / 2));
  lets.push_back(std::make_unique<kir::Let>("crank", var("bid") % 2));
  lets.push_back(std::make_unique<kir::Let>("ncl", var("num_ctas") / 2));
  k.body.stmts.insert(k.body.stmts.begin() + (long)at + 1, std::make_move_iterator(lets.begin()),
                      std::make_move_iterator(lets.end()));
  r.rewrite(k.body, true);
  if (!r.inits || !r.remotes || !r.multicasts || r.skips != 1)
    fail<HeddleError>("cluster_multicast: the ring of ", k.name, " was not found (", r.inits, " empty inits, ",
                      r.remotes, " releases, ", r.multicasts, " loads of ", r.shared->name, ", ", r.skips,
                      " MMA k loops)");
  k.body.stmts.push_back(makeSync(
      k, kir::SyncKind::ClusterSync,
      {"exit (cluster)", "the peer's remote arrivals on this CTA's " + r.empty->name, "this CTA's exit", r.empty->name,
       "",
       "barrier.cluster before exit: the peer's consumers arrive on this CTA's " + r.empty->name +
           " up to their "
           "last item; a CTA that exits first would have its shared memory (and barriers) released under them"}));
  for (auto& m : k.tensorMaps)  // the shared operand's map: a box of half the tile's stored rows
    if (m.param == r.map) m.boxRows /= 2;
  k.name += std::string("_cl2") + h.clusterAlong;
  std::ostringstream sum;
  sum << "; cluster of 2 along " << h.clusterAlong << ": " << r.shared->name << " multicast (each CTA loads half), "
      << r.empty->name
      << " counts both CTAs' consumers (remote arrivals), cluster barriers after the inits and "
         "before exit";
  k.syncPlan.summary += sum.str();
  for (auto& e : k.syncPlan.roles.edges)
    if (e.empty == r.empty->name) e.release += "; and the peer CTA's " + r.empty->name + " (mapa, remote arrive)";
}

}  // namespace heddle::passes
