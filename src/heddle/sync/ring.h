// The mbarrier ring: the one protocol every producer -> consumer edge through a circular buffer of
// shared memory uses (warp-specialized roles, the TMA pipeline without roles, the accumulator and
// epilogue-operand rings, the tensor-memory accumulator ring), and the one door through which the
// builders that place syncs by construction register their reasons in the kernel's SyncPlan.
//
// Ring of s stages, prefetch p (the consumer's item i releases the slot of item i + p + 1 - s),
// `keep` = s - p - 1 wgmma groups left in flight by an asynchronous consumer:
//   full[s]   count fullCount (1 for a TMA producer: arrive.expect_tx + complete_tx; the producing
//             threads for a generic producer)
//   empty[s]  count emptyCount (the consuming threads)
//   producer, item j:  wait empty[j % s] parity (j / s) % 2      (WAR; passes at once for j < p+1:
//                      the consumers pre-arrived on stages [0, p+1))
//                      arrive.expect_tx full[j % s] bytes; TMA ...      or   writes; arrive full[j % s]
//   consumer, item i:  wait full[i % s] parity (i / s) % 2       (RAW)
//                      read (wgmma: commit, wait_group(keep)); arrive empty[(i + p + 1) % s]
// Phase q of empty[st] completes with the consumers' arrivals for item st - p - 1 + q*s (the
// pre-arrive for q = 0 when st < p + 1), which is what the producer of item st + q*s needs: the
// reads of item st + (q-1)*s are retired, because that item is older than i - keep.
// A cluster of 2 (passes/cluster_multicast.cpp) doubles the empty count and adds, after each consumer
// arrive, the remote arrive on the peer CTA's empty barrier (remoteRelease).
#pragma once

#include <memory>
#include <string>

#include "heddle/kir/kir.h"

namespace heddle::sync {

using kir::IExpr;

// What a sync op orders and why; becomes its kir::SyncReason.
struct Why {
  std::string hazards;  // "RAW sA, sB (tma -> wgmma)"
  std::string producer, consumer, buffer, stage;
  std::string mechanism;  // why this op and argument
};

// The one function that appends a sync-plan entry for a sync placed by construction (the mbarrier ring
// and the role-pipeline builders); returns its index (renumbered in program order by finishPlan).
int addPlanEntry(kir::Kernel& k, kir::SyncReason r);
int addPlanEntry(kir::Kernel& k, const Why& why);

// A sync op with its reason registered in k.syncPlan.
std::unique_ptr<kir::Sync> makeSync(kir::Kernel& k, kir::SyncKind kind, const Why& why, int arg = 0);
// An mbarrier op on bar[index] (wait parity `parity`).
std::unique_ptr<kir::Sync> makeMbar(kir::Kernel& k, kir::SyncKind kind, kir::Buffer* bar, IExpr index, const Why& why,
                                    int arg = 0, IExpr parity = 0);

// An array of `count` mbarriers (8 bytes each) in shared memory.
kir::Buffer* addMbarriers(kir::Kernel& k, const std::string& name, int count);

// What a pipeline edge needs from its ring.
struct RingSpec {
  std::string label;                // "sA, sB" for messages
  std::string fullName = "full";    // the mbarrier arrays
  std::string emptyName = "empty";  // "": no empty barriers (the consumer's WAR is ordered otherwise)
  int stages = 2, prefetch = 1, keep = 0;
  int fullCount = 1, emptyCount = 1;  // arrivals per phase: producing / consuming threads
  int txBytes = 0;                    // > 0: TMA producer (bytes per stage)
  std::string producer, consumer;     // role names for reasons
};

struct Ring {
  std::string label;
  kir::Buffer *full = nullptr, *empty = nullptr;
  int stages = 2, prefetch = 1, keep = 0;
  int fullCount = 1, emptyCount = 1;
  int txBytes = 0;
  std::string producer, consumer;

  // The ring of `spec` with its barrier arrays added to k (full, then empty).
  static Ring create(kir::Kernel& k, const RingSpec& spec);

  // init every barrier of the ring (one thread), with counts
  void init(kir::Kernel& k, kir::Block& b) const;
  std::unique_ptr<kir::Sync> producerWait(kir::Kernel& k, IExpr j) const;
  std::unique_ptr<kir::Sync> producerExpectTx(kir::Kernel& k, IExpr j) const;
  std::unique_ptr<kir::Sync> producerArrive(kir::Kernel& k, IExpr j) const;
  std::unique_ptr<kir::Sync> consumerWait(kir::Kernel& k, IExpr i) const;
  std::unique_ptr<kir::Sync> consumerRelease(kir::Kernel& k, IExpr i) const;
  // for st in [0, p+1): arrive empty[st]   (the consumers, before their loop)
  void preArrive(kir::Kernel& k, kir::Block& b, const std::string& loopVar) const;

  // The reason of a ring op on stage `stage`: RAW (producer -> consumer) or WAR (consumer -> producer),
  // ordering `from` before `to`.
  Why edgeWhy(bool raw, const std::string& from, const std::string& to, IExpr stage) const;
};

// Cluster of 2: after the consumer arrive `local` on `empty`, the arrive on the peer CTA's empty[same index]
// (mapa + mbarrier.arrive.release.cluster), since the peer multicasts its half of `shared` into this slot.
std::unique_ptr<kir::Sync> remoteRelease(kir::Kernel& k, const kir::Sync& local, kir::Buffer* empty,
                                         const std::string& shared);
// A copy of sync `s`'s plan entry (for a clone of `s`); returns its index.
int copyPlanEntry(kir::Kernel& k, const kir::Sync& s);

// Renumbers the sync reasons in program order, sets the plan summary and marks the kernel as
// planned (insert_syncs then leaves it alone).
void finishPlan(kir::Kernel& k, const std::string& summary);

}  // namespace heddle::sync
