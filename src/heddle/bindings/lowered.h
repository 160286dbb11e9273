// The object Python holds for a lowered kernel: the lowering context (kernel IR, tiling, pass
// records) and the printed source (runtime/build.h). Shared by the lowering, lab and verify bindings.
#pragma once

#include "heddle/runtime/build.h"

using Lowered = heddle::rt::LoweredKernel;
