// CUDA spellings of the Blackwell kernel IR (heddle_sm100.cuh): the tensor-memory slot, tcgen05.mma
// steps, the epilogue read from tensor memory, and the tcgen05 sync ops. The C-like printer asks
// printNode first (before the Hopper printer, whose TMA, mbarrier and setmaxnreg spellings this kernel
// shares); the CUDA printer asks syncOp for sync kinds it does not know. Printing makes no decisions.
#pragma once

#include <ostream>
#include <string>

#include "heddle/kir/kir.h"

namespace heddle::tcgen05print {

// Prints `n` at indentation `ind` and returns true when it is a Blackwell node; false otherwise.
bool printNode(std::ostream& os, const kir::Kernel& k, const kir::Node& n, const std::string& ind);
// The statement for a tcgen05 sync op ("" for other kinds).
std::string syncOp(const kir::Kernel& k, const kir::Sync& s);
// heddle::MmaSm100<...> for a tcgen05 kernel.
std::string mmaType(const kir::Kernel& k);

}  // namespace heddle::tcgen05print
