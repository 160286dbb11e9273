// Hand-built kernels for the simulator's planted-bug tests (ConSan-style FAIL / OK twins): a
// program of shared-memory reads and writes with named thread mappings, loops, thread-dependent
// branches and explicit sync ops, turned into kernel IR *without* running the sync planner (the
// syncs are exactly the ones written).
//
//   program := [stmt, ...]
//   stmt    := loop var start stop stage [stmt...]      stage: serial|prologue|main|epilogue
//            | if lhs cmp rhs [then...] [else...]         cmp: < <= ==   (lhs/rhs may use tid, warp, lane)
//            | write|read buffer stage mapping [async]   (async write = cp.async into the open group)
//            | commit | barrier | wait n
#pragma once

#include <string>
#include <vector>

#include "heddle/kir/kir.h"

namespace heddle::verify {

struct TinyStmt {
  enum Op { Loop, If, Write, Read, Commit, Wait, Barrier } op = Barrier;
  std::string var;  // Loop
  kir::IExpr a, b;  // Loop: start, stop.  If: lhs, rhs.  Write/Read: a = stage
  std::string cmp;  // If
  kir::LoopStage stage = kir::LoopStage::Serial;
  std::string buffer, mapping;  // Write/Read
  bool async = false;
  int n = 0;  // Wait
  std::vector<TinyStmt> body, elseBody;
};

struct TinySpec {
  std::string name = "tiny";
  int threads = 64;
  int stages = 2;          // stages of every buffer
  int rows = 8, cols = 8;  // elements per stage
  std::vector<TinyStmt> program;
};

kir::Kernel buildTinyKernel(const TinySpec& spec);

}  // namespace heddle::verify
