// hrt_ptx_tcgen05_mx.h -- data semantics of the sm_100a block-scaled tcgen05 primitives for the CPU interpreter:
// tcgen05.cp (shared memory -> tensor memory, the scale factors' path), tcgen05.mma.cta_group::1
// .kind::mxf8f6f4.block_scale.scale_vec::1X (MXFP8: e4m3 / e5m2 data, one ue8m0 scale per 32 elements of K) and
// .kind::mxf4nvf4.block_scale.scale_vec::4X (NVFP4: packed e2m1 data, one ue4m3 scale per 16; at the end) and
// .kind::mxf4.block_scale.scale_vec::2X (MXFP4: packed e2m1 data, one ue8m0 scale per 32; the NVFP4 model's operands).
// Written from the PTX ISA (9.x), independently of the device header (heddle_sm100_mx.cuh); header-only, C++17.
//
//   * Instruction descriptor, .kind::mxf8f6f4 (9.7.16.4.2, table 43): bits 0-1 reserved, 2 sparsity, 3 reserved,
//     4-5 scale factor B ID, 6 reserved, 7-9 A type and 10-12 B type (E4M3 0, E5M2 1; E2M3 3, E3M2 4, E2M1 5 not
//     modelled), 13/14 negate A/B, 15/16 transpose A/B, 17-22 N>>3, 23 scale type (UE8M0 = 1), 24-26 reserved,
//     27-28 M>>7, 29-30 scale factor A ID, 31 reserved.  (M = 128 sets bit 27 here, the bit kind::f16's M>>4 at
//     24-28 sets: the two tables agree on M = 128.)
//   * Block scaling (9.7.16.10.7): D = (A * scale_A) * (B * scale_B) + D, scale_A M x 1 and scale_B 1 x N for
//     scale_vec::1X (table 54: kind::mxf8f6f4, K = 32, UE8M0 scales, table 55).  The scale of row i of A is one
//     byte of a 32-bit tensor-memory word, the byte the scale factor A ID selects (9.7.16.10.7.2.1: "SFA_ID
//     specifies the byte offset in the Tensor Memory word"); likewise column j of B and the B ID.  The scale
//     factors "need to be duplicated to all 32 lane partitions of tensor memory" (the four 32-lane quarters).
//     Where row i sits: lane i % 32 of every quarter, column (scale address column) + i / 32 -- the layout a
//     tcgen05.cp.32x128b.warpx4 of one 512-byte chunk of the cuBLAS / torch "blocked" scale layout writes
//     (torch.testing._internal.common_quantized.to_blocked: byte r0*16 + r1*4 + c holds row r1*32 + r0, k-block
//     c; CUTLASS's SM100 block-scaled collective copies the same chunk with its 4x32dp128bit UTCCP atom).  The
//     model reports an error when the four quarters disagree, so a copy that
//     did not multicast shows.  Column j of B likewise: lane j % 32, column + j / 32 (N up to 256: 8 columns).
//   * tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], s-desc (9.7.16.9.2; shape 9.7.16.2.3): 32 rows of 128 bits
//     from shared memory, described by a matrix descriptor (table 40), multicast to all four warps' lane quarters:
//     row r lands in lane 32*q + r, columns col .. col+3 (16 bytes, little-endian words), for q = 0..3.  The
//     source is the canonical no-swizzle K-major layout: 8-row core matrices of 16-byte rows (row r at start +
//     (r / 8) * SBO + (r % 8) * 16).  Modelled: no swizzle, the address at lane 0.
//   * Ordering (9.7.16.6.2): tcgen05.cp -> tcgen05.mma of the same thread execute in issue order (pipelined pair
//     2), so an MMA issued after a copy by one thread reads what the copy wrote; tcgen05.mma -> tcgen05.cp is not a
//     pipelined pair: a copy over scales an earlier MMA still reads needs that MMA's completion (tcgen05.commit
//     and an mbarrier wait).  The interpreter runs each operation at issue, so ordering is the scheduler's
//     (hrt_tcgen05.cpp), not this file's.
#ifndef HEDDLE_RT_HRT_PTX_TCGEN05_MX_H
#define HEDDLE_RT_HRT_PTX_TCGEN05_MX_H

#include <cstdint>
#include <string>
#include <tuple>

#include "hrt_ptx_tcgen05.h"

namespace heddle_rt {
namespace ptx {

// Decoded kind::mxf8f6f4 instruction descriptor.
struct InstrDescMx {
  int fmtA = 0, fmtB = 0;  // 0 E4M3, 1 E5M2
  bool negA = false, negB = false;
  int M = 0, N = 0;
  int sfaId = 0, sfbId = 0;  // the byte of the scale word (scale_vec::1X)
};

inline std::string decode_idesc_mx(uint32_t d, InstrDescMx* out) {
  const std::string who = "tcgen05.mma.kind::mxf8f6f4: instruction descriptor " + hexstr(d) + ": ";
  if (d & 0x3u) return who + "bits 0-1 are reserved (0)";
  if (d & 0x4u) return who + "sparsity (bit 2) is not modelled; use a dense descriptor";
  if (d & ((1u << 3) | (1u << 6) | (7u << 24) | (1u << 31))) return who + "reserved bits 3, 6, 24-26 and 31 must be 0";
  if (!((d >> 23) & 1u)) return who + "scale matrix type (bit 23) must be UE8M0 (1) for kind::mxf8f6f4";
  const uint32_t at = (d >> 7) & 7u, bt = (d >> 10) & 7u;
  for (uint32_t t : {at, bt})
    if (t > 1)
      return who + "A type " + std::to_string(at) + " and B type " + std::to_string(bt) + " (bits 7-9, 10-12): " +
             (t == 3 || t == 4 || t == 5 ? "the 6- and 4-bit formats (E2M3 3, E3M2 4, E2M1 5) are not modelled"
                                         : "not an mxf8f6f4 format") +
             "; E4M3 is 0, E5M2 1";
  if ((d >> 15) & 3u) return who + "transpose A/B (bits 15, 16) set: MN-major operands are not modelled; K-major only";
  out->fmtA = int(at);
  out->fmtB = int(bt);
  out->negA = (d >> 13) & 1u;
  out->negB = (d >> 14) & 1u;
  out->N = int((d >> 17) & 0x3Fu) << 3;
  out->M = int((d >> 27) & 3u) << 7;
  out->sfbId = int((d >> 4) & 3u);
  out->sfaId = int((d >> 29) & 3u);
  if (out->M != 128) return who + "M = " + std::to_string(out->M) + " (bits 27-28: M>>7); modelled: M = 128";
  if (out->N < 8 || out->N > 256)
    return who + "N = " + std::to_string(out->N) + "; for M = 128 N is a multiple of 8 in [8, 256] (9.7.16.2.1)";
  return "";
}

// tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], sdesc.  Validates first: a failing call changes nothing.
inline std::string tcgen05_cp_32x128b_warpx4(Tmem& t, uint32_t taddr, uint64_t sdesc, const uint8_t* smem,
                                             uint32_t smem_bytes, Access* acc) {
  const std::string who = "tcgen05.cp.32x128b.warpx4 to " + hexstr(taddr) + ": ";
  uint64_t wg = 0;
  std::string err = tcgen05_desc_as_wgmma(sdesc, &wg);
  if (!err.empty()) return who + err;
  if (sdesc >> 61) return who + "the source descriptor is swizzled; modelled: no swizzle (16-byte rows of 8-row "
                                "core matrices)";
  if (tmem_lane(taddr) != 0) return who + "the address names lane " + std::to_string(tmem_lane(taddr)) +
                                    "; .warpx4 writes all four lane quarters from lane 0";
  const uint32_t col = tmem_col(taddr);
  if (!t.columns_allocated(col, 4)) return who + "columns " + std::to_string(col) + ".." + std::to_string(col + 3) +
                                           " are not all allocated (tcgen05.alloc)";
  const uint32_t start = uint32_t(sdesc & 0x3FFFu) << 4, sbo = uint32_t((sdesc >> 32) & 0x3FFFu) << 4;
  auto row_addr = [&](int r) { return start + uint32_t(r / 8) * sbo + uint32_t(r % 8) * 16u; };
  for (int r = 0; r < 32; ++r)
    if (row_addr(r) + 16 > smem_bytes)
      return who + "source row " + std::to_string(r) + " at shared byte " + std::to_string(row_addr(r)) +
             " lies outside the " + std::to_string(smem_bytes) + "-byte shared allocation";
  RangeBatcher rb(acc, false);
  for (int r = 0; r < 32; ++r) {
    const uint32_t a = row_addr(r);
    rb.add(a, 16);
    for (int w = 0; w < 4; ++w) {
      uint32_t v = 0;
      for (int b = 0; b < 4; ++b) v |= uint32_t(smem[a + uint32_t(4 * w + b)]) << (8 * b);
      for (int q = 0; q < 4; ++q) t.cell[32 * q + r][col + uint32_t(w)] = v;
    }
  }
  return "";
}

// The ue8m0 scale of row (or column) i: byte `id` of lane i % 32, column col + i / 32, the same in all four
// lane quarters (9.7.16.10.7).
inline std::string tcgen05_scale_at(const Tmem& t, const char* which, uint32_t addr, int i, int id, double* out) {
  const uint32_t col = tmem_col(addr) + uint32_t(i / 32), lane = uint32_t(i % 32);
  uint32_t byte[4];
  for (int q = 0; q < 4; ++q) byte[q] = (t.cell[32 * q + lane][col] >> (8 * id)) & 0xFFu;
  for (int q = 1; q < 4; ++q)
    if (byte[q] != byte[0])
      return std::string("tcgen05.mma.kind::mxf8f6f4: scale ") + which + " of " + (which[0] == 'A' ? "row " :
             "column ") + std::to_string(i) + " differs between lane quarters 0 and " + std::to_string(q) +
             " (column " + std::to_string(col) + ", byte " + std::to_string(id) + "); block scales must be "
             "duplicated to all four 32-lane partitions (PTX ISA 9.7.16.10.7: tcgen05.cp .warpx4)";
  *out = ue8m0_decode(byte[0]);
  return "";
}

// D[i][j] (+)= sum over k < K of (A[i][k] * scaleA(i, k)) * (B[j][k] * scaleB(j, k)): each product exact in
// double, the sum in f32 (the accumulation of the kind::f8f6f4 model).
template <int K, typename SA, typename SB>
inline void tcgen05_accumulate_scaled(Tmem& t, uint32_t d_addr, int N, bool enable_input_d, const float (*A)[K],
                                      const float (*B)[K], bool negA, bool negB, SA&& scaleA, SB&& scaleB) {
  const uint32_t lane0 = tmem_lane(d_addr), col0 = tmem_col(d_addr);
  const double na = negA ? -1.0 : 1.0, nb = negB ? -1.0 : 1.0;
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < N; ++j) {
      uint32_t& c = t.cell[lane0 + uint32_t(i)][col0 + uint32_t(j)];
      float s = enable_input_d ? f32_from_bits(c) : 0.0f;
      for (int k = 0; k < K; ++k) s += float((na * A[i][k] * scaleA(i, k)) * (nb * B[j][k] * scaleB(j, k)));
      c = f32_bits(s);
    }
}

// tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [d], a-desc, b-desc, idesc, [sfa], [sfb],
// enable-input-d: D (128 x N, f32) (+)= sum over the K = 32 of (A[i][k] * sA(i)) * (B[j][k] * sB(j)); the products
// are exact in double and summed in f32 (the accumulation order of the kind::f8f6f4 model).
inline std::string tcgen05_mma_mx_ss(Tmem& t, uint32_t d_addr, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                     uint32_t sfa_addr, uint32_t sfb_addr, bool enable_input_d, const uint8_t* smem,
                                     uint32_t smem_bytes, Access* acc) {
  InstrDescMx id;
  std::string err = decode_idesc_mx(idesc, &id);
  if (!err.empty()) return err;
  const uint32_t lane0 = tmem_lane(d_addr), col0 = tmem_col(d_addr);
  if (lane0 != 0)
    return "tcgen05.mma.kind::mxf8f6f4: D address " + hexstr(d_addr) + " starts at lane " + std::to_string(lane0) +
           "; an M = 128 accumulator spans lanes 0-127";
  if (!t.columns_allocated(col0, id.N))
    return "tcgen05.mma.kind::mxf8f6f4: D columns " + std::to_string(col0) + ".." + std::to_string(col0 + id.N - 1) +
           " are not all allocated (tcgen05.alloc)";
  for (auto [name, a, n] : {std::tuple<const char*, uint32_t, int>{"A", sfa_addr, 128}, {"B", sfb_addr, id.N}}) {
    if (tmem_lane(a) != 0)
      return std::string("tcgen05.mma.kind::mxf8f6f4: scale ") + name + " address " + hexstr(a) +
             " names lane " + std::to_string(tmem_lane(a)) + "; the scales span all lane quarters from lane 0";
    if (!t.columns_allocated(tmem_col(a), (n + 31) / 32))
      return std::string("tcgen05.mma.kind::mxf8f6f4: scale ") + name + " columns " +
             std::to_string(tmem_col(a)) + ".." + std::to_string(tmem_col(a) + uint32_t((n + 31) / 32) - 1) +
             " are not all allocated";
  }
  uint64_t wa, wb;
  err = tcgen05_desc_as_wgmma(a_desc, &wa);
  if (err.empty()) err = tcgen05_desc_as_wgmma(b_desc, &wb);
  if (err.empty()) err = tcgen05_load_operand_f8("A", 128, id.fmtA, wa, smem, smem_bytes, nullptr, acc);
  if (err.empty()) err = tcgen05_load_operand_f8("B", id.N, id.fmtB, wb, smem, smem_bytes, nullptr, acc);
  if (!err.empty()) return err;
  static thread_local double sA[128], sB[256];
  for (int i = 0; i < 128 && err.empty(); ++i) err = tcgen05_scale_at(t, "A", sfa_addr, i, id.sfaId, &sA[i]);
  for (int j = 0; j < id.N && err.empty(); ++j) err = tcgen05_scale_at(t, "B", sfb_addr, j, id.sfbId, &sB[j]);
  if (!err.empty()) return err;
  static thread_local float A[128][32];
  static thread_local float B[256][32];
  tcgen05_load_operand_f8("A", 128, id.fmtA, wa, smem, smem_bytes, A, acc);
  tcgen05_load_operand_f8("B", id.N, id.fmtB, wb, smem, smem_bytes, B, acc);
  tcgen05_accumulate_scaled<32>(t, d_addr, id.N, enable_input_d, A, B, id.negA, id.negB,
                                 [&](int i, int) { return sA[i]; }, [&](int j, int) { return sB[j]; });
  return "";
}

// ---- NVFP4 / MXFP4: tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X, kind::mxf4 .scale_vec::2X ---
//   * Instruction descriptor, .kind::mxf4 / .kind::mxf4nvf4 (9.7.16.4.2, table 44): 0-1 reserved, 2 sparsity, 3
//     reserved, 4-5 B scale factor ID, 6 reserved, 7-9 A type (E2M1 = 1), 10-11 B type (E2M1 = 1), 12 reserved,
//     13/14 negate, 15/16 transpose (0 only), 17-22 N>>3, 23 scale type (UE8M0 1, UE4M3 0), 24-26 reserved, 27-28
//     M>>7, 29-30 A scale factor ID, 31 K (dense K = 64: 0). CUTLASS's UMMA::InstrDescriptorBlockScaled has the same
//     fields (MXF4Format::E2M1 = 1, ScaleFormat UE4M3 0 / UE8M0 1, k_size_ 0 = dense K64). Modelled, dense, M = 128:
//     NVFP4, UE4M3 scales with scale_vec::4X (table 55: E2M1 data, UE4M3 scales, 4X / block16 only), and MXFP4,
//     kind::mxf4 with scale_vec::2X (table 55: kind::mxf4 takes E2M1 data with UE8M0 scales at 2X only).
//   * Operands (9.7.16.10.4.6): two e2m1 per byte, no padding; K = 64 per instruction is 32 bytes of a row, the
//     byte geometry of the 8-bit kinds (two 16-byte chunks of 32 elements; the canonical layouts count T = 128 /
//     bits elements per 16 bytes). Element 2j is the low nibble of byte j and 2j+1 the high one (the order of
//     torch.float4_e2m1fn_x2; the ISA's figure is the authority a B200 run must confirm).
//   * Scales, scale_vec::4X (9.7.16.10.7.2.3): four scale factors per row, one per 16 elements of K, in a 4-byte
//     aligned sub-column; the ID must be 0 (the whole word): byte c of lane i%32, column col + i/32 scales elements
//     16c .. 16c+15 of the instruction's K -- one 512-byte blocked chunk per instruction. UE4M3: e4m3 without a
//     sign (bit 7 must be 0).
//   * Scales, scale_vec::2X (9.7.16.10.7.2.2): two scale factors per row, one per 32 elements of K, in a 2-byte
//     aligned sub-column; the ID is the half word offset (0 or 2): byte ID + c of lane i%32, column col + i/32 scales
//     elements 32c .. 32c+31 -- the two instructions of a 128-element k tile read the two halves of one chunk's word.
struct InstrDescNvf4 {
  bool negA = false, negB = false;
  int M = 0, N = 0;
  int sfaId = 0, sfbId = 0;  // scale_vec::2X: the half word (byte 0 or 2) of the scale word
};

// vec 4: kind::mxf4nvf4 .scale_vec::4X (NVFP4); vec 2: kind::mxf4 .scale_vec::2X (MXFP4)
inline std::string decode_idesc_fp4(uint32_t d, InstrDescNvf4* out, int vec) {
  const std::string who =
      std::string("tcgen05.mma.kind::") + (vec == 4 ? "mxf4nvf4" : "mxf4") + ": instruction descriptor " + hexstr(d) + ": ";
  if (d & 0x4u) return who + "sparsity (bit 2) is not modelled; use a dense descriptor";
  if (d & (0x3u | (1u << 3) | (1u << 6) | (1u << 12) | (7u << 24)))
    return who + "reserved bits 0-1, 3, 6, 12 and 24-26 must be 0";
  if (d >> 31) return who + "bit 31 (K = 96) belongs to cta_group::2; dense cta_group::1 has K = 64 (0)";
  const bool ue8m0 = (d >> 23) & 1u;
  if (vec == 4 && ue8m0)
    return who + "scale type (bit 23) UE8M0 with scale_vec::4X is not modelled (NVFP4's UE4M3 is 0); MXFP4 is "
                 "kind::mxf4 .scale_vec::2X";
  if (vec == 2 && !ue8m0) return who + "scale type (bit 23) must be UE8M0 (1): kind::mxf4 takes ue8m0 scales only";
  if (((d >> 7) & 7u) != 1u || ((d >> 10) & 3u) != 1u)
    return who + "A type (bits 7-9) and B type (bits 10-11) must be E2M1 (1)";
  if ((d >> 15) & 3u) return who + "transpose A/B (bits 15, 16) must be 0 for the fp4 kinds";
  out->sfbId = int((d >> 4) & 3u);
  out->sfaId = int((d >> 29) & 3u);
  if (vec == 4 && (out->sfaId || out->sfbId))
    return who + "scale factor IDs (bits 4-5, 29-30) must be 0 with scale_vec::4X (the whole word)";
  if (vec == 2 && ((out->sfaId | out->sfbId) & 1))
    return who + "scale factor IDs (bits 4-5, 29-30) are " + std::to_string(out->sfaId) + " (A) and " +
           std::to_string(out->sfbId) + " (B); with scale_vec::2X each is a half word offset, 0 or 2";
  out->negA = (d >> 13) & 1u;
  out->negB = (d >> 14) & 1u;
  out->N = int((d >> 17) & 0x3Fu) << 3;
  out->M = int((d >> 27) & 3u) << 7;
  if (out->M != 128) return who + "M = " + std::to_string(out->M) + " (bits 27-28: M>>7); modelled: M = 128";
  if (out->N < 8 || out->N > 256)
    return who + "N = " + std::to_string(out->N) + "; for M = 128 N is a multiple of 8 in [8, 256] (9.7.16.2.1)";
  return "";
}
inline std::string decode_idesc_nvf4(uint32_t d, InstrDescNvf4* out) { return decode_idesc_fp4(d, out, 4); }

// One packed e2m1 K-major operand (rows x 64 elements, 32 bytes a row) of a kind::mxf4nvf4 MMA.
inline std::string tcgen05_load_operand_f4(const char* name, int rows, uint64_t desc, const uint8_t* smem,
                                           uint32_t smem_bytes, float (*out)[64], Access* acc) {
  return tcgen05_operand_bytes(name, rows, desc, smem, smem_bytes, out != nullptr, acc, [&](int r, int j, uint8_t v) {
    out[r][2 * j] = float(minifloat_decode(kE2M1, v & 0xFu));
    out[r][2 * j + 1] = float(minifloat_decode(kE2M1, uint32_t(v) >> 4));
  });
}

// The scales of row (column) i for one instruction: vec 4, the four ue4m3 bytes of the word; vec 2, the two ue8m0
// bytes from `id` (out[0..1]). The word of lane i % 32, column col + i / 32, equal in all four lane quarters.
inline std::string tcgen05_fp4_scales_at(const Tmem& t, const char* which, uint32_t addr, int i, int vec, int id,
                                         double (&out)[4]) {
  const char* kind = vec == 4 ? "tcgen05.mma.kind::mxf4nvf4" : "tcgen05.mma.kind::mxf4";
  const uint32_t col = tmem_col(addr) + uint32_t(i / 32), lane = uint32_t(i % 32);
  const uint32_t w = t.cell[lane][col];
  for (int q = 1; q < 4; ++q)
    if (t.cell[32 * q + lane][col] != w)
      return std::string(kind) + ": scales " + which + " of " + (which[0] == 'A' ? "row " : "column ") +
             std::to_string(i) + " differ between lane quarters 0 and " + std::to_string(q) + " (column " +
             std::to_string(col) + "); block scales must be duplicated to all four 32-lane partitions (PTX ISA "
             "9.7.16.10.7: tcgen05.cp .warpx4)";
  for (int c = 0; c < vec; ++c) {
    const uint32_t b = (w >> (8 * (id + c))) & 0xFFu;
    if (vec == 2) {
      out[c] = ue8m0_decode(b);
      continue;
    }
    if (b & 0x80u)
      return std::string(kind) + ": scale " + which + " of " + std::to_string(i) + ", block " + std::to_string(c) +
             " is " + hexstr(b) + ": ue4m3 scales are unsigned (bit 7 is 0)";
    out[c] = minifloat_decode(kE4M3, b);
  }
  return "";
}

// tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X (vec 4) or kind::mxf4.block_scale.scale_vec::2X
// (vec 2) [d], a-desc, b-desc, idesc, [sfa], [sfb], enable-input-d: D (+)= sum over K = 64 of
// (A[i][k] * sA(i, k/(64/vec))) * (B[j][k] * sB(j, k/(64/vec))), summed in f32.
inline std::string tcgen05_mma_fp4_ss(Tmem& t, uint32_t d_addr, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                      uint32_t sfa_addr, uint32_t sfb_addr, bool enable_input_d, const uint8_t* smem,
                                      uint32_t smem_bytes, Access* acc, int vec) {
  InstrDescNvf4 id;
  std::string err = decode_idesc_fp4(idesc, &id, vec);
  if (!err.empty()) return err;
  const std::string kind = vec == 4 ? "tcgen05.mma.kind::mxf4nvf4" : "tcgen05.mma.kind::mxf4";
  const uint32_t lane0 = tmem_lane(d_addr), col0 = tmem_col(d_addr);
  if (lane0 != 0 || !t.columns_allocated(col0, id.N))
    return kind + ": D address " + hexstr(d_addr) + ": an M = 128 accumulator starts at lane 0 and its " +
           std::to_string(id.N) + " columns must be allocated";
  for (auto [name, a, n] : {std::tuple<const char*, uint32_t, int>{"A", sfa_addr, 128}, {"B", sfb_addr, id.N}})
    if (tmem_lane(a) != 0 || !t.columns_allocated(tmem_col(a), (n + 31) / 32))
      return kind + ": scale " + name + " address " + hexstr(a) + ": the scales start at lane 0 and their " +
             std::to_string((n + 31) / 32) + " columns must be allocated";
  uint64_t wa, wb;
  err = tcgen05_desc_as_wgmma(a_desc, &wa);
  if (err.empty()) err = tcgen05_desc_as_wgmma(b_desc, &wb);
  if (err.empty()) err = tcgen05_load_operand_f4("A", 128, wa, smem, smem_bytes, nullptr, acc);
  if (err.empty()) err = tcgen05_load_operand_f4("B", id.N, wb, smem, smem_bytes, nullptr, acc);
  if (!err.empty()) return err;
  static thread_local double sA[128][4], sB[256][4];
  for (int i = 0; i < 128 && err.empty(); ++i) err = tcgen05_fp4_scales_at(t, "A", sfa_addr, i, vec, id.sfaId, sA[i]);
  for (int j = 0; j < id.N && err.empty(); ++j) err = tcgen05_fp4_scales_at(t, "B", sfb_addr, j, vec, id.sfbId, sB[j]);
  if (!err.empty()) return err;
  static thread_local float A[128][64];
  static thread_local float B[256][64];
  tcgen05_load_operand_f4("A", 128, wa, smem, smem_bytes, A, acc);
  tcgen05_load_operand_f4("B", id.N, wb, smem, smem_bytes, B, acc);
  const int block = 64 / vec;  // 16 (4X) or 32 (2X) elements of K per scale
  tcgen05_accumulate_scaled<64>(t, d_addr, id.N, enable_input_d, A, B, id.negA, id.negB,
                                 [&](int i, int k) { return sA[i][k / block]; },
                                 [&](int j, int k) { return sB[j][k / block]; });
  return "";
}
inline std::string tcgen05_mma_nvf4_ss(Tmem& t, uint32_t d_addr, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                       uint32_t sfa_addr, uint32_t sfb_addr, bool enable_input_d, const uint8_t* smem,
                                       uint32_t smem_bytes, Access* acc) {
  return tcgen05_mma_fp4_ss(t, d_addr, a_desc, b_desc, idesc, sfa_addr, sfb_addr, enable_input_d, smem, smem_bytes,
                            acc, 4);
}

}  // namespace ptx
}  // namespace heddle_rt

#endif  // HEDDLE_RT_HRT_PTX_TCGEN05_MX_H
