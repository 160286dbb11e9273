// A two-CTA cluster kernel written by hand for the interpreter's cluster model (tests/interp/test_interp_cluster.py):
// the protocol the sm_90a warp-specialized kernel will use for clusters of 2 with a multicast operand.
//
//   out[g][j] = sum_k W[g][k] * S[k][j]      g = CTA (cluster c, rank r: g = 2c + r), j < 32
//
// S is the operand both CTAs of a cluster need: k-tile kt is a 16 x 32 box; rank r loads its rows
// [8r, 8r + 8) and multicasts them to both CTAs (mask 0b11). W's row g is each CTA's own operand (a plain
// TMA box of 16). One ring of STAGES slots; the full barrier expects the whole S tile (both halves, one
// from each CTA) plus the W box; a slot is free when the consumers of BOTH CTAs released it (each
// consumer thread arrives on its own CTA's empty barrier and, through mapa, on the peer's). The inits are
// fenced for the cluster and published by a cluster barrier; a cluster barrier before exit keeps a CTA
// alive while its peer may still multicast into it or arrive on its barriers.
#include "heddle/heddle_types.cuh"
#include "heddle/heddle_sm90.cuh"

#define STAGES 2

extern "C" __global__ void cluster_multicast(const float* S, const float* W, float* out, int KT,
                                             const __grid_constant__ heddle::TmaDesc tmS,
                                             const __grid_constant__ heddle::TmaDesc tmW) {
  extern __shared__ __align__(1024) unsigned char heddle_smem[];
  unsigned char* smem = heddle::sm90::cta_smem(heddle_smem);
  float* sS = reinterpret_cast<float*>(smem);                        // STAGES x 16 x 32
  float* sW = reinterpret_cast<float*>(smem + STAGES * 16 * 32 * 4);  // STAGES x 16 (128-byte slots)
  unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + STAGES * (16 * 32 + 32) * 4);
  unsigned long long* empty = full + STAGES;
  const int tid = threadIdx.x;
  const unsigned rank = heddle::sm90::cluster_ctarank(), peer = rank ^ 1u;
  const int g = blockIdx.x;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      heddle::sm90::mbar_init(&full[s], 1);
      heddle::sm90::mbar_init(&empty[s], 2 * 32);  // MUTANT:peer_count
    }
    heddle::sm90::fence_mbarrier_init_cluster();  // MUTANT:init_fence
  }
  heddle::sm90::cluster_sync();
  if (tid < 32) {  // producer warp: lane 0 issues
    if (tid == 0) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % STAGES;
        heddle::sm90::mbar_wait(&empty[s], ((kt / STAGES) & 1) ^ 1);
        heddle::sm90::mbar_arrive_expect_tx(&full[s], (16 * 32 + 16) * 4);  // MUTANT:expect_tx
        heddle::sm90::tma_load_box_multicast(sS + s * 16 * 32 + rank * 8 * 32, &tmS, 0, kt * 16 + (int)rank * 8,
                                             &full[s], (unsigned short)0x3);
        heddle::sm90::tma_load_box<2>(sW + s * 32, &tmW, kt * 16, g, 0, &full[s]);
      }
    }
  } else {  // consumer warp: thread j owns column j
    const int j = tid - 32;
    float acc = 0.f;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % STAGES;
      heddle::sm90::mbar_wait(&full[s], (kt / STAGES) & 1);
      for (int k = 0; k < 16; ++k) acc += sW[s * 32 + k] * sS[s * 16 * 32 + k * 32 + j];
      heddle::sm90::mbar_arrive(&empty[s]);
      heddle::sm90::mbar_arrive_cluster(&empty[s], peer);  // MUTANT:peer_release
    }
    out[g * 32 + j] = acc;
  }
  heddle::sm90::cluster_sync();  // MUTANT:exit_barrier
}
