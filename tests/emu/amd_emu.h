// Host emulator of the AMD device runtime primitives (heddle_hip_copy.cuh, heddle_hip_mma.cuh under
// HEDDLE_HOST_EMULATION), following the CDNA2/3 and RDNA4 ISA:
//   LDS DMA          buffer_load_dword ... lds: lane l of the instruction writes its dword to
//                    M0 + 4*l; M0 must be the same for every lane of the wave in one instruction
//                    (checked per (wave, copy round)); out-of-range reads give zero. The data lands
//                    only when a s_waitcnt vmcnt of the issuing thread retires the op (per thread,
//                    oldest first), so code reading LDS before its wait sees stale bytes.
//   sync copies      bounds-checked global reads and LDS writes, applied at once.
//   MFMA / WMMA      wave collectives: the lanes of a wave (64 for v_mfma_f32_16x16x16*, 32 for
//                    v_wmma_f32_16x16x16_*_w32) run as coroutines in lockstep; when all reach the
//                    same collective it is resolved from every lane's registers with the layout tables
//                    below (AMD matrix instruction calculator), which must be bijections; a lane that
//                    finishes or reaches another op first is divergence (an error).
// Every error prints "EMULATION ERROR: ..." and exits with status 2.
#pragma once
#include <cstddef>
#include <functional>

namespace heddle {
namespace emu_amd {

struct Stats {
  long dma = 0, dma_zero = 0, sync_copies = 0, zero_fills = 0, waits = 0;
  long mfma = 0, wmma = 0, block_syncs = 0, signals = 0, barrier_waits = 0;
};

void set_shared_arena(char* base, std::size_t bytes);
void add_global(const void* base, std::size_t bytes);
void clear_globals();
void set_thread(int tid, int nthreads);
unsigned writes_at(const void* p);      // LDS writes (landed DMA dwords, sync stores) per byte
unsigned dma_writes_at(const void* p);  // the landed DMA dwords among them
void reset_writes();
long pending();                     // DMA ops issued and not retired, all threads
void new_copy_phase();              // forget the (wave, round) -> M0 records of the previous copies
Stats& stats();
void run_wave(int lanes, const std::function<void(int lane)>& body);

// Layout tables: register element -> matrix entry, per lane.
//   MFMA 16x16x16 (wave64): A elem e of lane l is A[i][k], B elem e is B[k][j], D reg r is D[i][j].
void mfma_a(int lane, int e, int& i, int& k);
void mfma_b(int lane, int e, int& k, int& j);
void mfma_d(int lane, int r, int& i, int& j);
//   WMMA 16x16x16 gfx12 (wave32): 8 elements / 8 accumulators per lane.
void wmma_a(int lane, int e, int& i, int& k);
void wmma_b(int lane, int e, int& k, int& j);
void wmma_d(int lane, int r, int& i, int& j);

[[noreturn]] void die(const char* fmt, ...);

}  // namespace emu_amd
}  // namespace heddle
