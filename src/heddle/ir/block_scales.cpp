// Block scales of a matmul (docs/fp8.md "Block scales and promotion"): the definition and its shape rules.
//
// DeepGEMM-style fine-grained scaling (its README; the DeepSeek-V3 report, "Fine-Grained Quantization"):
// A carries one f32 scale per row and 128 elements of K (1 x 128), B one per 128 x 128 block, so
//   D[m, n] = sum over kb of (A[m, kb*128 : kb*128+128] . B[kb*128 : ..., n]) * sa[m, kb] * sb[n / 128, kb]
// with sa = scale_a [M, ceil(K/128)] and sb = scale_b [ceil(N/128), ceil(K/128)]. The last block of K (and
// of N) may be partial: ceil counts it. The scales are part of the definition (the Expr of the matmul),
// not an epilogue op: they apply inside the k sum.
#include <sstream>

#include "heddle/ir/fusion.h"

namespace heddle {

const char* scaleKindName(ScaleKind k) { return k == ScaleKind::Block128 ? "block128" : "none"; }

ScaleKind scaleKindFromName(const std::string& s) {
  if (s == "block128") return ScaleKind::Block128;
  fail<ScheduleError>("matmul scales: unknown scale kind '", s,
                      "'; heddle's block scales are 'block128' (scale_a [M, ceil(K/128)], scale_b [ceil(N/128), "
                      "ceil(K/128)]); per-tensor and per-row scales are epilogue multiplies");
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
                        "; block scales are f32 of shape ", shape.str(), " (convert them with .float())");
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

}  // namespace

void Fusion::blockScales(TensorView* mm, TensorView* scaleA, TensorView* scaleB, ScaleKind kind) {
  for (auto* t : {mm, scaleA, scaleB}) checkOwned(t, "block_scales");
  Expr* e = mm->definition;
  if (!e || e->kind != OpKind::Matmul)
    fail<ScheduleError>("block_scales: ", mm->name, " is not a matmul output; block scales belong to a matmul");
  const std::string call = "block_scales(" + mm->name + ")";
  if (kind == ScaleKind::None) fail<ScheduleError>(call, ": scale kind 'none' gives no scales; use 'block128'");
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
  checkScale(scaleA, "scale_a", call, {M, K}, {false, true}, {M, K});
  checkScale(scaleB, "scale_b", call, {N, K}, {true, true}, {N, K});
  e->scaleKind = kind;
  e->scaleA = scaleA;
  e->scaleB = scaleB;
  scaleA->uses.push_back(e);
  scaleB->uses.push_back(e);
}

}  // namespace heddle
