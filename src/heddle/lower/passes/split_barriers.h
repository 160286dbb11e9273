// split_barriers: GFX12 split barriers from the block barriers the sync planner placed.
#pragma once

#include <map>
#include <set>
#include <string>

#include "heddle/kir/kir.h"

namespace heddle::passes {

// Each planner-placed BlockSync in `served` (with the names of the buffers its hazards touch)
// becomes s_barrier_signal + s_barrier_wait in its block: the signal moves up past statements that
// touch none of those buffers (so it follows the last producer access), the wait moves down the
// same way (so it precedes the first consumer access). Neither crosses another sync op or a loop /
// branch, so every signal is followed by its own wait before any other barrier op of the block.
void splitBarriers(kir::Kernel& k, const std::map<const kir::Sync*, std::set<std::string>>& served);

}  // namespace heddle::passes
