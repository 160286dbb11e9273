// The object Python holds for a lowered kernel: the lowering context (kernel IR, tiling, pass
// records) and the printed source. Shared by the lowering, lab and verify bindings.
#pragma once

#include <memory>
#include <string>

#include "heddle/lower/lower.h"

struct Lowered {
  std::unique_ptr<heddle::LowerContext> ctx;
  std::string source;
  const heddle::kir::Kernel& k() const { return ctx->kernel; }
};
