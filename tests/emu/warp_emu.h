// Host emulator of the heddle device runtime primitives (HEDDLE_HOST_EMULATION).
//
// The heddle headers route every PTX primitive through heddle::emu::* when compiled by g++; this
// emulator defines them (warp_emu.cpp), following the PTX ISA:
//   cp.async         per CTA thread: reads src-size bytes at issue, zero-fills up to cp-size,
//                    and lands in shared memory only when that thread's cp.async.wait_group
//                    retires its commit group (so code that reads before waiting sees stale data).
//                    Checks: cp-size in {4,8,16}, .cg only with 16, src-size <= cp-size, both
//                    addresses cp-size aligned, dst inside the shared arena, every byte read
//                    inside a registered global buffer (a src-size 0 dummy must point into one).
//   sync copies      the same bounds/alignment checks, applied at once.
//   ldmatrix / mma   warp collectives. The 32 lanes of a warp run as coroutines (ucontext) in
//                    lockstep: each lane runs until it reaches a collective, and when all 32 wait
//                    at the same one (same op and qualifiers, or the emulator aborts: divergence)
//                    it is resolved from the 32 lanes' operands exactly as the ISA defines:
//                    ldmatrix: lanes 8j..8j+7 give the row addresses of matrix j; lane i gets
//                    (row i/4, cols 2(i%4), 2(i%4)+1) of each matrix, of its transpose with .trans.
//                    mma.m16n8k16: A/B/C fragments per the ISA figures, D = A*B + C in double,
//                    rounded to f32. ldmatrix rows must be 16-byte aligned and inside the arena;
//                    each phase (8 rows of one matrix) that maps two rows to the same 16-byte
//                    bank group counts as a bank conflict.
// Stats (write counts per shared byte, conflicts, op counts) let the harness prove coverage.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

namespace heddle {
namespace emu {

struct Stats {
  long cp_async[17] = {};     // by cp-size
  long cp_async_cg = 0;
  long sync_copies = 0, zero_fills = 0;
  long ldmatrix = 0, ldmatrix_trans = 0, ldmatrix_x2 = 0, ldmatrix_conflicts = 0;
  long mma = 0, mma_bf16 = 0, block_syncs = 0, commits = 0, waits = 0;
  long store_conflicts = 0;
};

// Arena / buffers.
void set_shared_arena(char* base, std::size_t bytes);  // base must be 128-byte aligned
void add_global(const void* base, std::size_t bytes);
void clear_globals();
// Current CTA thread id for per-thread operations (cp.async queues, copies).
void set_thread(int tid, int nthreads);
// Per shared byte: how many times it was written (cp.async landings, sync stores).
unsigned writes_at(const void* p);
void reset_writes(const void* p, std::size_t bytes);
// Number of cp.async copies issued and not yet landed, over all threads.
long pending_copies();
// Check the 16-byte cp.async stores logged since the last call: for each per-thread issue index,
// the stores of 8 consecutive threads (a quarter warp) must hit 8 distinct bank groups. (Sync
// copies use the same chunk mapping but are not logged: their edge chunks are split into
// element stores, which would misalign the per-thread issue index.) Adds the
// conflicts found to stats().store_conflicts and clears the log.
void check_store_conflicts();
Stats& stats();
void reset_stats();

// Runs body(lane) for lanes 0..31 of one warp, in lockstep at collectives.
void run_warp(const std::function<void(int lane)>& body);

[[noreturn]] void die(const char* fmt, ...);

}  // namespace emu
}  // namespace heddle
