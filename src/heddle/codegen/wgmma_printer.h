// CUDA spellings of the Hopper kernel IR (heddle_sm90.cuh): mbarrier arrays, TMA tile loads and
// stores, persistent-tile lets, the staged epilogue of warp-specialized kernels, and every sm_90a
// sync op. The C-like printer asks printNode first; the CUDA printer asks syncOp for sync kinds it
// does not know. Printing makes no decisions: everything printed is in the kernel IR.
#pragma once

#include <ostream>
#include <string>

#include "heddle/kir/kir.h"

namespace heddle::wgmmaprint {

// Prints `n` at indentation `ind` and returns true when it is a Hopper node; false otherwise.
bool printNode(std::ostream& os, const kir::Kernel& k, const kir::Node& n, const std::string& ind);
// The statement for a Hopper sync op ("" for other kinds).
std::string syncOp(const kir::Kernel& k, const kir::Sync& s);
// heddle::MmaSm90<...> for a wgmma kernel.
std::string mmaType(const kir::Kernel& k);

}  // namespace heddle::wgmmaprint
