// Parsing helpers shared by the bindings that build kernels from Python descriptions
// (sync_lab, verify.tiny_kernel): index expressions and loop stage names.
#pragma once

#include <pybind11/pybind11.h>

#include "heddle/kir/kir.h"

namespace heddle::bindings {

inline kir::IExpr parseExprArg(const pybind11::handle& h) {
  if (pybind11::isinstance<pybind11::int_>(h)) return kir::IExpr(h.cast<int64_t>());
  return kir::parseIExpr(h.cast<std::string>());
}

inline kir::LoopStage parseLoopStage(const std::string& s) {
  for (auto st : {kir::LoopStage::Serial, kir::LoopStage::Prologue, kir::LoopStage::Main, kir::LoopStage::Epilogue})
    if (s == kir::loopStageName(st)) return st;
  fail<HeddleError>("unknown loop stage '", s, "'; use serial, prologue, main or epilogue");
}

}  // namespace heddle::bindings
