// heddle/interp/rt/hrt_shadow.cpp -- happens-before over shared memory and bounds over global memory.
//
// Every shared-memory access -- a thread's plain load or store (reported by the compiler's
// instrumentation: the kernel is built with -fsanitize=thread and these hooks replace the sanitizer's
// runtime), or a primitive's read or write -- is checked against the 2-byte granules it covers:
//   * a write conflicts with the granule's last write and with every read since, unless each is
//     ordered before it (agent a at clock c is ordered before an accessor with clocks V iff V[a] >= c);
//   * a read conflicts with the last write unless that write is ordered before it.
// Asynchronous accesses are recorded when issued, as accesses of their engine's agent at the clock
// that the wait retiring them publishes; so touching the destination of a copy before the wait that
// retires it is a finding even when the copy happened to land earlier.
// An async-proxy read (wgmma, TMA store) of a granule written by a thread's st.shared also needs a
// fence.proxy.async by that thread between the write and the release the reader is ordered after.
// Global memory: a plain access must fall inside a registered tensor (or the thread's stack, or the
// shared window); writes to writable tensors are counted per element (an element written twice is a
// finding, read back by the driver as a race between CTAs or tiles).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

void vc_join(VC& into, const VC& from) {
  const size_t n = std::min(into.size(), from.size());
  for (size_t i = 0; i < n; ++i) into[i] = std::max(into[i], from[i]);
}

void shadow_reset() {
  Cta& c = cta();
  c.shadow.assign((run().smem_bytes + 1) / 2, Granule{});
}

static std::string agent_name(uint32_t agent, uint32_t tid) {
  Cta& c = cta();
  const int n = c.nthreads;
  if ((int)agent < n) return who(tid);
  if ((int)agent < 2 * n && c.amd) return "the LDS DMA of wave " + std::to_string(tid / c.wave) + " (" + who(tid) + ")";
  if ((int)agent < 2 * n) return "the cp.async copies of " + who(tid);
  if ((int)agent < 3 * n) return "the TMA store of " + who(tid);
  if ((int)agent < 3 * n + c.nwg) return "the wgmma of warpgroup " + std::to_string(agent - 3 * n) + " (issued by " + who(tid) + ")";
  return "the TMA load completing on an mbarrier (issued by " + who(tid) + ")";
}

static bool fenced(uint32_t writer, Clock wclk, const VC& reader) {
  // a fence.proxy.async by `writer` at clock f with wclk <= f < reader[writer]
  const auto& fs = cta().fibers[writer]->fences;
  auto it = std::lower_bound(fs.begin(), fs.end(), wclk);
  return it != fs.end() && *it < reader[writer];
}

void smem_access(uint32_t off, uint32_t bytes, bool write, uint32_t agent, Clock clk, uint32_t tid, const VC& vc,
                 const void* pc, bool async_proxy, const char* what) {
  Cta& c = cta();
  Run& r = run();
  if ((uint64_t)off + bytes > r.smem_bytes)
    abort_cta(std::string(what) + " at " + pcs(pc) + " by " + who(tid) + " touches shared bytes [" +
              std::to_string(off) + ", " + std::to_string(off + bytes) + ") beyond the kernel's " +
              std::to_string(r.smem_bytes) + " bytes of dynamic shared memory");
  const bool thread_agent = (int)agent < c.nthreads;
  bool reported = false;
  auto report = [&](const char* kind, const Granule& g, uint32_t other, Clock other_clk, uint32_t other_tid,
                    const void* other_pc, const char* other_what) {
    if (reported) return;
    reported = true;
    const uint32_t byte = (uint32_t)(&g - c.shadow.data()) * 2;
    finding("race",
            std::string(kind) + " on shared bytes [" + std::to_string(byte) + ", " + std::to_string(byte + 2) +
                ") (access of " + std::to_string(bytes) + " bytes at " + std::to_string(off) + "): " + what +
                " by " + agent_name(agent, tid) + " at " + pcs(pc) + " is not ordered after the " + other_what +
                " by " + agent_name(other, other_tid) + " at " + pcs(other_pc) + " (CTA " + std::to_string(c.linear) + ")" +
                amd_fence_note(agent, tid, other, other_clk));  // AMD: names a missing workgroup fence
  };
  for (uint32_t g0 = off / 2, g1 = (off + bytes + 1) / 2; g0 < g1; ++g0) {
    Granule& g = c.shadow[g0];
    const bool has_w = g.w_agent != UINT32_MAX;
    if (has_w && g.w_agent != agent && vc[g.w_agent] < g.w_clk)
      report(write ? "write-after-write race" : "read-after-write race", g, g.w_agent, g.w_clk, g.w_tid, g.w_pc, "write");
    if (has_w && async_proxy && !write && g.w_generic && !fenced(g.w_agent, g.w_clk, vc) && !reported) {
      reported = true;
      const uint32_t byte = g0 * 2;
      finding("race", "missing fence.proxy.async: " + std::string(what) + " by " + agent_name(agent, tid) + " at " +
                          pcs(pc) + " reads shared bytes [" + std::to_string(byte) + ", " + std::to_string(byte + 2) +
                          ") through the async proxy, written by " + who(g.w_tid) + "'s st.shared at " + pcs(g.w_pc) +
                          " with no fence.proxy.async between the write and the barrier (CTA " + std::to_string(c.linear) + ")");
    }
    if (write) {
      for (int i = 0; i < g.nreads; ++i) {
        const ReadRec& rr = g.reads[i];
        if (rr.agent != agent && vc[rr.agent] < rr.clk) report("write-after-read race", g, rr.agent, rr.clk, rr.tid, rr.pc, "read");
      }
      g.w_agent = agent;
      g.w_clk = clk;
      g.w_pc = pc;
      g.w_tid = tid;
      g.w_generic = thread_agent;
      g.nreads = 0;
    } else {
      int slot = -1;
      for (int i = 0; i < g.nreads; ++i)
        if (g.reads[i].agent == agent) slot = i;
      if (slot < 0) {
        if (g.nreads < 6) slot = g.nreads++;
        else {  // keep the newest six readers
          std::rotate(g.reads, g.reads + 1, g.reads + 6);
          slot = 5;
        }
      }
      g.reads[slot] = ReadRec{agent, clk, pc, tid};
    }
  }
}

int region_of(uint64_t a, uint32_t bytes, bool writable_only) {
  const hrt_launch* l = run().launch;
  for (int i = 0; i < l->nregions; ++i)
    if ((!writable_only || l->regions[i].writable) && a >= l->regions[i].base &&
        a + bytes <= l->regions[i].base + l->regions[i].bytes)
      return i;
  return -1;
}

// Counts a write to region i's elements; the second write of an element is a finding (`by` describes it).
template <class By>
static void count_output_write(int i, uint64_t a, uint32_t bytes, By by) {
  Run& r = run();
  const hrt_region& reg = r.launch->regions[i];
  if (reg.elem_bytes <= 0) return;
  const uint64_t e0 = (a - reg.base) / reg.elem_bytes, e1 = (a + bytes - reg.base + reg.elem_bytes - 1) / reg.elem_bytes;
  for (uint64_t e = e0; e < e1; ++e) {
    std::atomic<uint8_t>& n = r.out_written[r.region_granule0[i] + e];
    uint8_t prev = n.load(std::memory_order_relaxed);
    while (prev < 255 && !n.compare_exchange_weak(prev, (uint8_t)(prev + 1), std::memory_order_relaxed)) {
    }
    if (prev == 1)
      finding("race", "element " + std::to_string(e) + " of output '" + reg.name + "' written a second time, " + by() +
                          " (two threads, tiles or CTAs store the same element)");
  }
}

void thread_access(const void* p, uint32_t bytes, bool write, const void* pc, bool natural) {
  Run* rp = run_ptr();
  if (!rp) return;  // the entry stub, outside any GPU thread
  Run& r = *rp;
  Cta* c = r.cta;
  if (!c || !c->cur || c->aborted) return;
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  Fiber& f = *c->cur;
  if (a >= (uint64_t)f.stack_lo && a < (uint64_t)f.stack_hi) return;  // registers and locals
  if (natural && bytes > 1 && a % bytes)
    abort_cta(std::string(write ? "store of " : "load of ") + std::to_string(bytes) + " bytes at " + hex(a) + " (" + pcs(pc) +
              ") by " + who(f.tid) + " in CTA " + std::to_string(c->linear) + ": the address is not a multiple of " +
              std::to_string(bytes) + " (a GPU faults: misaligned address)");
  tick();
  const uint64_t s = reinterpret_cast<uint64_t>(r.smem);
  if (a >= s && a < s + HRT_SMEM_WINDOW_TOTAL) {
    smem_access((uint32_t)(a - s), bytes, write, f.tid, f.vc[f.tid], f.tid, f.vc, pc, false,
                write ? "st.shared" : "ld.shared");
    return;
  }
  const int i = region_of(a, bytes);
  if (i < 0)
    abort_cta(std::string(write ? "store to" : "load from") + " global address " + hex(a) + " (" + std::to_string(bytes) + " bytes) at " + pcs(pc) + " by " + who(f.tid) + " in CTA " +
              std::to_string(c->linear) + ": outside every tensor of the launch (a GPU would fault or corrupt memory)");
  const hrt_region& reg = r.launch->regions[i];
  if (write && !reg.writable)
    abort_cta(std::string("store into the input tensor '") + reg.name + "' at " + pcs(pc) + " by " + who(f.tid));
  if (write) count_output_write(i, a, bytes, [&] { return "at " + pcs(pc) + " by " + who(f.tid) + " in CTA " + std::to_string(c->linear); });
}

// global writes by the TMA store engine (perform_store has checked that they stay inside an output)
void global_store_by_engine(uint64_t a, uint32_t bytes, const void* pc, int tid) {
  count_output_write(region_of(a, bytes, true), a, bytes, [&] { return "by the TMA store at " + pcs(pc) + " issued by " + who(tid); });
}

}  // namespace heddle_rt

// ---- the compiler's instrumentation hooks (-fsanitize=thread without its runtime) -------------------

using heddle_rt::thread_access;
#define HRT_PC __builtin_return_address(0)
#define HRT_HOOKS(N)                                                                            \
  extern "C" void __tsan_read##N(void* p) { thread_access(p, N, false, HRT_PC, true); }               \
  extern "C" void __tsan_write##N(void* p) { thread_access(p, N, true, HRT_PC, true); }               \
  extern "C" void __tsan_unaligned_read##N(void* p) { thread_access(p, N, false, HRT_PC, true); }     \
  extern "C" void __tsan_unaligned_write##N(void* p) { thread_access(p, N, true, HRT_PC, true); }     \
  extern "C" void __tsan_volatile_read##N(void* p) { thread_access(p, N, false, HRT_PC, true); }      \
  extern "C" void __tsan_volatile_write##N(void* p) { thread_access(p, N, true, HRT_PC, true); }
HRT_HOOKS(1)
HRT_HOOKS(2)
HRT_HOOKS(4)
HRT_HOOKS(8)
HRT_HOOKS(16)
extern "C" void __tsan_read_range(void* p, unsigned long n) { thread_access(p, (uint32_t)n, false, HRT_PC); }
extern "C" void __tsan_write_range(void* p, unsigned long n) { thread_access(p, (uint32_t)n, true, HRT_PC); }
// clang routes the kernel's block copies and fills through these (g++ instruments them as ranges)
extern "C" void* __tsan_memcpy(void* d, const void* src, unsigned long n) {
  thread_access(src, (uint32_t)n, false, HRT_PC);
  thread_access(d, (uint32_t)n, true, HRT_PC);
  return std::memcpy(d, src, n);
}
extern "C" void* __tsan_memmove(void* d, const void* src, unsigned long n) {
  thread_access(src, (uint32_t)n, false, HRT_PC);
  thread_access(d, (uint32_t)n, true, HRT_PC);
  return std::memmove(d, src, n);
}
extern "C" void* __tsan_memset(void* d, int v, unsigned long n) {
  thread_access(d, (uint32_t)n, true, HRT_PC);
  return std::memset(d, v, n);
}
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_vptr_read(void**) {}
