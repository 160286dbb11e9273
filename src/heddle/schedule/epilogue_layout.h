// Which warp-specialized layout the automatic sm_90a schedule gives the epilogue (wgmma_auto_schedule.cpp):
//   "cooperative"    two MMA warpgroups split each tile and run the epilogue after its mainloop: the
//                    tensor cores idle while it runs (cheap for a plain store through TMA)
//   "pingpong"       two MMA warpgroups on alternating tiles, mainloops ordered by the order token: one
//                    warpgroup's epilogue (and its TMA stores) overlaps the other's mainloop
//   "epilogue_role"  one MMA warpgroup and an epilogue warpgroup fed through a shared accumulator ring:
//                    the epilogue of tile t overlaps the mainloop of tile t+1 (stores by TMA)
//   "auto"           pingpong for a fused epilogue (a bias / residual operand or an activation: element
//                    math worth hiding), cooperative for a plain (cast-only) store and, in wgmma_auto_schedule.cpp,
//                    for M <= 64 (one 64-row tile per n column: nothing to alternate) and for a bias /
//                    residual the user cached with tma_load (its ring is built for cooperative warpgroups);
//                    a k loop shared by stream-K also keeps the cooperative kernel (wgmma_auto_schedule.cpp); so does
//                    a residual read by scalar loads (epiPairs false: operands unfit for vec_e=2), with which
//                    the ping-pong kernel spills (NVRTC: 8-40 bytes at 168 registers); wgmma_auto_schedule.cpp also
//                    keeps its tile at 128 x 128 (the cooperative 128 x 256 one spills 4 bytes); and, in
//                    wgmma_auto_schedule.cpp, wherever the epilogue budget (epilogueFits below) leaves ping-pong short
#pragma once

#include <string>

#include "heddle/ir/fusion.h"

namespace heddle {

// Whether the ops after the matmul do more than cast its result (an operand or an activation).
bool fusedEpilogue(const Fusion& f);

// Whether an epilogue operand varies along both the rows and the columns of the result (a residual).
bool matrixEpilogueOperand(const Fusion& f);

// The layout for `asked` ("auto" resolved by fusedEpilogue, and by epiPairs where a residual is read);
// ScheduleError naming the option otherwise.
std::string chooseEpilogueLayout(const Fusion& f, const std::string& asked, bool epiPairs = true);

// The registers one MMA thread holds for the epilogue operands (bias, residual) of one output chunk: the
// staged epilogue writes a warpgroup's wgRows-row tile in chunks 128 bytes wide (C = 128 / outBytes columns)
// and ptxas issues a chunk's operand loads together, ahead of its math. A thread's share of a chunk: a matrix
// operand (a residual) wgRows x C / 256 column pairs, a row vector (a bias) C / 8, a column vector (a per-row
// bias) wgRows / 32 values. A pair costs 1 register read as a pair of 16-bit values (pairs: vec_e=2), 2 as a
// pair of f32, 4 read by scalar loads (each value and its address); a column-vector value 2.
int epilogueOperandRegisters(const Fusion& f, int wgRows, int outBytes, bool pairs);

// The registers an MMA thread keeps for the epilogue's addresses, indices and loop state beside its accumulators
// and the operands of a chunk (NVRTC, sm_90a ping-pong 128 x 128 at 232: 64 operand registers compile clean,
// 72-80 spill 4-16 bytes).
constexpr int kEpilogueStateRegisters = 40;

// Whether a warpgroup holding `accumulators` per thread in `budget` registers also holds a chunk's operands
// (epilogueOperandRegisters) and the epilogue's state: the automatic sm_90a schedule's epilogue budget.
bool epilogueFits(const Fusion& f, int wgRows, int accumulators, int budget, int outBytes, bool pairs);

// One phrase for describe() and explain (MatmulTiling::str): what the layout overlaps.
std::string epilogueLayoutPhrase(const std::string& layout);

}  // namespace heddle
