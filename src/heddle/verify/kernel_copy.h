// A deep copy of a kernel: its own buffers, its own node tree (kir::clone), every buffer pointer
// of the copy redirected to the copy's buffers. Used to build mutants without touching the original.
#pragma once

#include "heddle/kir/kir.h"

namespace heddle::verify {

kir::Kernel copyKernel(const kir::Kernel& k);

}  // namespace heddle::verify
