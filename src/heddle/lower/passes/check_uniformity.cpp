// check_uniformity: every collective op sits in control flow uniform over the threads that execute it
// together. Changes nothing; refuses the kernel naming the branch otherwise.
//
// Before == after. The kernel IR as every earlier pass left it, e.g. a warp-specialized sm_90a kernel:
//   if (warp >= 4) {                          # 128-thread aligned: uniform per warpgroup
//     for tl ... { wgmma.fence; mma (wgmma); wgmma.commit_group; wgmma.wait_group(1); ... }
//   } else if (warp == 0 && elect.sync) {     # warp-uniform test, then one elected lane
//     mbarrier.arrive.expect_tx ...; tma ...
//   }
// The check itself (what each collective op needs, how a condition's granularity is found) lives in
// the sync room: sync/uniformity.cpp.
//
// Runs when: always.
#include "heddle/lower/lower.h"
#include "heddle/sync/plan.h"

namespace heddle::passes {

void checkUniformity(LowerContext& c) { sync::checkUniformity(c.kernel, c.target); }

}  // namespace heddle::passes
