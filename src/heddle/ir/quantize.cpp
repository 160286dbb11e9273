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
//
// kQuantMx32 (group="mx32", docs/fp8.md "MX formats", "An MX-format output"): the next MXFP8 layer's operand. Per
// row and block j of 32 columns, the OCP MX v1.0 shared exponent (section 6.3, the "minimally supported"
// conversion; torchao's to_mx ScaleCalculationMode.FLOOR):
//   e = clamp(floor(log2(amax_j)) - emax, -127, 127)   emax = 8 (e4m3: 448 = 1.75 * 2^8), 15 (e5m2)
//   s code = e + 127 (e8m0, 2^e; an all-zero block: code 0), q = satfinite(y / 2^e)
// s is stored in torch's blocked layout (to_blocked; the scale_a of fd.matmul(..., scales="mx32")):
// [round_up(M, 128), round_up(N/32, 4)], the padding rows and blocks code 0. N (the next layer's K) must be a
// concrete multiple of 32; M may be symbolic (the row count is then the derived size round_up(M, 128)).
#include <sstream>

#include "heddle/ir/fusion.h"

namespace heddle {

std::string quantGroupName(int group) {
  return group == kQuantRow ? "row" : group == kQuantMx32 ? "mx32" : std::to_string(group);
}

namespace {

// group="mx32": s e8m0 [round_up(M, 128), round_up(N/32, 4)] (the blocked layout; see the header comment)
std::vector<Size> mxScaleShape(const TensorView* y, const std::string& call) {
  if (y->rank() != 2)
    fail<ScheduleError>(call, ": ", y->str(), " has ", y->rank(),
                        " axes; an MX-format output is a 2-D [M, N] value (the next mx32 matmul's operand A)");
  const Size &m = y->shape[0], &n = y->shape[1];
  if (n.isSymbolic())
    fail<ScheduleError>(call, ": the last axis of ", y->str(), " is symbolic (", n.symbol,
                        "); the e8m0 scale's block count round_up(", n.symbol,
                        "/32, 4) needs a concrete N: give the matmul's N as a number");
  if (n.value % kMxBlock)
    fail<ScheduleError>(call, ": N = ", n.value, " (", y->name,
                        ") is not a multiple of 32; an MX scale covers 32 columns, and this N is the next mx32 "
                        "matmul's K: pad N with zeros to ",
                        (n.value + kMxBlock - 1) / kMxBlock * kMxBlock, " or use group=128");
  Size rows = m.isSymbolic() ? Size{-1, "round_up(" + m.symbol + ", 128)"} : Size{(m.value + 127) / 128 * 128, ""};
  return {rows, Size{(n.value / kMxBlock + 3) / 4 * 4, ""}};
}

}  // namespace

double maxFinite(DType t) {
  if (t == DType::E4M3) return 448.0;    // S.1111.110 (OCP OFP8; e4m3 has no infinities)
  if (t == DType::E5M2) return 57344.0;  // S.11110.11
  fail<ScheduleError>("quantize: ", dtypeName(t), " is not an 8-bit float; quantize to e4m3 or e5m2");
}

std::pair<TensorView*, TensorView*> Fusion::quantize(TensorView* y, DType dt, int group) {
  checkOwned(y, "quantize");
  std::ostringstream call;
  call << "quantize(" << y->name << ", " << dtypeName(dt) << ", group=" << quantGroupName(group) << ")";
  if (!isFloat8(dt))
    fail<ScheduleError>(call.str(), ": the format is ", dtypeName(dt),
                        "; a computed scale quantizes to an 8-bit float: e4m3 (largest 448) or e5m2 (57344); "
                        "for a 16-bit output cast with .to(...) instead");
  if (group != kQuantRow && group != kScaleBlock && group != kQuantMx32)
    fail<ScheduleError>(call.str(), ": group ", group,
                        " is not supported; use group=128 (1 x 128 blocks along N, "
                        "the scale_a layout of a block128 matmul), group='row' (one scale per row) or "
                        "group='mx32' (e8m0 scales per 32 columns, the scale_a of an mx32 matmul)");
  if (y->rank() < 1) fail<ScheduleError>(call.str(), ": ", y->str(), " has no axis to group");
  if (isFloat8(y->dtype))
    fail<ScheduleError>(call.str(), ": ", y->str(), " is already ", dtypeName(y->dtype),
                        "; quantize the f32 epilogue value before any 8-bit cast");
  const Size& n = y->shape.back();
  std::vector<Size> sShape(y->shape.begin(), y->shape.end() - 1);
  DType sType = DType::F32;
  if (group == kQuantMx32) {
    sShape = mxScaleShape(y, call.str());
    sType = DType::E8M0;
  } else if (group == kQuantRow) {
    sShape.push_back(Size{1, ""});
  } else {
    if (n.isSymbolic())
      fail<ScheduleError>(call.str(), ": the last axis of ", y->str(), " is symbolic (", n.symbol,
                          "); the scale's group count ceil(", n.symbol,
                          "/128) needs a concrete N: give the matmul's N as a number");
    sShape.push_back(Size{(n.value + group - 1) / group, ""});
  }
  auto* s = newTensor(sType, sShape, "");
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
