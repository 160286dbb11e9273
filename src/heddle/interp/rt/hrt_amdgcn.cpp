// heddle/interp/rt/hrt_amdgcn.cpp -- the AMD primitives the HIP device headers call under HEDDLE_INTERPRET
// (hrt_api.h), with their ordering semantics from the CDNA3 and RDNA4 ISA texts:
//
//   s_barrier / s_barrier_signal -1 / s_barrier_wait -1: one HwBarrier object with phases. A signal
//     joins the thread's clock at its last workgroup release fence into the phase; the phase completes
//     once every thread has signalled it or has ended; a wait blocks until the phase the thread
//     signalled has completed, and its next workgroup acquire fence acquires what that phase published
//     (execution barriers: the fences order memory, hrt_workgroup_fences.cpp). s_barrier is signal + wait. A wait with no signal of its own waits for
//     a phase that needs its own signal: a deadlock report. A second signal in one phase is an error.
//   named barriers 1..16 and the NULL barrier 0 (gfx1250): hrt_barrier_objects.cpp.
//   buffer_load_dword ... lds (LDS DMA): each lane's dword is read at issue and lands at M0 + offset +
//     4*lane when the scheduler decides (random schedule), at the latest at the s_waitcnt that retires
//     it; its LDS write is the wave's vector-memory agent's, ordered only by that wait.
//   s_waitcnt vmcnt(N) / s_wait_loadcnt N: a wave instruction (every lane arrives): the wave's ops
//     1..issued-N are complete (vector-memory loads return in issue order). The lanes must agree on
//     the number of ops (EXEC-masked DMA is refused, see docs/verification.md) and, per op, on the
//     scalar operands M0 and the buffer resource. lgkmcnt/expcnt: LDS and export ops are synchronous
//     here, so those fields wait for nothing.
//   v_mfma_* (wave64) / v_wmma_* (GFX12 wave32): wave collectives over hrt_amdgcn.h's layouts.
#include <algorithm>
#include <cstring>

#include "heddle/interp/rt/hrt_amdgcn.h"
#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

namespace {

std::string bar_state(const HwBarrier& b) {
  const Cta& c = cta();
  int live = 0;
  for (auto& f : c.fibers) live += b.member[f->tid] && f->st != FState::Done;
  return std::to_string(b.arrived) + " of " + std::to_string(live) + " live member threads signalled phase " +
         std::to_string(b.phase);
}

void signal(HwBarrier& b, const char* what, const void* pc) {
  Cta& c = cta();
  Fiber& f = me();
  if (!b.member[f.tid])
    abort_cta(std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + ", which is not a member of barrier " +
              std::to_string(b.id));
  if (b.sig[f.tid] == (int64_t)b.phase)
    abort_cta(std::string(what) + " at " + pcs(pc) + " by " + who(f.tid) + ": a second signal of barrier " +
              std::to_string(b.id) + " in phase " + std::to_string(b.phase) + " (first at " + pcs(b.pc) +
              "), with no s_barrier_wait between");
  if (b.arrived == 0) {
    b.join.assign(c.nagents(), 0);
    b.xjoin.assign(c.nagents(), 0);
    b.pc = pc;
  }
  amd_arrive(b.join, b.xjoin);  // publishes what the thread's last workgroup release fence did (hrt_workgroup_fences.cpp)
  ++f.vc[f.tid];
  b.sig[f.tid] = (int64_t)b.phase;
  ++b.arrived;
  hw_barrier_try_complete(b);
}

void wait(HwBarrier& b, const char* what, const void* pc) {
  Fiber& f = me();
  const bool own = b.sig[f.tid] >= 0;
  const uint64_t target = own ? (uint64_t)b.sig[f.tid] : b.phase;
  std::string desc = std::string(what) + (own ? "" : " without a s_barrier_signal of its own");
  block_until([&b, target] {
    hw_barrier_try_complete(b);
    return b.phase > target;
  }, desc + " (" + bar_state(b) + ")", pc);
  amd_wait(b.done, b.xdone, pc);  // visible at the thread's next workgroup acquire fence
  b.sig[f.tid] = -1;
}

}  // namespace

void hw_barrier_try_complete(HwBarrier& b) {
  Cta& c = cta();
  if (b.arrived == 0 || b.arrived + c.ndone < b.expected) return;
  for (auto& f : c.fibers)
    if (b.member[f->tid] && f->st != FState::Done && b.sig[f->tid] != (int64_t)b.phase) return;
  b.done = b.join;
  b.xdone = b.xjoin;
  ++b.phase;
  b.arrived = 0;
  c.flipped = !c.flipped;  // the next round runs the threads in the other order
}

void s_barrier() {
  const void* pc = __builtin_return_address(0);
  tick();
  HwBarrier& b = cta().hw_bar;
  signal(b, "s_barrier", pc);
  wait(b, "s_barrier", pc);
}

void s_barrier_signal(int id) {
  const void* pc = __builtin_return_address(0);
  tick();
  if (id != -1) (void)named_arrive(id, "s_barrier_signal", pc);
  else signal(cta().hw_bar, "s_barrier_signal -1", pc);
}

void s_barrier_wait(int id) {
  const void* pc = __builtin_return_address(0);
  tick();
  if (id != -1) named_wait(id, pc);
  else wait(cta().hw_bar, "s_barrier_wait -1", pc);
}

int32_t v_readfirstlane_b32(int32_t v) {
  tick();
  return v;
}

// ---- LDS DMA and the vector-memory counter -------------------------------------------------------

void buffer_load_dword_lds(const int32_t rsrc[4], uint32_t m0, int size, int voffset, int soffset, int offset, int aux) {
  Cta& c = cta();
  Fiber& f = me();
  const void* pc = __builtin_return_address(0);
  tick();
  if (size != 4 || aux != 0)
    abort_cta("buffer_load ... lds at " + pcs(pc) + " with size " + std::to_string(size) + ", aux " +
              std::to_string(aux) + ": the interpreter models the dword form (size 4, aux 0)");
  const amdgcn::BufferRsrc b = amdgcn::decode_rsrc(rsrc);
  if (b.stride != 0)
    abort_cta("buffer_load ... lds at " + pcs(pc) + ": buffer resource with stride " + std::to_string(b.stride) +
              " (the interpreter models raw buffers, stride 0)");
  const int lane = f.tid % c.wave;
  const uint32_t dst = m0 + (uint32_t)offset + 4u * (uint32_t)lane;
  if (dst % 4) abort_cta("buffer_load ... lds at " + pcs(pc) + ": LDS address " + std::to_string(dst) + " not dword aligned");
  PendingDma p{f.tid, f.vm_issued + 1, dst, m0, {rsrc[0], rsrc[1], rsrc[2], rsrc[3]}, {0, 0, 0, 0}, pc, false};
  uint64_t a = 0;
  if (amdgcn::raw_buffer_address(b, (uint32_t)voffset, (uint32_t)soffset, (uint32_t)offset, 4, &a)) {
    if (region_of(a, 4) < 0)
      abort_cta("buffer_load ... lds at " + pcs(pc) + " by " + who(f.tid) + " reads 4 bytes at " + hex(a) +
                ", outside every tensor of the launch (buffer base " + hex(b.base) + ", voffset " +
                std::to_string((uint32_t)voffset) + ")");
    std::memcpy(p.data, reinterpret_cast<const void*>(a), 4);
  }
  ++f.vm_issued;
  smem_access(dst, 4, true, c.agent_vm(f.tid), p.op, f.tid, f.vc, pc, false, "LDS DMA (buffer_load_dword lds)");
  c.dmas.push_back(p);
}

static void land_dma(PendingDma& p) {
  std::memcpy(run().smem + p.dst, p.data, 4);
  p.landed = true;
}

// the wave's ops 1..issued-n are complete (vmcnt / loadcnt = n)
static void wait_vector_memory(int n, const char* what, const void* pc) {
  Cta& c = cta();
  if (n < 0 || n > 63) abort_cta(std::string(what) + " at " + pcs(pc) + " with count " + std::to_string(n));
  collective(c.wave, what, pc, nullptr, nullptr, [&](void**, void**) {
    const int first = me().tid - me().tid % c.wave;
    const int issued = c.fibers[first]->vm_issued;
    for (int l = 1; l < c.wave; ++l)
      if (c.fibers[first + l]->vm_issued != issued)
        abort_cta(std::string(what) + " at " + pcs(pc) + ": lanes of wave " + std::to_string(first / c.wave) +
                  " took part in different numbers of LDS DMA ops (" + who(first) + ": " + std::to_string(issued) +
                  ", " + who(first + l) + ": " + std::to_string(c.fibers[first + l]->vm_issued) +
                  "); the interpreter counts vmcnt over ops every lane of the wave issues (EXEC-masked LDS DMA is "
                  "not modelled)");
    const int upto = issued - n;
    if (upto <= 0) return;
    std::vector<PendingDma> keep;
    std::vector<const PendingDma*> first_of(upto + 1, nullptr);
    for (auto& p : c.dmas) {
      if (p.tid < first || p.tid >= first + c.wave || p.op > upto) continue;
      const PendingDma*& f0 = first_of[p.op];
      if (!f0) f0 = &p;
      else if (f0->m0 != p.m0 || std::memcmp(f0->rsrc, p.rsrc, sizeof p.rsrc) != 0)
        abort_cta("LDS DMA at " + pcs(p.pc) + ": the lanes of wave " + std::to_string(first / c.wave) +
                  " pass different " + (f0->m0 != p.m0 ? "M0 values (" + std::to_string(f0->m0) + " by " + who(f0->tid) +
                  ", " + std::to_string(p.m0) + " by " + who(p.tid) + ")" : std::string("buffer resources")) +
                  " to one instruction; both are scalar operands, one per wave");
    }
    for (auto& p : c.dmas) {
      if (p.tid >= first && p.tid < first + c.wave && p.op <= upto) land_dma(p);
      else keep.push_back(p);
    }
    c.dmas.swap(keep);
    for (int l = 0; l < c.wave; ++l) {
      Fiber& f = *c.fibers[first + l];
      f.vc[c.agent_vm(first)] = std::max<Clock>(f.vc[c.agent_vm(first)], upto);
    }
  });
}

void s_waitcnt(int simm16) {
  const void* pc = __builtin_return_address(0);
  wait_vector_memory(amdgcn::waitcnt_vmcnt(simm16), "s_waitcnt vmcnt", pc);
}

void s_wait_loadcnt(int n) { wait_vector_memory(n, "s_wait_loadcnt", __builtin_return_address(0)); }

bool land_one_dma(bool random_pick) {
  Cta& c = cta();
  if (!random_pick) return false;  // adversarial: as late as allowed (the retiring wait lands it)
  std::vector<int> open;
  for (size_t i = 0; i < c.dmas.size(); ++i)
    if (!c.dmas[i].landed) open.push_back((int)i);
  if (open.empty()) return false;
  land_dma(c.dmas[open[c.rng() % open.size()]]);
  return true;
}

void finish_cta_amd() {
  Cta& c = cta();
  if (!c.dmas.empty())
    finding("async", std::to_string(c.dmas.size()) + " LDS DMA dword(s) still in flight when CTA " +
                         std::to_string(c.linear) + " exits (first issued at " + pcs(c.dmas.front().pc) +
                         "; no s_waitcnt vmcnt retires them)");
}

// ---- matrix instructions (wave collectives) ------------------------------------------------------

namespace {

struct MatIn {
  const uint16_t* a;
  const uint16_t* b;
  const float* c;
};

template <int LANES, int ITEMS>
void matrix_collective(const char* what, bool bf16, float* d, const uint16_t* a, const uint16_t* b, const float* cin,
                       const void* pc) {
  Cta& c = cta();
  if (c.wave != LANES)
    abort_cta(std::string(what) + " at " + pcs(pc) + " is a wave" + std::to_string(LANES) +
              " instruction; this kernel runs wave" + std::to_string(c.wave));
  MatIn in{a, b, cin};
  collective(LANES, what, pc, &in, d, [&](void** ins, void** outs) {
    uint16_t A[LANES][ITEMS], B[LANES][ITEMS];
    float C[LANES][ITEMS], D[LANES][ITEMS];
    for (int l = 0; l < LANES; ++l) {
      const MatIn* p = static_cast<const MatIn*>(ins[l]);
      std::memcpy(A[l], p->a, sizeof A[l]);
      std::memcpy(B[l], p->b, sizeof B[l]);
      std::memcpy(C[l], p->c, sizeof C[l]);
    }
    if constexpr (LANES == 64) amdgcn::mfma_f32_16x16x16(bf16, A, B, C, D);
    else amdgcn::wmma_f32_16x16x16_w32(bf16, A, B, C, D);
    for (int l = 0; l < LANES; ++l) std::memcpy(outs[l], D[l], sizeof D[l]);
  });
}

void mfma(const char* what, bool bf16, float* d, const uint16_t* a, const uint16_t* b, const float* c, int cbsz,
          int abid, int blgp, const void* pc) {
  if (cbsz || abid || blgp)
    abort_cta(std::string(what) + " at " + pcs(pc) + " with cbsz " + std::to_string(cbsz) + ", abid " +
              std::to_string(abid) + ", blgp " + std::to_string(blgp) + ": broadcast modifiers are not modelled");
  matrix_collective<64, 4>(what, bf16, d, a, b, c, pc);
}

}  // namespace

void v_mfma_f32_16x16x16_f16(float* d, const uint16_t* a, const uint16_t* b, const float* c, int cbsz, int abid, int blgp) {
  mfma("v_mfma_f32_16x16x16_f16", false, d, a, b, c, cbsz, abid, blgp, __builtin_return_address(0));
}

void v_mfma_f32_16x16x16_bf16_1k(float* d, const uint16_t* a, const uint16_t* b, const float* c, int cbsz, int abid,
                                 int blgp) {
  mfma("v_mfma_f32_16x16x16_bf16_1k", true, d, a, b, c, cbsz, abid, blgp, __builtin_return_address(0));
}

void v_wmma_f32_16x16x16_f16(float* d, const uint16_t* a, const uint16_t* b, const float* c) {
  matrix_collective<32, 8>("v_wmma_f32_16x16x16_f16", false, d, a, b, c, __builtin_return_address(0));
}

void v_wmma_f32_16x16x16_bf16(float* d, const uint16_t* a, const uint16_t* b, const float* c) {
  matrix_collective<32, 8>("v_wmma_f32_16x16x16_bf16", true, d, a, b, c, __builtin_return_address(0));
}

}  // namespace heddle_rt
