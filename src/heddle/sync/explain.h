// Readable explanation of a kernel's sync plan (kernel.explain(), HEDDLE_DUMP=sync).
#pragma once

#include <string>

#include "heddle/kir/kir.h"

namespace heddle::sync {

// One paragraph per sync op, in program order: where it stands, what it orders (hazard kind,
// buffer, stage, producer, consumer), why this mechanism and argument, and who placed it
// ("placed by: <pass> / <builder>").
std::string explainSyncPlan(const kir::Kernel& k);

// Notes on cp.async commits in control flow that diverges within a warp (warp entanglement: a throughput
// cost, explain_entangle.cpp), one paragraph each with the cost and what to change; "" when none.
std::string explainEntanglement(const kir::Kernel& k);

// A Mermaid flowchart of the kernel's roles, the buffers between them and the mbarriers on each
// edge (explain_mermaid.cpp); without roles, the threads and their circular buffers.
std::string explainMermaid(const kir::Kernel& k);

}  // namespace heddle::sync
