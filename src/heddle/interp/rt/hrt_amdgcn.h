// heddle/interp/rt/hrt_amdgcn.h -- data semantics of the AMD instructions the interpreter runs, written
// from the AMD ISA texts (CDNA3 "AMD Instinct MI300" ISA for gfx90a / gfx942, RDNA4 ISA for gfx1200) and
// the AMD matrix instruction calculator's register layouts, independently of heddle's device headers
// (heddle_hip_mma.cuh states its own lane -> element formulas; these are element -> lane maps, as the
// calculator prints them, and tests/interp/amdgcn_selftest.cpp checks entries of the published tables).
// Header-only, no runtime state: the self-test compiles it alone.
//
//   v_mfma_f32_16x16x16{f16,bf16_1k} (wave64): the lane of A[i][k] is i + 16*(k/4), item k%4 (bits
//     [16*(k%2)+15 : 16*(k%2)] of register k%4/2); B[k][j] likewise with j for i; D[i][j] (and C) sit in
//     lane j + 16*(i/4), register i%4.
//   v_wmma_f32_16x16x16_{f16,bf16} (GFX12, wave32): A[i][k] in lane i + 16*((k/4)%2), item 4*(k/8) + k%4;
//     B[k][j] in lane j + 16*((k/4)%2), same item; D[i][j] in lane j + 16*(i/8), register i%8.
//   Buffer resource (V#, GFX9 / CDNA layout): base = dword0 | dword1[15:0] << 32, stride = dword1[29:16],
//     num_records = dword2, dword3 holds the formats. A raw buffer (stride 0) access at byte offset
//     voffset + inst_offset reads zero when it reaches num_records.
//   s_waitcnt simm16 (GFX9): vmcnt = simm16[3:0] | simm16[15:14] << 4, expcnt = [6:4], lgkmcnt = [11:8].
#pragma once
#include <cstdint>

#include "heddle/interp/rt/hrt_ptx.h"  // binary16 / bfloat16 conversions (IEEE, shared with the PTX side)

namespace heddle_rt {
namespace amdgcn {

struct Slot {
  int lane, item;
};

// ---- MFMA 16x16x16, wave64 ------------------------------------------------------------------
inline Slot mfma16_a(int i, int k) { return {i + 16 * (k / 4), k % 4}; }
inline Slot mfma16_b(int k, int j) { return {j + 16 * (k / 4), k % 4}; }
inline Slot mfma16_d(int i, int j) { return {j + 16 * (i / 4), i % 4}; }

// ---- WMMA 16x16x16, GFX12 wave32 --------------------------------------------------------------
inline Slot wmma16_a(int i, int k) { return {i + 16 * ((k / 4) % 2), 4 * (k / 8) + k % 4}; }
inline Slot wmma16_b(int k, int j) { return {j + 16 * ((k / 4) % 2), 4 * (k / 8) + k % 4}; }
inline Slot wmma16_d(int i, int j) { return {j + 16 * (i / 8), i % 8}; }

// D = A * B + C over one 16x16x16 tile. a, b: per lane `items` 16-bit elements; c, d: per lane
// `items` floats (may alias). Products of binary16 / bfloat16 values are exact in binary32; the sum
// is accumulated in binary32 in k order (the hardware's order is unspecified).
template <int LANES, int ITEMS, class SA, class SB, class SD>
void matrix16(bool bf16, const uint16_t (*a)[ITEMS], const uint16_t (*b)[ITEMS], const float (*c)[ITEMS],
              float (*d)[ITEMS], SA sa, SB sb, SD sd) {
  float A[16][16], B[16][16], D[16][16];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) {
      Slot s = sa(i, k);
      A[i][k] = ptx::half_to_f32(bf16, a[s.lane][s.item]);
      Slot t = sb(k, i);  // B[k][j] with j = i
      B[k][i] = ptx::half_to_f32(bf16, b[t.lane][t.item]);
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      Slot s = sd(i, j);
      float acc = c[s.lane][s.item];
      for (int k = 0; k < 16; ++k) acc += A[i][k] * B[k][j];
      D[i][j] = acc;
    }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      Slot s = sd(i, j);
      d[s.lane][s.item] = D[i][j];
    }
  (void)LANES;
}

inline void mfma_f32_16x16x16(bool bf16, const uint16_t a[64][4], const uint16_t b[64][4], const float c[64][4],
                              float d[64][4]) {
  matrix16<64, 4>(bf16, a, b, c, d, mfma16_a, mfma16_b, mfma16_d);
}

inline void wmma_f32_16x16x16_w32(bool bf16, const uint16_t a[32][8], const uint16_t b[32][8], const float c[32][8],
                                  float d[32][8]) {
  matrix16<32, 8>(bf16, a, b, c, d, wmma16_a, wmma16_b, wmma16_d);
}

// ---- buffer resource and waitcnt fields --------------------------------------------------------
struct BufferRsrc {
  uint64_t base;
  uint32_t stride, num_records, dword3;
};

inline BufferRsrc decode_rsrc(const int32_t r[4]) {
  const uint32_t w1 = (uint32_t)r[1];
  return {(uint64_t)(uint32_t)r[0] | (uint64_t)(w1 & 0xffffu) << 32, (w1 >> 16) & 0x3fffu, (uint32_t)r[2],
          (uint32_t)r[3]};
}

// the byte address a raw-buffer access reads, or false when it is out of range (the data is zero)
inline bool raw_buffer_address(const BufferRsrc& b, uint32_t voffset, uint32_t soffset, uint32_t inst_offset,
                               uint32_t bytes, uint64_t* addr) {
  const uint64_t off = (uint64_t)voffset + inst_offset;
  if (off + bytes > b.num_records) return false;
  *addr = b.base + soffset + off;
  return true;
}

inline int waitcnt_vmcnt(int simm16) { return (simm16 & 0xf) | ((simm16 >> 14) & 3) << 4; }
inline int waitcnt_expcnt(int simm16) { return (simm16 >> 4) & 7; }
inline int waitcnt_lgkmcnt(int simm16) { return (simm16 >> 8) & 0xf; }

}  // namespace amdgcn
}  // namespace heddle_rt
