// Sync-plan explanation: walks the kernel IR and prints each sync op with its recorded reason and
// origin (the pass and the builder that placed it).
#include "heddle/sync/explain.h"

#include <sstream>

namespace heddle::sync {

static void walkWhere(const kir::Block& b, const std::string& where, const kir::Kernel& k, std::ostringstream& os,
                      int& count) {
  for (size_t i = 0; i < b.stmts.size(); ++i) {
    auto& n = *b.stmts[i];
    if (n.kind == kir::NodeKind::For) {
      auto& f = static_cast<const kir::ForLoop&>(n);
      walkWhere(f.body,
                std::string(kir::loopStageName(f.stage)) + " loop (" + f.var + " in [" + f.start.str() + ", " +
                    f.stop.str() + "))",
                k, os, count);
      continue;
    }
    if (n.kind == kir::NodeKind::If) {  // role branches, elected threads
      auto& c = static_cast<const kir::IfThenElse&>(n);
      walkWhere(c.thenBody, "if (" + c.cond.str() + ")", k, os, count);
      walkWhere(c.elseBody, "else of if (" + c.cond.str() + ")", k, os, count);
      continue;
    }
    if (n.kind != kir::NodeKind::Sync) continue;
    auto& s = static_cast<const kir::Sync&>(n);
    if (s.reason < 0) continue;  // structural (commit groups)
    auto& r = k.syncPlan.entries[s.reason];
    std::string next = i + 1 < b.stmts.size() ? kir::describe(*b.stmts[i + 1]) : "end of block";
    os << "[" << count++ << "] " << kir::describe(s) << "   in " << where << ", before: " << next << "\n"
       << "    orders:    " << r.hazards << "\n"
       << "    buffer:    " << r.buffer << "   stage: " << r.stage << "\n";
    for (auto& p : r.pairs) os << "    hazard:    " << p << "\n";
    os << "    why:       " << r.mechanism << "\n";
    os << "    placed by: " << r.origin.str() << "\n";  // pass / builder
  }
}

std::string explainSyncPlan(const kir::Kernel& k) {
  std::ostringstream os;
  os << "sync plan for " << k.name << ": " << k.syncPlan.summary << "\n";
  if (k.tile.grouped)  // lower/build/grouped_walk.h: the walk's reads need no sync op
    os << "grouped tile walk: every thread reads the group ends offs[0..E) with plain global loads before the "
          "first tile load; offs is a read-only launch argument (written before the launch in stream order, "
          "never during it), so no sync orders these reads\n";
  if (k.tile.grouped && !k.syncPlan.roles.roles.empty())  // the warp-specialized grouped kernel
    os << "grouped roles: each CTA computes the one tile its walk found (a surplus CTA exits before the mbarrier "
          "init); every role reads the same m0, n0 and expert, so the mbarrier rings are the plain kernel's, "
          "one tile long\n";
  if (k.tile.masked)  // lower/build/grouped_walk.h: the same argument for the masked layout's counts
    os << "masked layout: every thread reads its expert's row count counts[batch_idx] with a plain global load "
          "before the first tile load; counts is a read-only launch argument (written before the launch in "
          "stream order, never during it), so no sync orders this read\n";
  int count = 0;
  walkWhere(k.body, "kernel body", k, os, count);
  if (count == 0) os << "(no sync ops: no two threads share a buffer stage)\n";
  os << explainEntanglement(k);  // throughput notes: commits under warp-divergent control flow
  return os.str();
}

}  // namespace heddle::sync
