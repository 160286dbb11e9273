// split_barriers: GFX12 split barriers from the block barriers the sync planner placed.
#pragma once

#include <functional>
#include <set>

#include "heddle/kir/kir.h"

namespace heddle::sync {

// Each planner-placed BlockSync in `planned` becomes s_barrier_signal + s_barrier_wait in its block;
// then, pair by pair, the wait moves down and the signal up one statement at a time for as long as
// `ordered()` (every cross-thread hazard interval still holds a barrier or a signal followed by its
// wait, on the walked traces) stays true. Neither crosses another sync op, a loop or a branch, so
// every signal is followed by its own wait before any other barrier op of the block and a vmcnt
// wait placed with the barrier stays before the signal.
void splitBarriers(kir::Kernel& k, const std::set<const kir::Sync*>& planned, const std::function<bool()>& ordered);

}  // namespace heddle::sync
