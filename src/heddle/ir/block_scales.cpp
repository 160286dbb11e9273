// Block scales of a matmul (docs/fp8.md "Block scales and promotion"): the definition and its shape rules.
//
// DeepGEMM-style fine-grained scaling (its README; the DeepSeek-V3 report, "Fine-Grained Quantization"):
// A carries one f32 scale per row and 128 elements of K (1 x 128), B one per 128 x 128 block, so
//   D[m, n] = sum over kb of (A[m, kb*128 : kb*128+128] . B[kb*128 : ..., n]) * sa[m, kb] * sb[n / 128, kb]
// with sa = scale_a [M, ceil(K/128)] and sb = scale_b [ceil(N/128), ceil(K/128)]. The last block of K (and
// of N) may be partial: ceil counts it. The scales are part of the definition (the Expr of the matmul),
// not an epilogue op: they apply inside the k sum.
//
// MXFP8 (kind "mx32"; OCP Microscaling Formats (MX) v1.0: block size 32, scale E8M0 = 2^(e - 127), code 0xFF NaN;
// PTX ISA 9.7.16.10.7 "Block Scaling" for tcgen05.mma kind::mxf8f6f4): e4m3 / e5m2 data, one e8m0 scale per row
// and 32 elements of K for A and for B^T (B stored [N, K]: one per column of D), so
//   D[m, n] = sum over k of A[m, k] * B[k, n] * 2^(sa(m, k/32) - 127) * 2^(sb(n, k/32) - 127),
// the scales in torch's blocked layout (torch._scaled_mm's MX scales, cuBLAS "block scaling factors layout";
// docs/fp8.md "MX formats"): [round_up(rows, 128), round_up(K/32, 4)] bytes, 128 x 4 blocks of 512 contiguous
// bytes each, padded with zeros. K must be a multiple of 32 (the block; torch._scaled_mm asks K % 32 too).
//
// NVFP4 (kind "nv16"; PTX ISA 9.7.16.10.7, kind::mxf4nvf4 with scale_vec::4X and UE4M3 scales): e2m1 data packed two
// to a byte (torch.float4_e2m1fn_x2; A stored [M, K/2], B [N, K/2]), one ue4m3 scale (an e4m3 code with the sign bit
// clear) per row and 16 elements of K, in the same blocked layout: [round_up(rows, 128), round_up(K/16, 4)]
// (torch._scaled_mm's NVFP4 element counts, torch/_meta_registrations.py); K a multiple of 16.
//
// MXFP4 (kind "mx32" with e2m1x2 operands; OCP MX v1.0's MXFP4: E2M1 data, block 32, E8M0 scale; PTX ISA 9.7.16.10.7
// table 55: kind::mxf4 takes E2M1 with UE8M0 at scale_vec::2X): nv16's packed operands with mx32's scales, one e8m0
// per row and 32 elements of K, [round_up(rows, 128), round_up(K/32, 4)] -- torch's convention too (its
// _meta_registrations _scaled_mm: e8m0 scales mean block 32, and an e2m1x2 operand counts K = 2 * its stored
// columns); K a multiple of 32.
#include <sstream>

#include "heddle/ir/fusion.h"

namespace heddle {

const char* scaleKindName(ScaleKind k) {
  switch (k) {
    case ScaleKind::Block128: return "block128";
    case ScaleKind::Mx32: return "mx32";
    case ScaleKind::Nv16: return "nv16";
    case ScaleKind::None: break;
  }
  return "none";
}

ScaleKind scaleKindFromName(const std::string& s) {
  if (s == "block128") return ScaleKind::Block128;
  if (s == "mx32") return ScaleKind::Mx32;
  if (s == "nv16") return ScaleKind::Nv16;
  fail<ScheduleError>(
      "matmul scales: unknown scale kind '", s,
      "'; heddle's block scales are 'block128' (f32 scale_a [M, ceil(K/128)], scale_b [ceil(N/128), "
      "ceil(K/128)]), 'mx32' (MXFP8: e8m0 scales per 32 of K in torch's blocked layout) and 'nv16' (NVFP4: "
      "e4m3 scales per 16 of K, blocked likewise); "
      "per-tensor and per-row scales are epilogue multiplies");
}

namespace {

// ceil(s / 128) as a Size: concrete for a concrete s; for a symbolic s any symbol (bound at launch).
bool blocksMatch(const Size& s, const Size& blocks) {
  if (s.isSymbolic()) return blocks.isSymbolic();
  return !blocks.isSymbolic() && blocks.value == (s.value + kScaleBlock - 1) / kScaleBlock;
}

bool sizeMatch(const Size& want, const Size& got) {
  if (want.isSymbolic() || got.isSymbolic()) return want.isSymbolic() && got.isSymbolic() && want.symbol == got.symbol;
  return want.value == got.value;
}

std::string blocksStr(const Size& s) {
  if (s.isSymbolic()) return "ceil(" + s.symbol + "/128)";
  return std::to_string((s.value + kScaleBlock - 1) / kScaleBlock) + " (ceil(" + std::to_string(s.value) + "/128))";
}

void checkScale(const TensorView* sc, const char* which, const std::string& call, const std::vector<Size>& want,
                const std::vector<bool>& isBlocks, const std::vector<Size>& of) {
  std::ostringstream shape;
  shape << "[";
  for (size_t i = 0; i < want.size(); ++i) shape << (i ? ", " : "") << (isBlocks[i] ? blocksStr(of[i]) : want[i].str());
  shape << "]";
  if (!sc->isInput)
    fail<ScheduleError>(call, ": ", which, " ", sc->name,
                        " is computed inside the fusion; block scales are fusion inputs of shape ", shape.str(),
                        " f32");
  if (sc->dtype != DType::F32)
    fail<ScheduleError>(call, ": ", which, " ", sc->name, " is ", dtypeName(sc->dtype),
                        "; block scales are f32 of shape ", shape.str(),
                        sc->dtype == DType::E8M0 ? " (e8m0 scales in torch's blocked layout are MXFP8's: pass "
                                                   "scales='mx32')"
                                                 : " (convert them with .float())");
  bool ok = sc->rank() == (int)want.size();
  for (size_t i = 0; ok && i < want.size(); ++i)
    ok = isBlocks[i] ? blocksMatch(of[i], sc->shape[i]) : sizeMatch(want[i], sc->shape[i]);
  if (!ok)
    fail<ScheduleError>(call, ": ", which, " ", sc->str(), " has the wrong shape; block128 scales need ", which, " ",
                        shape.str(), " (",
                        which == std::string("scale_a") ? "one per row of A and 128 of K"
                                                        : "one per 128 x 128 block of B: 128 of N by 128 of K",
                        "; a symbolic K or N takes a symbolic "
                        "block count, checked at launch)");
}

// The three hardware block-scaled formats of sm_100a's tcgen05.mma (PTX ISA 9.7.16.10.7): MXFP8 (kind::mxf8f6f4,
// ue8m0 per 32), NVFP4 (kind::mxf4nvf4, ue4m3 per 16: e4m3 codes with the sign bit clear; e2m1 data packed two
// to a byte, so an operand's stored row is K / 2 bytes) and MXFP4 (kind::mxf4, ue8m0 per 32, packed e2m1).
struct MxFormat {
  const char* kind;    // "mx32" | "nv16"
  const char* format;  // "MXFP8" | "NVFP4" | "MXFP4"
  int block;           // elements of K per scale
  DType scale;         // e8m0 | e4m3 (ue4m3)
  const char* scaleTorch;
  int packing;  // elements per stored operand element
};

// mx32 with e2m1x2 operands is MXFP4 (the scale kind names the scales; the operands' dtype the data)
MxFormat mxFormat(ScaleKind k, DType operand) {
  if (k == ScaleKind::Nv16) return {"nv16", "NVFP4", 16, DType::E4M3, "torch.float8_e4m3fn, sign bit clear: ue4m3", 2};
  if (operand == DType::E2M1X2) return {"mx32", "MXFP4", kMxBlock, DType::E8M0, "torch.float8_e8m0fnu", 2};
  return {"mx32", "MXFP8", kMxBlock, DType::E8M0, "torch.float8_e8m0fnu", 1};
}

// round_up(K / block, 4) for k blocks, round_up(rows, 128) for rows (a concrete size; symbols bind at launch)
int64_t mxExtent(int64_t s, bool kBlocks, int block) {
  return kBlocks ? (s / block + 3) / 4 * 4 : (s + kScaleBlock - 1) / kScaleBlock * kScaleBlock;
}

std::string mxExtentStr(const Size& s, bool kBlocks, const MxFormat& fm) {
  if (s.isSymbolic())
    return kBlocks ? "round_up(" + std::string(fm.packing == 2 ? "2*" : "") + s.symbol + "/" +
                         std::to_string(fm.block) + ", 4)"  // (e2m1x2: the symbol counts bytes, two elements of K each)
                   : "round_up(" + s.symbol + ", 128)";
  return std::to_string(mxExtent(s.value, kBlocks, fm.block));
}

// MX / NVFP4 scales: fusion inputs [round_up(rows, 128), round_up(K/block, 4)] (torch's blocked layout).
void checkMxScale(const TensorView* sc, const char* which, const std::string& call, const Size& rows, const Size& K,
                  const char* rowsName, const MxFormat& fm) {
  const std::string shape = "[" + mxExtentStr(rows, false, fm) + ", " + mxExtentStr(K, true, fm) + "]";
  const std::string kind = fm.kind;
  if (!sc->isInput)
    fail<ScheduleError>(call, ": ", which, " ", sc->name, " is computed inside the fusion; ", kind,
                        " scales are fusion inputs, ", dtypeName(fm.scale), " of shape ", shape);
  if (sc->dtype != fm.scale)
    fail<ScheduleError>(call, ": ", which, " ", sc->name, " is ", dtypeName(sc->dtype), "; ", kind, " scales are ",
                        dtypeName(fm.scale), " (", fm.scaleTorch, ") of shape ", shape,
                        " in torch's blocked layout (torch._scaled_mm's block-scaled formats)");
  bool ok = sc->rank() == 2;
  for (int i = 0; ok && i < 2; ++i) {
    const Size& of = i ? K : rows;
    const Size& got = sc->shape[i];
    ok = of.isSymbolic() ? got.isSymbolic() : !got.isSymbolic() && got.value == mxExtent(of.value, i == 1, fm.block);
  }
  if (!ok)
    fail<ScheduleError>(call, ": ", which, " ", sc->str(), " has the wrong shape; ", kind, " scales need ", which, " ",
                        shape, ": one ", dtypeName(fm.scale), " byte per ", rowsName, " and ", fm.block,
                        " of K, padded to a multiple of 128 rows and of 4 k blocks (torch's to_blocked "
                        "layout; a symbolic size takes a symbolic extent, checked at launch)");
}

void mxScales(const Expr* e, const TensorView* mm, const TensorView* scaleA, const TensorView* scaleB,
              const std::string& call, const MxFormat& fm) {
  const TensorView* a = e->inputs[0];
  const TensorView* b = e->inputs[1];
  const bool fp4 = fm.packing == 2;
  for (const TensorView* op : {a, b})
    if (fp4 ? op->dtype != DType::E2M1X2 : !isFloat8(op->dtype))
      fail<ScheduleError>(
          call, ": operand ", op->name, " is ", dtypeName(op->dtype), "; ", fm.kind, " scales (", fm.format,
          fp4 ? ") take e2m1x2 operands (torch.float4_e2m1fn_x2, two e2m1 a byte)"
              : ") take e4m3 or e5m2 operands (torch.float8_e4m3fn / float8_e5m2)",
          fm.scale == DType::E8M0 ? "; mx32 takes e4m3 / e5m2 operands (MXFP8) or two e2m1x2 (MXFP4)" : "");
  const Size M = mm->shape[0], N = mm->shape[1];
  Size K = e->transA ? a->shape[0] : a->shape[1];
  if (!K.isSymbolic()) K.value *= fm.packing;  // e2m1x2: a stored row of K / 2 bytes
  if (!K.isSymbolic() && K.value % fm.block)
    fail<ScheduleError>(call, ": K = ", K.value, " (", a->name, ") is not a multiple of ", fm.block, "; an ", fm.format,
                        " scale covers ", fm.block, " elements of K: pad K with zeros to ",
                        (K.value + fm.block - 1) / fm.block * fm.block);
  checkMxScale(scaleA, "scale_a", call, M, K, "row of A", fm);
  checkMxScale(scaleB, "scale_b", call, N, K, "column of D (row of B stored [N, K])", fm);
}

}  // namespace

void Fusion::blockScales(TensorView* mm, TensorView* scaleA, TensorView* scaleB, ScaleKind kind) {
  for (auto* t : {mm, scaleA, scaleB}) checkOwned(t, "block_scales");
  Expr* e = mm->definition;
  if (!e || e->kind != OpKind::Matmul)
    fail<ScheduleError>("block_scales: ", mm->name, " is not a matmul output; block scales belong to a matmul");
  const std::string call = "block_scales(" + mm->name + ")";
  if (kind == ScaleKind::None)
    fail<ScheduleError>(call, ": scale kind 'none' gives no scales; use 'block128', 'mx32' or 'nv16'");
  if (e->scaleKind != ScaleKind::None) fail<ScheduleError>(call, ": the matmul already has block scales");
  if (matmuls().size() > 1)
    fail<ScheduleError>(call, ": this fusion is a matmul group (", matmuls().size(),
                        " matmuls sharing A); block scales take a single matmul: split the group");
  if (!e->groupOffsets.empty())
    fail<ScheduleError>(call, ": ", mm->name,
                        " is a grouped matmul; block scales take a plain rank-2 matmul in this build "
                        "(docs/grouped.md)");
  if (mm->rank() != 2)
    fail<ScheduleError>(call, ": ", mm->name,
                        " is batched (rank 3); block scales take a rank-2 matmul "
                        "[M, N]: run the batch as separate matmuls");
  const TensorView* a = e->inputs[0];
  const Size M = mm->shape[0], N = mm->shape[1];
  const Size K = e->transA ? a->shape[0] : a->shape[1];
  if (kind == ScaleKind::Mx32 || kind == ScaleKind::Nv16) {
    mxScales(e, mm, scaleA, scaleB, call, mxFormat(kind, a->dtype));
  } else {
    checkScale(scaleA, "scale_a", call, {M, K}, {false, true}, {M, K});
    checkScale(scaleB, "scale_b", call, {N, K}, {true, true}, {N, K});
  }
  e->scaleKind = kind;
  e->scaleA = scaleA;
  e->scaleB = scaleB;
  scaleA->uses.push_back(e);
  scaleB->uses.push_back(e);
}

}  // namespace heddle
