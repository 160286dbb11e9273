// hrt_ptx_tcgen05.h -- data semantics of the sm_100a tcgen05 primitives (tensor memory and the
// fifth-generation tensor-core MMA) for the CPU interpreter.  Like hrt_ptx.h it is written from the
// public PTX ISA, independently of any device header, header-only, C++17, standard headers only.
//
// Pieces and the PTX ISA (9.x) sections they come from:
//   * Tensor memory (9.7.16.1/2): per CTA 128 lanes x 512 columns of 32-bit cells; an address is 32
//     bits, lane in bits 31-16, column in bits 15-0.  tcgen05.alloc.cta_group::1 takes a column
//     count that is a power of two in [32, 512] and writes the allocation's address (lane 0) to
//     shared memory; tcgen05.dealloc frees it with the same count; after
//     tcgen05.relinquish_alloc_permit the CTA may not allocate again; every allocation must be freed
//     before the kernel exits.  Where an allocation lands is the hardware's choice: here the lowest
//     free 32-column-aligned range (a kernel must use the returned address).  Fresh columns hold no
//     defined value: here a NaN, so a first MMA that accumulates (enable-input-d = 1) shows.
//   * Instruction descriptor, .kind::f16 (9.7.16.4.2, table 42): bits 0-1 sparsity selector, 2
//     sparsity, 3 saturate, 4-5 D type (F16 0, F32 1), 6 reserved, 7-9 A type (F16 0, BF16 1), 10-12
//     B type, 13/14 negate A/B, 15/16 transpose A/B (1 = MN-major), 17-22 N>>3, 23 reserved, 24-28
//     M>>4, 29 reserved, 30-31 .ws B-reuse shift.  Modelled: dense, f32 D, A and B both f16 or both
//     bf16, M = 128 (cta_group::1), N a multiple of 16 in [16, 256]; K = 16 per instruction.
//   * The same table for .kind::f8f6f4: A/B type E4M3 0, E5M2 1 (E2M3 3, E3M2 4, E2M1 5: not modelled),
//     the formats may differ; K = 32 per instruction (9.7.16.10.1, the dense f8f6f4 shapes; CUTLASS's
//     UMMA::MXF8F6F4Format has the same codes).  An 8-bit operand row of the canonical K-major layout
//     is two 16-byte chunks of 16 elements: the 32 K elements of one instruction, the byte geometry of
//     kind::f16's two chunks of 8.  Modelled: K-major A and B (transpose bits 0), decoded with
//     hrt_fp8.h; the products are exact in f32 and summed in f32.
//   * Shared memory descriptor (9.7.16.4.1, table 40): bits 0-13 start>>4, 16-29 LBO>>4, 32-45
//     SBO>>4, 46-48 the constant 0b001, 49-51 base offset, 52 LBO mode (0 relative), 53-60 zero,
//     61-63 swizzle (0 none, 1 128B with 32B atom, 2 128B, 4 64B, 6 32B; 3, 5, 7 invalid).  The
//     fields are those of the wgmma descriptor (9.7.15.5.1.2.2) with another version and swizzle
//     encoding, over the same canonical layouts (9.7.16.3: LBO/SBO as for wgmma), so the operand
//     fetch is hrt_ptx.h's.  Not modelled (an error): 128B-with-32B-atom swizzle, absolute LBO mode.
//   * tcgen05.mma.cta_group::1.kind::f16 [d], a-desc, b-desc, idesc, enable-input-d: D (M x N, f32)
//     = A (M x 16) * B (16 x N) + (enable-input-d ? D : 0).  For M = 128 and cta_group::1 row i of D
//     is TMEM lane (d.lane + i) and column j is TMEM column (d.col + j) (data-path layout D).
//   * tcgen05.ld.sync.aligned.32x32b.xN.b32 (9.7.16.2.3.1.1, figure 183): the warp reads 32 lanes
//     starting at the address's lane; thread t gets lane (lane + t), registers r0..r(N-1) from columns
//     col..col+N-1.  A warp may access only its quarter of the lanes: warp w of a warpgroup lanes
//     32*(w%4) .. 32*(w%4)+31 (tcgen05 access restrictions).
#ifndef HEDDLE_RT_HRT_PTX_TCGEN05_H
#define HEDDLE_RT_HRT_PTX_TCGEN05_H

#include <cstdint>
#include <cstring>
#include <string>

#include "hrt_fp8.h"
#include "hrt_ptx.h"

namespace heddle_rt {
namespace ptx {

constexpr int kTmemLanes = 128, kTmemCols = 512, kTmemGranule = 32;
constexpr uint32_t kTmemPoison = 0x7FC0DEADu;  // a quiet NaN: what a column holds before its first write

inline uint32_t tmem_addr(uint32_t lane, uint32_t col) { return (lane << 16) | (col & 0xFFFFu); }
inline uint32_t tmem_lane(uint32_t a) { return a >> 16; }
inline uint32_t tmem_col(uint32_t a) { return a & 0xFFFFu; }

// One CTA's tensor memory and its allocation state.
struct Tmem {
  static constexpr int kGranules = kTmemCols / kTmemGranule;
  uint32_t cell[kTmemLanes][kTmemCols] = {};
  bool used[kGranules] = {};
  int starts[kGranules] = {};  // column count of the allocation starting at this granule, else 0
  bool relinquished = false;

  std::string alloc(int ncols, uint32_t* addr) {
    if (ncols < 32 || ncols > 512 || (ncols & (ncols - 1)))
      return "tcgen05.alloc: " + std::to_string(ncols) + " columns; the count is a power of 2 in [32, 512]";
    if (relinquished) return "tcgen05.alloc after tcgen05.relinquish_alloc_permit (the CTA gave up allocating)";
    const int need = ncols / kTmemGranule;
    for (int g = 0; g + need <= kGranules; ++g) {
      bool free = true;
      for (int i = 0; i < need; ++i) free = free && !used[g + i];
      if (!free) continue;
      for (int i = 0; i < need; ++i) used[g + i] = true;
      starts[g] = ncols;
      for (auto& lane : cell)  // fresh columns hold no defined value: a NaN that spreads into any use
        for (int c = g * kTmemGranule; c < g * kTmemGranule + ncols; ++c) lane[c] = kTmemPoison;
      *addr = tmem_addr(0, uint32_t(g * kTmemGranule));
      return "";
    }
    return "tcgen05.alloc of " + std::to_string(ncols) + " columns: tensor memory has no free range that large "
           "(512 columns per SM, shared by its CTAs)";
  }
  std::string dealloc(uint32_t addr, int ncols) {
    const uint32_t col = tmem_col(addr);
    const int g = int(col / kTmemGranule);
    if (tmem_lane(addr) != 0 || col % kTmemGranule || g >= kGranules || starts[g] != ncols)
      return "tcgen05.dealloc of " + hexstr(addr) + " with " + std::to_string(ncols) + " columns: no allocation of "
             "that size starts there (tcgen05.alloc returned lane 0 and frees with the same count)";
    for (int i = 0; i < ncols / kTmemGranule; ++i) used[g + i] = false;
    starts[g] = 0;
    return "";
  }
  int allocated_columns() const {
    int n = 0;
    for (bool u : used) n += u ? kTmemGranule : 0;
    return n;
  }
  bool columns_allocated(uint32_t col, int n) const {
    if (col + uint32_t(n) > uint32_t(kTmemCols)) return false;
    for (uint32_t c = col; c < col + uint32_t(n); ++c)
      if (!used[c / kTmemGranule]) return false;
    return true;
  }
};

// The MMA kinds modelled (the .kind qualifier: the instruction descriptor's type fields depend on it).
enum class TcKind { F16, F8F6F4 };
inline const char* tc_kind_name(TcKind k) { return k == TcKind::F16 ? "kind::f16" : "kind::f8f6f4"; }

// Decoded instruction descriptor (kind::f16 or kind::f8f6f4).
struct InstrDescF16 {
  TcKind kind = TcKind::F16;
  bool bf16 = false;         // kind::f16: A and B bf16
  int fmtA = 0, fmtB = 0;    // kind::f8f6f4: 0 E4M3, 1 E5M2
  bool negA = false, negB = false;
  bool mnMajorA = false, mnMajorB = false;  // transpose bits
  int M = 0, N = 0;
  int K() const { return kind == TcKind::F16 ? 16 : 32; }
};

inline std::string decode_idesc(TcKind kind, uint32_t d, InstrDescF16* out) {
  const std::string who = std::string("tcgen05.mma.") + tc_kind_name(kind) + ": instruction descriptor " + hexstr(d) +
                          ": ";
  if (d & 0x7u) return who + "sparsity (bits 0-2) is not modelled; use a dense descriptor";
  if (d & 0x8u) return who + "saturate (bit 3) applies to integer kinds only";
  if (((d >> 4) & 3u) != 1u) return who + "D type (bits 4-5) must be F32 (1) here; f16 accumulators are not modelled";
  if (d & ((1u << 6) | (1u << 23) | (1u << 29))) return who + "reserved bits 6, 23 and 29 must be 0";
  if (d >> 30) return who + "bits 30-31 (B reuse shift) belong to tcgen05.mma.ws";
  const uint32_t at = (d >> 7) & 7u, bt = (d >> 10) & 7u;
  out->kind = kind;
  if (kind == TcKind::F16) {
    if (at > 1 || bt > 1 || at != bt)
      return who + "A type " + std::to_string(at) + " and B type " + std::to_string(bt) +
             " (bits 7-9, 10-12) must both be F16 (0) or both BF16 (1)";
    out->bf16 = at == 1;
  } else {
    for (uint32_t t : {at, bt})
      if (t > 1)
        return who + "A type " + std::to_string(at) + " and B type " + std::to_string(bt) + " (bits 7-9, 10-12): " +
               (t == 3 || t == 4 || t == 5 ? "the 6- and 4-bit formats (E2M3 3, E3M2 4, E2M1 5) are not modelled"
                                           : "not an f8f6f4 format") +
               "; E4M3 is 0, E5M2 1";
    out->fmtA = int(at);
    out->fmtB = int(bt);
  }
  out->negA = (d >> 13) & 1u;
  out->negB = (d >> 14) & 1u;
  out->mnMajorA = (d >> 15) & 1u;
  out->mnMajorB = (d >> 16) & 1u;
  if (kind == TcKind::F8F6F4 && (out->mnMajorA || out->mnMajorB))
    return who + "transpose A/B (bits 15, 16) set: MN-major 8-bit operands are not modelled; K-major only";
  out->N = int((d >> 17) & 0x3Fu) << 3;
  out->M = int((d >> 24) & 0x1Fu) << 4;
  if (out->M != 128) return who + "M = " + std::to_string(out->M) + "; modelled: M = 128 with cta_group::1";
  if (out->N < 16 || out->N > 256 || out->N % 16)
    return who + "N = " + std::to_string(out->N) + "; for M = 128 N is a multiple of 16 in [16, 256]";
  return "";
}

inline std::string decode_idesc_f16(uint32_t d, InstrDescF16* out) { return decode_idesc(TcKind::F16, d, out); }

// The tcgen05 shared memory descriptor rewritten as the wgmma descriptor with the same fields.
inline std::string tcgen05_desc_as_wgmma(uint64_t d, uint64_t* wg) {
  const std::string who = "tcgen05.mma: shared memory descriptor " + hexstr(d) + ": ";
  if (((d >> 46) & 7u) != 1u) return who + "bits 46-48 must hold the constant 0b001";
  if ((d >> 52) & 1u) return who + "absolute leading-dimension mode (bit 52) is not modelled (sm_103a)";
  if ((d >> 53) & 0xFFu) return who + "bits 53-60 must be 0";
  if (d & ((3ull << 14) | (3ull << 30))) return who + "reserved bits 14-15 and 30-31 must be 0";
  const int sw = int(d >> 61);
  int layout;
  switch (sw) {
    case 0: layout = 0; break;  // no swizzle
    case 2: layout = 1; break;  // 128-byte
    case 4: layout = 2; break;  // 64-byte
    case 6: layout = 3; break;  // 32-byte
    case 1: return who + "128-byte swizzle with 32-byte atoms (mode 1) is not modelled";
    default: return who + "swizzle mode " + std::to_string(sw) + " (bits 61-63) is invalid";
  }
  *wg = (d & ((1ull << 46) - 1)) | (((d >> 49) & 7u) << 49) | (uint64_t(layout) << 62);
  return "";
}

// One 8-bit K-major operand (rows x 32) of a kind::f8f6f4 MMA: the descriptor checks are wgmma_load_operand's
// (the byte geometry is kind::f16's: two 16-byte chunks per row), the elements decoded with hrt_fp8.h (fmt 0
// E4M3, 1 E5M2). out == nullptr: validate only.
// The 32 bytes of each of `rows` K-major operand rows one K step of a tcgen05.mma reads (two 16-byte chunks of the
// canonical layout): byte(r, j, value) for j = 0..31. Validates first (wgmma_load_operand's descriptor checks);
// with visit false only validates.
template <typename F>
inline std::string tcgen05_operand_bytes(const char* name, int rows, uint64_t desc, const uint8_t* smem,
                                         uint32_t smem_bytes, bool visit, Access* acc, F&& byte) {
  std::string err = wgmma_load_operand(name, rows, false, desc, 0, smem, smem_bytes, nullptr, acc, "tcgen05.mma");
  if (!err.empty() || !visit) return err;
  const MatrixDesc md = decode_matrix_desc(desc);
  const int span = desc_swizzle_span(md.layout);
  RangeBatcher rb(acc, false);
  for (int r = 0; r < rows; ++r)
    for (int q = 0; q < 2; ++q) {
      const uint32_t phys = swizzle_addr(md.start + wgmma_chunk_offset(false, span, md.lbo, md.sbo, r, q), span);
      rb.add(phys, 16);
      for (int e = 0; e < 16; ++e) byte(r, q * 16 + e, smem[phys + uint32_t(e)]);
    }
  return "";
}

inline std::string tcgen05_load_operand_f8(const char* name, int rows, int fmt, uint64_t desc, const uint8_t* smem,
                                           uint32_t smem_bytes, float (*out)[32], Access* acc) {
  return tcgen05_operand_bytes(name, rows, desc, smem, smem_bytes, out != nullptr, acc, [&](int r, int j, uint8_t v) {
    out[r][j] = float(minifloat_decode(fmt == 0 ? kE4M3 : kE5M2, v));
  });
}

// tcgen05.mma.cta_group::1.kind::{f16, f8f6f4} with A and B in shared memory.  Validates everything first, so a
// failing call changes and reports nothing.
inline std::string tcgen05_mma_ss(TcKind kind, Tmem& t, uint32_t d_addr, uint64_t a_desc, uint64_t b_desc,
                                  uint32_t idesc, bool enable_input_d, const uint8_t* smem, uint32_t smem_bytes,
                                  Access* acc) {
  InstrDescF16 id;
  std::string err = decode_idesc(kind, idesc, &id);
  if (!err.empty()) return err;
  const uint32_t lane0 = tmem_lane(d_addr), col0 = tmem_col(d_addr);
  if (lane0 != 0)
    return "tcgen05.mma: D address " + hexstr(d_addr) + " starts at lane " + std::to_string(lane0) +
           "; an M = 128 accumulator spans lanes 0-127";
  if (!t.columns_allocated(col0, id.N))
    return "tcgen05.mma: D columns " + std::to_string(col0) + ".." + std::to_string(col0 + id.N - 1) +
           " are not all allocated (tcgen05.alloc)";
  uint64_t wa, wb;
  err = tcgen05_desc_as_wgmma(a_desc, &wa);
  if (err.empty()) err = tcgen05_desc_as_wgmma(b_desc, &wb);
  if (!err.empty()) return err;
  static thread_local float A[128][32];
  static thread_local float B[256][32];
  if (kind == TcKind::F16) {
    static thread_local float A16[128][16];
    static thread_local float B16[256][16];
    err = wgmma_load_operand("A", 128, id.bf16, wa, id.mnMajorA, smem, smem_bytes, nullptr, acc, "tcgen05.mma");
    if (err.empty()) err = wgmma_load_operand("B", id.N, id.bf16, wb, id.mnMajorB, smem, smem_bytes, nullptr, acc,
                                              "tcgen05.mma");
    if (!err.empty()) return err;
    wgmma_load_operand("A", 128, id.bf16, wa, id.mnMajorA, smem, smem_bytes, A16, acc, "tcgen05.mma");
    wgmma_load_operand("B", id.N, id.bf16, wb, id.mnMajorB, smem, smem_bytes, B16, acc, "tcgen05.mma");
    for (int i = 0; i < 128; ++i) std::memcpy(A[i], A16[i], sizeof A16[i]);
    for (int j = 0; j < id.N; ++j) std::memcpy(B[j], B16[j], sizeof B16[j]);
  } else {
    err = tcgen05_load_operand_f8("A", 128, id.fmtA, wa, smem, smem_bytes, nullptr, acc);
    if (err.empty()) err = tcgen05_load_operand_f8("B", id.N, id.fmtB, wb, smem, smem_bytes, nullptr, acc);
    if (!err.empty()) return err;
    tcgen05_load_operand_f8("A", 128, id.fmtA, wa, smem, smem_bytes, A, acc);
    tcgen05_load_operand_f8("B", id.N, id.fmtB, wb, smem, smem_bytes, B, acc);
  }
  const float sa = id.negA ? -1.0f : 1.0f, sb = id.negB ? -1.0f : 1.0f;
  const int K = id.K();
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < id.N; ++j) {
      uint32_t& c = t.cell[lane0 + uint32_t(i)][col0 + uint32_t(j)];
      float s = enable_input_d ? f32_from_bits(c) : 0.0f;
      for (int k = 0; k < K; ++k) s += (sa * A[i][k]) * (sb * B[j][k]);
      c = f32_bits(s);
    }
  return "";
}

inline std::string tcgen05_mma_f16_ss(Tmem& t, uint32_t d_addr, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                      bool enable_input_d, const uint8_t* smem, uint32_t smem_bytes, Access* acc) {
  return tcgen05_mma_ss(TcKind::F16, t, d_addr, a_desc, b_desc, idesc, enable_input_d, smem, smem_bytes, acc);
}

// tcgen05.ld.sync.aligned.32x32b.x<num>.b32 by warp `warp` (its index in the CTA): out[t][r] for
// thread t of the warp, register r.
inline std::string tcgen05_ld_32x32b(const Tmem& t, int warp, uint32_t addr, int num, uint32_t (*out)[128]) {
  const std::string who = "tcgen05.ld.32x32b.x" + std::to_string(num) + " of " + hexstr(addr) + " by warp " +
                          std::to_string(warp) + ": ";
  if (num < 1 || num > 128 || (num & (num - 1))) return who + ".num is x1, x2, x4, .. x128";
  const uint32_t lane0 = tmem_lane(addr), col0 = tmem_col(addr);
  if (lane0 != uint32_t(32 * (warp % 4)))
    return who + "warp " + std::to_string(warp) + " may access lanes " + std::to_string(32 * (warp % 4)) + "-" +
           std::to_string(32 * (warp % 4) + 31) + " only (warp w of a warpgroup owns lanes 32*(w%4)..+31); the "
           "address names lane " + std::to_string(lane0);
  if (!t.columns_allocated(col0, num))
    return who + "columns " + std::to_string(col0) + ".." + std::to_string(col0 + uint32_t(num) - 1) +
           " are not all allocated";
  for (int th = 0; th < 32; ++th)
    for (int r = 0; r < num; ++r) out[th][r] = t.cell[lane0 + uint32_t(th)][col0 + uint32_t(r)];
  return "";
}

}  // namespace ptx
}  // namespace heddle_rt

#endif  // HEDDLE_RT_HRT_PTX_TCGEN05_H
