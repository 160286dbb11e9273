// hrt_ptx.h -- data semantics of the PTX primitives heddle emits, for the CPU interpreter.
//
// An independent implementation written from the public NVIDIA documents (not from heddle's own
// device headers), so that a misunderstanding of a layout cannot sit on both sides of a test.
// Header-only, C++17, standard headers only.  Everything lives in heddle_rt::ptx.
//
// Pieces and the document sections they come from (PTX ISA 8.x section numbers where checked):
//   * bf16 / f16 <-> f32 conversions (IEEE 754 binary16; bfloat16 = upper half of binary32),
//     round-to-nearest-even as cvt.rn.{f16,bf16}.f32 (PTX ISA "cvt").
//   * Access: the shared-memory byte ranges each primitive touches.
//   * swizzle_addr: the 16-byte-chunk XOR swizzles.  Swizzle<B,4,3> on the shared byte address
//     (chunk bits 4..4+B-1 ^= bits 7..7+B-1; B = 1/2/3 for 32/64/128 B), PTX ISA 9.7.15.5.1.2.1.3
//     "Canonical Layouts" (wgmma) and CUDA C++ Programming Guide "TMA Swizzle" (index relation
//     smem[y][x] <-> smem[y][((y+offset)%R)^x] with y = address/128, x = 16-byte chunk, R = 8/4/2).
//   * ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16
//     (PTX ISA "Warp-level matrix load instruction: ldmatrix")
//   * mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (PTX ISA 9.7.14.5.8 "Matrix Fragments for
//     mma.m16n8k16 with floating point type": the row/col formulas under the A, B and C/D figures)
//   * wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16} with both operands in shared memory, and
//     m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2} (K-major only: the 8-bit forms have no transpose)
//     (PTX ISA 9.7.15.5.1.1.1 D fragment figure 149; 9.7.15.5.1.2 shared-memory matrix layout,
//     9.7.15.5.1.2.1.1/2 leading/stride dimension byte offsets, 9.7.15.5.1.2.1.3 canonical layouts,
//     9.7.15.5.1.2.2 matrix descriptor format)
//   * cuTensorMapEncodeTiled argument rules (CUDA Driver API 6.30 "Tensor Map Object Management")
//   * cp.async.bulk.tensor.{1-5}d tile-mode load/store (PTX ISA "cp.async.bulk.tensor" and "Tensor Map";
//     CUDA C++ Programming Guide "Using TMA to transfer multi-dimensional arrays" / "The Swizzle Modes")
//
// Modelling choices (see the comments at each piece): the swizzle XOR is taken on the shared-window
// offset (the real window base is aligned far beyond 1024 bytes); wgmma accepts only matrix base
// offset 0; a TMA box row occupies one full swizzle span in shared memory when the inner box is
// narrower than the span; interleaved tensor maps are validated but not copied.  wgmma keeps its
// operand scratch in thread_local storage (no large stack frames on interpreter fibers).
#ifndef HEDDLE_RT_HRT_PTX_H
#define HEDDLE_RT_HRT_PTX_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "hrt_fp8.h"

namespace heddle_rt {
namespace ptx {

// ------------------------------------------------------------------------------------------------
// numbers
// ------------------------------------------------------------------------------------------------
inline uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// bfloat16 is the upper 16 bits of a binary32: widening is exact.
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// binary16 -> binary32, exact for every input (subnormals normalised, NaN payload kept).
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return f32_from_bits(sign | 0x7F800000u | (man << 13));
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return f32_from_bits(sign);
  // subnormal: man * 2^-24; renormalise
  int e = -14;
  while (!(man & 0x400u)) {
    man <<= 1;
    --e;
  }
  man &= 0x3FFu;
  return f32_from_bits(sign | (uint32_t(e + 127) << 23) | (man << 13));
}

// binary32 -> bfloat16, round to nearest even; NaN -> quiet NaN (sign and top payload kept);
// values beyond the largest bf16 (after rounding) -> inf.
inline uint16_t f32_to_bf16_rn(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return uint16_t((u >> 16) | 0x0040u);
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return uint16_t(u >> 16);
}

// binary32 -> binary16, round to nearest even (subnormal results rounded too); NaN -> quiet NaN;
// overflow (|x| >= 65520 after rounding) -> inf.
inline uint16_t f32_to_f16_rn(float x) {
  uint32_t u = f32_bits(x);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t exp = (u >> 23) & 0xFFu;
  uint32_t man = u & 0x7FFFFFu;
  if (exp == 0xFFu) {
    if (man) return uint16_t(sign | 0x7E00u | (man >> 13));
    return uint16_t(sign | 0x7C00u);
  }
  int e = int(exp) - 127 + 15;  // biased binary16 exponent
  if (e >= 31) return uint16_t(sign | 0x7C00u);
  if (e <= 0) {
    if (exp == 0) return sign;  // f32 zero/subnormal (< 2^-126) rounds to +-0
    uint32_t m = man | 0x800000u;  // 24 significant bits, value m * 2^(exp-150)
    int shift = 14 - e;            // result unit is 2^-24
    if (shift > 25) return sign;
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = (uint32_t(e) << 10) | (man >> 13);
  uint32_t rem = man & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry may reach 0x7C00 = inf
  return uint16_t(sign | r);
}

// ------------------------------------------------------------------------------------------------
// shared-memory access reporting
// ------------------------------------------------------------------------------------------------
// Receives every shared-memory byte range a primitive reads or writes (offsets into the CTA's
// shared window).  Adjacent ranges may be merged; a range is never reported twice by one call of
// wgmma/ldmatrix, and TMA reports each 16-byte chunk of the box exactly once.
struct Access {
  virtual void read(uint32_t /*off*/, uint32_t /*bytes*/) {}
  virtual void write(uint32_t /*off*/, uint32_t /*bytes*/) {}
  virtual ~Access() = default;
};

// Merges consecutive contiguous ranges before handing them to an Access.
struct RangeBatcher {
  Access* acc;
  bool is_write;
  uint32_t start = 0, len = 0;
  RangeBatcher(Access* a, bool w) : acc(a), is_write(w) {}
  void add(uint32_t off, uint32_t bytes) {
    if (!acc) return;
    if (len && off == start + len) {
      len += bytes;
      return;
    }
    flush();
    start = off;
    len = bytes;
  }
  void flush() {
    if (acc && len) {
      if (is_write)
        acc->write(start, len);
      else
        acc->read(start, len);
    }
    len = 0;
  }
  ~RangeBatcher() { flush(); }
};

// ------------------------------------------------------------------------------------------------
// swizzle
// ------------------------------------------------------------------------------------------------
// span_bytes: 0 (none), 32, 64 or 128.  The XOR takes the 16-byte chunk index inside each 128-byte
// line (address bits 4..6) and flips its low log2(span/16) bits with the low bits of the 128-byte
// line index (address bits 7..9).  The address is the shared-window address itself, so the pattern
// repeats every 256/512/1024 bytes, anchored at multiples of that size.  The map is an involution:
// applying it twice gives the address back.
inline uint32_t swizzle_addr(uint32_t addr, int span_bytes) {
  if (span_bytes <= 16) return addr;
  uint32_t mask = uint32_t(span_bytes / 16 - 1);  // 1, 3, 7
  return addr ^ (((addr >> 7) & mask) << 4);
}

inline std::string hexstr(uint64_t v) {
  static const char* d = "0123456789abcdef";
  char buf[20];
  int n = 0;
  do {
    buf[n++] = d[v & 15];
    v >>= 4;
  } while (v && n < 16);
  std::string s = "0x";
  while (n) s += buf[--n];
  return s;
}

// ================================================================================================
// ldmatrix / mma / wgmma
//
// Sources (PTX ISA):
//   ldmatrix                 "ldmatrix": matrix i's 8 row addresses come from lanes 8i..8i+7; lane l
//                          receives, for each matrix, row l/4, columns 2*(l%4) and 2*(l%4)+1 (the
//                          lower-indexed element in the lower 16 bits); .trans delivers the transpose.
//   mma.m16n8k16 .f16/.bf16  9.7.14.5.8 (groupID = lane>>2, threadID_in_group = lane%4):
//                          A: row = g (+8 for a2,a3,a6,a7), col = 2t + (i&1) (+8 for i>=4)
//                          B: k   = 2t + (i&1) (+8 for i>=2),  n = g
//                          C/D: row = g (+8 for i>=2),         col = 2t + (i&1)
//   wgmma m64nNk16           9.7.15.5.1.1.1 (D, figure 149), 9.7.15.5.1.2.* (layouts, LBO/SBO,
//                          canonical layouts), 9.7.15.5.1.2.2 (descriptor).
// ================================================================================================

// ------------------------------------------------------------------------------------------------
// stmatrix.sync.aligned.m8n8.x{num}.shared.b16 (PTX ISA "stmatrix", 7.8, sm_90): the inverse of ldmatrix
// without .trans -- lane 8i+r gives the 16-byte-aligned address of row r of matrix i; lane l holds in
// in[l][i] row l/4, columns 2*(l%4) (lower 16 bits) and 2*(l%4)+1 (upper) of matrix i.
// ------------------------------------------------------------------------------------------------
inline std::string stmatrix(int num, uint8_t* smem, uint32_t smem_bytes, const uint32_t row_off[32],
                            const uint32_t in[32][4], Access* acc) {
  if (num != 1 && num != 2 && num != 4)
    return "stmatrix: .num must be x1, x2 or x4 (got " + std::to_string(num) + ")";
  for (int lane = 0; lane < 8 * num; ++lane) {
    const uint32_t a = row_off[lane];
    if (a & 15u)
      return "stmatrix: row address " + hexstr(a) + " supplied by lane " + std::to_string(lane) + " (matrix " +
             std::to_string(lane / 8) + " row " + std::to_string(lane % 8) + ") is not 16-byte aligned";
    if (uint64_t(a) + 16 > smem_bytes)
      return "stmatrix: row address " + hexstr(a) + " supplied by lane " + std::to_string(lane) +
             " is outside the shared window of " + std::to_string(smem_bytes) + " bytes";
  }
  for (int mi = 0; mi < num; ++mi)
    for (int r = 0; r < 8; ++r) {
      uint16_t row[8];
      for (int w = 0; w < 4; ++w) {  // the row's four 32-bit words come from lanes 4r .. 4r+3
        row[2 * w] = uint16_t(in[4 * r + w][mi] & 0xffffu);
        row[2 * w + 1] = uint16_t(in[4 * r + w][mi] >> 16);
      }
      std::memcpy(smem + row_off[mi * 8 + r], row, 16);
    }
  if (acc) {
    RangeBatcher rb(acc, true);
    for (int lane = 0; lane < 8 * num; ++lane) rb.add(row_off[lane], 16);
  }
  return "";
}

// ------------------------------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16
// ------------------------------------------------------------------------------------------------
inline std::string ldmatrix(int num, bool trans, const uint8_t* smem, uint32_t smem_bytes,
                            const uint32_t row_off[32], uint32_t out[32][4], Access* acc) {
  if (num != 1 && num != 2 && num != 4)
    return "ldmatrix: .num must be x1, x2 or x4 (got " + std::to_string(num) + ")";
  uint16_t m[4][8][8];  // [matrix][row][col]
  for (int mi = 0; mi < num; ++mi) {
    for (int r = 0; r < 8; ++r) {
      int lane = mi * 8 + r;
      uint32_t a = row_off[lane];
      if (a & 15u)
        return "ldmatrix: row address " + hexstr(a) + " supplied by lane " + std::to_string(lane) +
               " (matrix " + std::to_string(mi) + " row " + std::to_string(r) +
               ") is not 16-byte aligned";
      if (uint64_t(a) + 16 > smem_bytes)
        return "ldmatrix: row address " + hexstr(a) + " supplied by lane " + std::to_string(lane) +
               " is outside the shared window of " + std::to_string(smem_bytes) + " bytes";
      std::memcpy(m[mi][r], smem + a, 16);
    }
  }
  if (acc) {
    RangeBatcher rb(acc, false);
    for (int lane = 0; lane < 8 * num; ++lane) rb.add(row_off[lane], 16);
  }
  for (int l = 0; l < 32; ++l) {
    int rr = l >> 2, cc = 2 * (l & 3);
    for (int mi = 0; mi < num; ++mi) {
      uint16_t lo, hi;
      if (!trans) {
        lo = m[mi][rr][cc];
        hi = m[mi][rr][cc + 1];
      } else {
        lo = m[mi][cc][rr];
        hi = m[mi][cc + 1][rr];
      }
      out[l][mi] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  }
  return "";
}

// ------------------------------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}.{f16|bf16}.f32
// ------------------------------------------------------------------------------------------------
inline void mma_m16n8k16_a_pos(int lane, int i, int* row, int* col) {
  int g = lane >> 2, t = lane & 3;
  *row = g + (((i >> 1) & 1) ? 8 : 0);  // a0,a1,a4,a5 -> g ; a2,a3,a6,a7 -> g+8
  *col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
}
inline void mma_m16n8k16_b_pos(int lane, int i, int* k, int* n) {
  int g = lane >> 2, t = lane & 3;
  *k = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
  *n = g;
}
inline void mma_m16n8k16_c_pos(int lane, int i, int* row, int* col) {
  int g = lane >> 2, t = lane & 3;
  *row = g + (i >= 2 ? 8 : 0);
  *col = 2 * t + (i & 1);
}

inline float half_to_f32(bool bf16, uint16_t h) { return bf16 ? bf16_to_f32(h) : f16_to_f32(h); }

inline void mma_m16n8k16(bool bf16, const uint32_t a[32][4], const uint32_t b[32][2], float d[32][4]) {
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 8; ++i) {
      int r, c;
      mma_m16n8k16_a_pos(l, i, &r, &c);
      A[r][c] = half_to_f32(bf16, uint16_t(a[l][i >> 1] >> (16 * (i & 1))));
    }
    for (int i = 0; i < 4; ++i) {
      int k, n;
      mma_m16n8k16_b_pos(l, i, &k, &n);
      B[k][n] = half_to_f32(bf16, uint16_t(b[l][i >> 1] >> (16 * (i & 1))));
    }
  }
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 4; ++i) {
      int r, c;
      mma_m16n8k16_c_pos(l, i, &r, &c);
      float acc = d[l][i];
      for (int k = 0; k < 16; ++k) acc += A[r][k] * B[k][c];
      d[l][i] = acc;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16|bf16}.{f16|bf16}, A and B from shared memory
// ------------------------------------------------------------------------------------------------
// Accumulator layout (figure 149): warp w = t/32 of the warpgroup owns rows 16w..16w+15; inside a
// warp it is the m16n8 C layout repeated over N/8 column blocks: d[i] sits at
//   row = 16*w + lane/4 + 8*((i/2)%2),   col = 8*(i/4) + 2*(lane%4) + (i%2).
inline void wgmma_d_pos(int N, int thread, int i, int* row, int* col) {
  (void)N;
  int w = thread >> 5, lane = thread & 31;
  *row = 16 * w + (lane >> 2) + 8 * ((i >> 1) & 1);
  *col = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
}

// Decoded 64-bit matrix descriptor (9.7.15.5.1.2.2).
struct MatrixDesc {
  uint32_t start;  // byte address in the shared window (bits 0-13, <<4)
  uint32_t lbo;    // leading dimension byte offset (bits 16-29, <<4)
  uint32_t sbo;    // stride dimension byte offset (bits 32-45, <<4)
  int base_offset; // bits 49-51
  int layout;      // bits 62-63: 0 interleave (no swizzle), 1 128B, 2 64B, 3 32B
};
inline MatrixDesc decode_matrix_desc(uint64_t d) {
  MatrixDesc m;
  m.start = uint32_t(d & 0x3FFFu) << 4;
  m.lbo = uint32_t((d >> 16) & 0x3FFFu) << 4;
  m.sbo = uint32_t((d >> 32) & 0x3FFFu) << 4;
  m.base_offset = int((d >> 49) & 7u);
  m.layout = int((d >> 62) & 3u);
  return m;
}
inline int desc_swizzle_span(int layout) { return layout == 1 ? 128 : layout == 2 ? 64 : layout == 3 ? 32 : 0; }

// Unswizzled byte offset (relative to the descriptor's start address) of the 16-byte chunk that
// holds elements k = 8*kg..8*kg+7 (K-major) or mn = 8*mg..8*mg+7 (MN-major) of a 16-bit operand,
// per the canonical layouts of 9.7.15.5.1.2.1.3 with T = 8 elements (16 bytes):
//   K-major,  none : ((8,m),(T,2k)):((1T,SBO),(1,LBO))      -> (mn%8)*16 + (mn/8)*SBO + kg*LBO
//   K-major,  W    : ((8,m),(T,2k)):((W/16 T,SBO),(1,T))    -> (mn%8)*W  + (mn/8)*SBO + kg*16
//   MN-major, none : ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))   -> mg*SBO + (k%8)*16 + (k/8)*LBO
//   MN-major, W    : ((T,W/16,m),(8,k)):((1,T,LBO),(W/16 T,SBO))
//                                 -> (mg%(W/16))*16 + (mg/(W/16))*LBO + (k%8)*W + (k/8)*SBO
// (W = swizzle span in bytes.)  The swizzle is then applied to the absolute shared address.
inline uint32_t wgmma_chunk_offset(bool mn_major, int span, uint32_t lbo, uint32_t sbo, int mn_or_mg,
                                   int k_or_kg) {
  if (!mn_major) {
    int mn = mn_or_mg, kg = k_or_kg;
    if (span == 0) return uint32_t(mn % 8) * 16u + uint32_t(mn / 8) * sbo + uint32_t(kg) * lbo;
    return uint32_t(mn % 8) * uint32_t(span) + uint32_t(mn / 8) * sbo + uint32_t(kg) * 16u;
  }
  int mg = mn_or_mg, k = k_or_kg;
  if (span == 0) return uint32_t(mg) * sbo + uint32_t(k % 8) * 16u + uint32_t(k / 8) * lbo;
  int per = span / 16;  // 16-byte chunks of MN per swizzle row
  return uint32_t(mg % per) * 16u + uint32_t(mg / per) * lbo + uint32_t(k % 8) * uint32_t(span) +
         uint32_t(k / 8) * sbo;
}

// Operand element types of wgmma (and tcgen05.mma, which reads its operands the same way): the codes of
// hrt_api.h wgmma_mma_async_ss_typed. 8-bit floats (PTX ISA "wgmma.mma_async", .atype/.btype .e4m3/.e5m2):
// k = 32 elements per instruction, 16 per 16-byte chunk, decoded with hrt_fp8.h; the transpose immediates
// exist only for .f16/.bf16 ("The transpose operation is only supported for the wgmma.mma_async variants
// with .f16/.bf16 types"), so an 8-bit operand is always K-major.
enum WgmmaType { kWgF16 = 0, kWgBF16 = 1, kWgE4M3 = 2, kWgE5M2 = 3 };
inline int wgmma_type_bytes(int ty) { return ty >= kWgE4M3 ? 1 : 2; }
inline const char* wgmma_type_name(int ty) {
  return ty == kWgF16 ? "f16" : ty == kWgBF16 ? "bf16" : ty == kWgE4M3 ? "e4m3" : ty == kWgE5M2 ? "e5m2" : "?";
}
inline float wgmma_elem(int ty, const uint8_t* p) {
  if (ty == kWgE4M3) return float(minifloat_decode(kE4M3, *p));
  if (ty == kWgE5M2) return float(minifloat_decode(kE5M2, *p));
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_f32(ty == kWgBF16, h);
}

// Loads a rows x KW operand (rows = 64 for A, N for B; KW = 32 bytes of k: 16 elements of a 16-bit type,
// 32 of an 8-bit one) into out[row * KW + k] (row = m or n); with out == nullptr only validates (nothing
// is read or reported). `op` names the instruction in messages (tcgen05.mma reads its operands the same way).
inline std::string wgmma_load_operand_typed(const char* name, int rows, int ty, uint64_t desc, int tnsp,
                                            const uint8_t* smem, uint32_t smem_bytes, float* out, Access* acc,
                                            const char* op = "wgmma") {
  std::string who = std::string(op) + ": operand " + name + ": ";
  if (ty < kWgF16 || ty > kWgE5M2) return who + "unknown operand type code " + std::to_string(ty);
  if (tnsp != 0 && tnsp != 1) return who + "imm-trans must be 0 or 1 (got " + std::to_string(tnsp) + ")";
  const int eb = wgmma_type_bytes(ty), per = 16 / eb, kw = 32 / eb;  // elements per chunk, per k slab
  if (eb == 1 && tnsp != 0)
    return who + wgmma_type_name(ty) + " is an 8-bit type: it has no transpose (the .e4m3/.e5m2 forms take no "
           "imm-trans operands), so the operand must be K-major in shared memory";
  MatrixDesc md = decode_matrix_desc(desc);
  if (md.base_offset != 0)
    return who + "matrix base offset " + std::to_string(md.base_offset) +
           " (descriptor bits 49-51) is not supported; only 0 (pattern anchored at its natural boundary)";
  int span = desc_swizzle_span(md.layout);
  bool mn_major = tnsp == 1;
  if (span) {
    uint32_t in_row = md.start % uint32_t(span);
    if (!mn_major && in_row + 32u > uint32_t(span))
      return who + "K-major " + std::to_string(span) + "B-swizzled start address " + hexstr(md.start) +
             " is not aligned as the swizzle needs: the 32-byte K slice must lie inside one " +
             std::to_string(span) + "-byte swizzle row (start % " + std::to_string(span) + " = " +
             std::to_string(in_row) + ")";
    if (mn_major && in_row != 0)
      return who + "MN-major " + std::to_string(span) + "B-swizzled start address " + hexstr(md.start) +
             " is not aligned as the swizzle needs: it must be a multiple of the " + std::to_string(span) +
             "-byte swizzle row";
  }
  RangeBatcher rb(out ? acc : nullptr, false);
  int outer = mn_major ? rows / 8 : rows;  // chunk grid: (mn, kg) or (mg, k)
  int inner = mn_major ? 16 : 2;
  for (int o = 0; o < outer; ++o) {
    for (int q = 0; q < inner; ++q) {
      uint64_t lin = uint64_t(md.start) + wgmma_chunk_offset(mn_major, span, md.lbo, md.sbo, o, q);
      if (lin + 16 > smem_bytes || lin > 0xFFFFFFFFull)
        return who + "address " + hexstr(lin) + " (start " + hexstr(md.start) + ", LBO " +
               std::to_string(md.lbo) + ", SBO " + std::to_string(md.sbo) + ") is outside the shared window of " +
               std::to_string(smem_bytes) + " bytes";
      if (!out) continue;
      uint32_t phys = swizzle_addr(uint32_t(lin), span);
      rb.add(phys, 16);
      for (int e = 0; e < per; ++e) {
        float v = wgmma_elem(ty, smem + phys + e * eb);
        if (mn_major)
          out[(o * 8 + e) * kw + q] = v;
        else
          out[o * kw + q * per + e] = v;
      }
    }
  }
  return "";
}

// The 16-bit form: out[row][16].
inline std::string wgmma_load_operand(const char* name, int rows, bool bf16, uint64_t desc, int tnsp,
                                      const uint8_t* smem, uint32_t smem_bytes, float (*out)[16],
                                      Access* acc, const char* op = "wgmma") {
  return wgmma_load_operand_typed(name, rows, bf16 ? kWgBF16 : kWgF16, desc, tnsp, smem, smem_bytes,
                                  out ? &out[0][0] : nullptr, acc, op);
}

// wgmma.mma_async.sync.aligned.m64nNk{16|32}.f32.atype.btype with A and B in shared memory; tyA / tyB
// are WgmmaType codes (both 16-bit and equal, or both 8-bit: e4m3 and e5m2 mix).
inline std::string wgmma_ss_typed(int N, int tyA, int tyB, uint64_t desc_a, uint64_t desc_b, int scale_d,
                                  int tnspA, int tnspB, const uint8_t* smem, uint32_t smem_bytes,
                                  float* const d[128], Access* acc) {
  if (N < 8 || N > 256 || N % 8)
    return "wgmma: N must be a multiple of 8 in 8..256 (got " + std::to_string(N) + ")";
  if (scale_d != 0 && scale_d != 1) return "wgmma: scale-d must be 0 or 1 (got " + std::to_string(scale_d) + ")";
  const bool f8 = wgmma_type_bytes(tyA) == 1;
  if (f8 != (wgmma_type_bytes(tyB) == 1) || (!f8 && tyA != tyB))
    return std::string("wgmma: operand types .") + wgmma_type_name(tyA) + "." + wgmma_type_name(tyB) +
           " are not a wgmma form (.f16.f16, .bf16.bf16, or .e4m3/.e5m2 in any mix)";
  const int K = f8 ? 32 : 16;
  static thread_local float A[64 * 32];
  static thread_local float B[256 * 32];
  // validate both operands first so that a failing call reads and reports nothing
  std::string err = wgmma_load_operand_typed("A", 64, tyA, desc_a, tnspA, smem, smem_bytes, nullptr, acc);
  if (err.empty()) err = wgmma_load_operand_typed("B", N, tyB, desc_b, tnspB, smem, smem_bytes, nullptr, acc);
  if (!err.empty()) return err;
  wgmma_load_operand_typed("A", 64, tyA, desc_a, tnspA, smem, smem_bytes, A, acc);
  wgmma_load_operand_typed("B", N, tyB, desc_b, tnspB, smem, smem_bytes, B, acc);
  for (int t = 0; t < 128; ++t) {
    for (int i = 0; i < N / 2; ++i) {
      int r, c;
      wgmma_d_pos(N, t, i, &r, &c);
      float s = scale_d ? d[t][i] : 0.0f;
      for (int k = 0; k < K; ++k) s += A[r * K + k] * B[c * K + k];
      d[t][i] = s;
    }
  }
  return "";
}

inline std::string wgmma_m64nNk16_ss(int N, bool bf16, uint64_t desc_a, uint64_t desc_b, int scale_d,
                                     int tnspA, int tnspB, const uint8_t* smem, uint32_t smem_bytes,
                                     float* const d[128], Access* acc) {
  const int ty = bf16 ? kWgBF16 : kWgF16;
  return wgmma_ss_typed(N, ty, ty, desc_a, desc_b, scale_d, tnspA, tnspB, smem, smem_bytes, d, acc);
}

// ================================================================================================
// TMA
//
// Sources:
//   * CUDA Driver API, cuTensorMapEncodeTiled: argument rules (rank 1..5, >= 3 with interleave;
//     globalAddress 16-byte aligned, 32 with INTERLEAVE_32B; globalDim 1..2^32; globalStrides
//     multiple of 16 (32 with INTERLEAVE_32B), not 0 (an expand()ed tensor's; the driver refuses it) and
//     < 2^40; boxDim 1..256, boxDim[0]*elemsize a
//     multiple of 16 without interleave; elementStrides 1..8 (element 0 ignored without interleave;
//     ceil(boxDim[i]/elementStrides[i]) elements are moved along dimension i); with a swizzle and no
//     interleave the inner box bytes must be <= the swizzle span; INTERLEAVE_32B requires SWIZZLE_32B;
//     OOB NaN fill only for floating-point types).
//   * CUDA C++ Programming Guide, "TMA Swizzle": 16-byte chunks, pattern repeats every 256/512/1024
//     bytes and is anchored to the shared address (index relation smem[y][x] <-> smem[y][((y+offset)%R)^x]);
//     shared memory 128-byte aligned; "if the swizzle width exceeds the inner dimension, ensure that the
//     shared memory is allocated to accommodate the full swizzle width" -- implemented as: every box row
//     occupies one full swizzle span in shared memory.
//   * PTX ISA cp.async.bulk.tensor (tile mode): the box starting at the tensor coordinates is copied;
//     out-of-bound elements are filled (load) or skipped (store); the completed transaction bytes are
//     the full box size.
// ================================================================================================

// Our 128-byte stand-in for CUtensorMap.
struct alignas(64) TensorMap {
  static constexpr uint32_t kMagic = 0x414D5448u;  // "HTMA"
  uint32_t magic;
  uint8_t rank;         // 1..5
  uint8_t elem_bytes;   // 1, 2, 4 or 8
  uint8_t dtype;        // CUtensorMapDataType value
  uint8_t swizzle;      // CUtensorMapSwizzle value 0..3
  uint8_t interleave;   // CUtensorMapInterleave value 0..2
  uint8_t oob_fill;     // 0 zero, 1 NaN
  uint8_t l2promotion;  // kept, unused
  uint8_t reserved0;
  uint32_t reserved1;
  uint64_t base;             // global (host) address of element 0
  uint64_t dims[5];          // globalDim, innermost first
  uint64_t strides[5];       // byte strides; strides[0] = elem_bytes
  uint16_t box[5];           // boxDim
  uint8_t elem_strides[5];   // elementStrides
  uint8_t reserved2[9];
};
static_assert(sizeof(TensorMap) == 128, "TensorMap must be 128 bytes like CUtensorMap");

inline int tma_dtype_bytes(int t) {
  switch (t) {
    case 0: return 1;                      // UINT8
    case 1: case 6: case 9: return 2;      // UINT16, FLOAT16, BFLOAT16
    case 2: case 3: case 7: case 10: case 11: case 12: return 4;  // (U)INT32, FLOAT32(_FTZ), TFLOAT32(_FTZ)
    case 4: case 5: case 8: return 8;      // (U)INT64, FLOAT64
    default: return 0;
  }
}
inline bool tma_dtype_is_float(int t) { return t >= 6 && t <= 12; }
inline int tma_swizzle_span(int s) { return s == 1 ? 32 : s == 2 ? 64 : s == 3 ? 128 : 0; }

inline std::string encode_tensor_map(TensorMap* out, int dataType, uint64_t base, int rank, const uint64_t* dims,
                                     const uint64_t* strides, const uint32_t* box, const uint32_t* elemStrides,
                                     int interleave, int swizzle, int l2promotion, int oobFill) {
  const std::string P = "cuTensorMapEncodeTiled: ";
  if (!out) return P + "tensorMap is null";
  int esz = tma_dtype_bytes(dataType);
  if (!esz)
    return P + "tensorDataType " + std::to_string(dataType) + " is not a supported CUtensorMapDataType (0..12)";
  if (interleave < 0 || interleave > 2)
    return P + "interleave " + std::to_string(interleave) + " is not a CUtensorMapInterleave (0..2)";
  if (rank < 1 || rank > 5) return P + "tensorRank " + std::to_string(rank) + " must be in 1..5";
  if (interleave != 0 && rank < 3)
    return P + "tensorRank must be >= 3 when interleave is not CU_TENSOR_MAP_INTERLEAVE_NONE";
  if (swizzle < 0 || swizzle > 3)
    return P + "swizzle " + std::to_string(swizzle) + " is not supported (0 NONE, 1 32B, 2 64B, 3 128B)";
  if (interleave == 2 && swizzle != 1)
    return P + "swizzle must be CU_TENSOR_MAP_SWIZZLE_32B when interleave is CU_TENSOR_MAP_INTERLEAVE_32B";
  if (l2promotion < 0 || l2promotion > 3)
    return P + "l2Promotion " + std::to_string(l2promotion) + " is not a CUtensorMapL2promotion (0..3)";
  if (oobFill < 0 || oobFill > 1)
    return P + "oobFill " + std::to_string(oobFill) + " is not a CUtensorMapFloatOOBfill (0..1)";
  if (oobFill == 1 && !tma_dtype_is_float(dataType))
    return P + "oobFill CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA needs a floating-point tensorDataType";
  uint64_t align = interleave == 2 ? 32 : 16;
  if (base % align)
    return P + "globalAddress " + hexstr(base) + " must be " + std::to_string(align) + "-byte aligned";
  if (!dims || !box || !elemStrides || (rank > 1 && !strides))
    return P + "globalDim, globalStrides (rank > 1), boxDim and elementStrides must not be null";
  for (int i = 0; i < rank; ++i)
    if (dims[i] == 0 || dims[i] > (1ull << 32))
      return P + "globalDim[" + std::to_string(i) + "] = " + std::to_string(dims[i]) + " must be in 1..2^32";
  for (int i = 0; i + 1 < rank; ++i) {
    if (strides[i] == 0)  // an expand()ed tensor's stride: a multiple of 16, but the driver refuses it
      return P + "globalStrides[" + std::to_string(i) + "] = 0 must be a positive multiple of " + std::to_string(align);
    if (strides[i] % align)
      return P + "globalStrides[" + std::to_string(i) + "] = " + std::to_string(strides[i]) +
             " must be a multiple of " + std::to_string(align);
    if (strides[i] >= (1ull << 40))
      return P + "globalStrides[" + std::to_string(i) + "] = " + std::to_string(strides[i]) + " must be less than 2^40";
  }
  for (int i = 0; i < rank; ++i)
    if (box[i] == 0 || box[i] > 256)
      return P + "boxDim[" + std::to_string(i) + "] = " + std::to_string(box[i]) + " must be in 1..256";
  uint64_t inner = uint64_t(box[0]) * uint64_t(esz);
  if (interleave == 0 && inner % 16)
    return P + "boxDim[0] * elementSize = " + std::to_string(inner) + " bytes must be a multiple of 16";
  int span = tma_swizzle_span(swizzle);
  if (interleave == 0 && span && inner > uint64_t(span))
    return P + "the inner box dimension (boxDim[0] * elementSize = " + std::to_string(inner) +
           " bytes) must be <= the swizzle span of " + std::to_string(span) + " bytes";
  for (int i = 0; i < rank; ++i)
    if (elemStrides[i] == 0 || elemStrides[i] > 8)
      return P + "elementStrides[" + std::to_string(i) + "] = " + std::to_string(elemStrides[i]) + " must be in 1..8";

  std::memset(out, 0, sizeof(TensorMap));
  out->magic = TensorMap::kMagic;
  out->rank = uint8_t(rank);
  out->elem_bytes = uint8_t(esz);
  out->dtype = uint8_t(dataType);
  out->swizzle = uint8_t(swizzle);
  out->interleave = uint8_t(interleave);
  out->oob_fill = uint8_t(oobFill);
  out->l2promotion = uint8_t(l2promotion);
  out->base = base;
  for (int i = 0; i < 5; ++i) {
    out->dims[i] = i < rank ? dims[i] : 1;
    out->box[i] = uint16_t(i < rank ? box[i] : 1);
    out->elem_strides[i] = uint8_t(i < rank ? elemStrides[i] : 1);
  }
  out->strides[0] = uint64_t(esz);
  for (int i = 1; i < 5; ++i) out->strides[i] = i < rank ? strides[i - 1] : out->strides[i - 1] * out->dims[i - 1];
  return "";
}

// Geometry of the shared-memory image of one box.
struct TmaBox {
  int rank;
  int esz;
  uint32_t n[5];        // elements moved along each dimension (n[0] = boxDim[0])
  int es[5];            // element strides in coordinate units (es[0] = 1 without interleave)
  uint32_t inner;       // n[0] * esz bytes
  uint32_t pitch;       // shared bytes per box row: the swizzle span if swizzled, else inner
  uint32_t rows;        // product of n[1..rank-1]
  int span;             // swizzle span, 0 if none
};

inline std::string tma_check(const char* op, const TensorMap& m, uint32_t smem_bytes, uint32_t off, TmaBox* b) {
  std::string P = std::string(op) + ": ";
  if (m.magic != TensorMap::kMagic) return P + "tensor map was not made by encode_tensor_map (bad magic)";
  if (m.rank < 1 || m.rank > 5) return P + "tensor map rank " + std::to_string(m.rank) + " is invalid";
  if (m.interleave != 0) return P + "interleaved tensor maps are not supported by the interpreter";
  if (off % 128)
    return P + "shared memory address " + hexstr(off) +
           " must be 128-byte aligned (swizzle patterns are anchored to the address, repeating every "
           "256/512/1024 bytes for 32B/64B/128B)";
  b->rank = m.rank;
  b->esz = m.elem_bytes;
  b->rows = 1;
  for (int i = 0; i < 5; ++i) {
    b->es[i] = i == 0 ? 1 : m.elem_strides[i];
    b->n[i] = i < m.rank ? (uint32_t(m.box[i]) + uint32_t(b->es[i]) - 1) / uint32_t(b->es[i]) : 1;
    if (i > 0) b->rows *= b->n[i];
  }
  b->inner = b->n[0] * uint32_t(b->esz);
  b->span = tma_swizzle_span(m.swizzle);
  b->pitch = b->span ? uint32_t(b->span) : b->inner;
  // The swizzle keeps every byte inside its 128-byte line; a 128-aligned start makes the image fit in
  // round_up(rows*pitch, 128) only when pitch < 128, so check the exact last chunk instead.
  uint64_t last = 0;
  for (uint32_t r = 0; r < b->rows; ++r) {
    for (uint32_t c = 0; c < b->inner; c += 16) {
      uint64_t lin = uint64_t(off) + uint64_t(r) * b->pitch + c;
      if (lin > 0xFFFFFFFFull) return P + "box image runs past the 32-bit shared address space";
      uint64_t ph = swizzle_addr(uint32_t(lin), b->span);
      if (ph + 16 > last) last = ph + 16;
    }
  }
  if (last > smem_bytes)
    return P + "box image [" + hexstr(off) + ", " + hexstr(last) + ") is outside the shared window of " +
           std::to_string(smem_bytes) + " bytes";
  return "";
}

// Walks the box: fn(row, i0, global_byte_offset_or_-1, shared_physical_offset) per element.
template <class F>
inline void tma_walk(const TensorMap& m, const TmaBox& b, const int32_t* coords, uint32_t off, F fn) {
  int64_t idx[5] = {0, 0, 0, 0, 0};
  for (uint32_t r = 0; r < b.rows; ++r) {
    // decompose r into idx[1..rank-1], dimension 1 fastest
    uint32_t rem = r;
    for (int i = 1; i < 5; ++i) {
      idx[i] = rem % b.n[i];
      rem /= b.n[i];
    }
    bool row_in = true;
    int64_t row_off = 0;
    for (int i = 1; i < b.rank; ++i) {
      int64_t g = int64_t(coords[i]) + idx[i] * b.es[i];
      if (g < 0 || g >= int64_t(m.dims[i])) row_in = false;
      row_off += g * int64_t(m.strides[i]);
    }
    for (uint32_t e = 0; e < b.n[0]; ++e) {
      int64_t g0 = int64_t(coords[0]) + int64_t(e);
      bool in = row_in && g0 >= 0 && g0 < int64_t(m.dims[0]);
      uint32_t lin = off + r * b.pitch + e * uint32_t(b.esz);
      fn(r, e, in ? row_off + g0 * int64_t(b.esz) : int64_t(-1), swizzle_addr(lin, b.span));
    }
  }
}

inline void tma_report(const TmaBox& b, uint32_t off, Access* acc, bool write) {
  if (!acc) return;
  RangeBatcher rb(acc, write);
  for (uint32_t r = 0; r < b.rows; ++r)
    for (uint32_t c = 0; c < b.inner; c += 16) rb.add(swizzle_addr(off + r * b.pitch + c, b.span), 16);
}

inline std::string tma_load(const TensorMap& m, const int32_t* coords, uint8_t* smem, uint32_t smem_bytes,
                            uint32_t dst_off, uint32_t* bytes, Access* acc) {
  TmaBox b;
  std::string err = tma_check("cp.async.bulk.tensor (load)", m, smem_bytes, dst_off, &b);
  if (!err.empty()) return err;
  const uint8_t* g = reinterpret_cast<const uint8_t*>(uintptr_t(m.base));
  uint8_t fill[8];
  std::memset(fill, 0, 8);
  if (m.oob_fill == 1) {  // a canonical quiet NaN of the element type
    if (b.esz == 2) { fill[0] = 0xFF; fill[1] = 0x7F; }
    if (b.esz == 4) { uint32_t v = 0x7FFFFFFFu; std::memcpy(fill, &v, 4); }
    if (b.esz == 8) { uint64_t v = 0x7FFFFFFFFFFFFFFFull; std::memcpy(fill, &v, 8); }
  }
  tma_walk(m, b, coords, dst_off, [&](uint32_t, uint32_t, int64_t src, uint32_t dst) {
    if (src >= 0)
      std::memcpy(smem + dst, g + src, size_t(b.esz));
    else
      std::memcpy(smem + dst, fill, size_t(b.esz));
  });
  tma_report(b, dst_off, acc, true);
  if (bytes) *bytes = b.rows * b.inner;
  return "";
}

inline std::string tma_store(const TensorMap& m, const int32_t* coords, const uint8_t* smem, uint32_t smem_bytes,
                             uint32_t src_off, Access* acc) {
  TmaBox b;
  std::string err = tma_check("cp.async.bulk.tensor (store)", m, smem_bytes, src_off, &b);
  if (!err.empty()) return err;
  uint8_t* g = reinterpret_cast<uint8_t*>(uintptr_t(m.base));
  tma_walk(m, b, coords, src_off, [&](uint32_t, uint32_t, int64_t dst, uint32_t src) {
    if (dst >= 0) std::memcpy(g + dst, smem + src, size_t(b.esz));
  });
  tma_report(b, src_off, acc, false);
  return "";
}

}  // namespace ptx
}  // namespace heddle_rt

#endif  // HEDDLE_RT_HRT_PTX_H
