// Quantize with a computed scale (docs/fp8.md "Computed output scales"): the definition and its rules.
//
// A quantized layer hands its next FP8 matmul both the 8-bit activations and their scales. The scale is
// computed from the values themselves, per row in groups of `group` elements of the last axis:
//   s[m, j] = max(amax_{n in group j} |y[m, n]|, 1e-4) / max_finite(dt)       (f32, [M, ceil(N/group)])
//   q[m, n] = satfinite(y[m, n] / s[m, n / group])                          (dt, y's shape)
// so |q| <= max_finite(dt) and q * s recovers y up to dt's rounding. group = 128 gives DeepGEMM's 1 x 128
// activation layout, exactly the scale_a [M, ceil(K/128)] of heddle's block128 matmul (ir/block_scales.cpp):
// the next layer takes (q, s) as (a, scale_a) unchanged. The floor 1e-4 on the amax is DeepGEMM's
// (per_token_cast_to_fp8: `x_view.abs().float().amax(dim=2).view(m, -1).clamp(1e-4)`, scale amax / 448):
// an all-zero group gets a finite scale and quantizes to zeros. The last group of a ragged N is partial:
// only the columns inside N enter its amax. kQuantRow (group 0) is one scale per row, [M, 1].
//
// Two expressions: s = AmaxScale(y) and q = Quantize(y, s), so that every expression keeps one output and
// the reference evaluator (python/heddle/core/reference.py) and str() spell each one.
#include <sstream>

#include "heddle/ir/fusion.h"

namespace heddle {

double maxFinite(DType t) {
  if (t == DType::E4M3) return 448.0;    // S.1111.110 (OCP OFP8; e4m3 has no infinities)
  if (t == DType::E5M2) return 57344.0;  // S.11110.11
  fail<ScheduleError>("quantize: ", dtypeName(t), " is not an 8-bit float; quantize to e4m3 or e5m2");
}

std::pair<TensorView*, TensorView*> Fusion::quantize(TensorView* y, DType dt, int group) {
  checkOwned(y, "quantize");
  std::ostringstream call;
  call << "quantize(" << y->name << ", " << dtypeName(dt)
       << ", group=" << (group == kQuantRow ? std::string("row") : std::to_string(group)) << ")";
  if (!isFloat8(dt))
    fail<ScheduleError>(call.str(), ": the format is ", dtypeName(dt),
                        "; a computed scale quantizes to an 8-bit float: e4m3 (largest 448) or e5m2 (57344); "
                        "for a 16-bit output cast with .to(...) instead");
  if (group != kQuantRow && group != kScaleBlock)
    fail<ScheduleError>(call.str(), ": group ", group,
                        " is not supported; use group=128 (1 x 128 blocks along N, "
                        "the scale_a layout of a block128 matmul) or group='row' (one scale per row)");
  if (y->rank() < 1) fail<ScheduleError>(call.str(), ": ", y->str(), " has no axis to group");
  if (isFloat8(y->dtype))
    fail<ScheduleError>(call.str(), ": ", y->str(), " is already ", dtypeName(y->dtype),
                        "; quantize the f32 epilogue value before any 8-bit cast");
  const Size& n = y->shape.back();
  std::vector<Size> sShape(y->shape.begin(), y->shape.end() - 1);
  if (group == kQuantRow) {
    sShape.push_back(Size{1, ""});
  } else {
    if (n.isSymbolic())
      fail<ScheduleError>(call.str(), ": the last axis of ", y->str(), " is symbolic (", n.symbol,
                          "); the scale's group count ceil(", n.symbol,
                          "/128) needs a concrete N: give the matmul's N as a number");
    sShape.push_back(Size{(n.value + group - 1) / group, ""});
  }
  auto* s = newTensor(DType::F32, sShape, "");
  auto* es = newExpr(OpKind::AmaxScale, {y}, s);
  es->castTo = dt;
  es->quantGroup = group;
  auto* q = newTensor(dt, y->shape, "");
  auto* eq = newExpr(OpKind::Quantize, {y, s}, q);
  eq->castTo = dt;
  eq->quantGroup = group;
  return {q, s};
}

}  // namespace heddle
