// HEDDLE_DEBUG: code-changing debug options for a first run on a GPU (docs/gpu-window.md).
//
//   HEDDLE_DEBUG=bounded_waits[=MS],lineinfo
//
// bounded_waits: every spin in the device runtime (mbarrier try_wait loops, split-K / stream-K grid-flag
//   waits) gives up after MS milliseconds (default 1000), prints the block, thread, warp, warpgroup, what it
//   waited on and the phase, and traps, so a protocol bug ends the launch with a report instead of hanging
//   the GPU. Compiled in as -DHEDDLE_BOUNDED_WAIT_NS=<ns>.
// lineinfo: -lineinfo, so compute-sanitizer reports name source lines.
//
// The options are NVRTC options, so they are part of the kernel cache key like every other option: a
// binary built with them is never served to a run without them, and the other way round.
#pragma once

#include <string>
#include <vector>

namespace heddle::rt {

struct DebugOptions {
  long long boundedWaitNs = 0;  // 0: waits are unbounded (the release build)
  bool lineinfo = false;
};

// Parses a HEDDLE_DEBUG value; an unknown word or a bad number is an InputError naming it and the words
// that exist.
DebugOptions parseDebugOptions(const std::string& value);

// The NVRTC options HEDDLE_DEBUG asks for (read from the environment at each call; empty when unset).
std::vector<std::string> debugNvrtcOptions();

}  // namespace heddle::rt
