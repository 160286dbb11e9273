// The runtime's front door: Fusion + target + options -> a compiled kernel, in the pipeline's order --
// lower (lower/lower.h: the pass list) -> print (codegen/printer.h) -> compile -> cache (the target's
// RuntimeBackend, backend.h). The Python face calls the two halves (lowerKernel, then compileLowered)
// so that what HEDDLE_DUMP shows of the lowering comes out before a compile that fails; build() is both.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "heddle/lower/lower.h"
#include "heddle/runtime/backend.h"

namespace heddle::rt {

// A lowered kernel: the lowering context (kernel IR, tiling, pass records) and the printed source.
struct LoweredKernel {
  std::unique_ptr<LowerContext> ctx;
  std::string source;
  const kir::Kernel& k() const { return ctx->kernel; }
  const RuntimeBackend& backend() const { return backendFor(ctx->target); }
};

// What a compile of a lowered kernel takes beside it.
struct BuildOptions {
  std::vector<std::string> extraOptions;  // passed to the compiler after heddle's own
  std::optional<bool> isolate;            // unset: $HEDDLE_RTC_ISOLATE
  bool useCache = true;
  bool wantPtx = true;  // CUDA: keep the PTX (a code object has none)
  // false: the result is held for launching and keeps no PTX unless asked (KernelCache::forLaunch)
  bool keepPtx = true;
};

// lower -> print.
std::shared_ptr<LoweredKernel> lowerKernel(const Fusion& f, const TargetInfo& t, const LowerOptions& o);
// compile -> cache, by the target's backend; the program is named after the kernel.
CachedKernel compileLowered(const LoweredKernel& l, const BuildOptions& o);

struct BuiltKernel {
  std::shared_ptr<LoweredKernel> lowered;
  CachedKernel binary;
};
// All four steps.
BuiltKernel build(const Fusion& f, const TargetInfo& t, const LowerOptions& lo, const BuildOptions& bo);

}  // namespace heddle::rt
