// Fusion IR: the user's computation as a small DAG of tensor expressions.
//
// A Fusion owns TensorViews (values) and Exprs (their definitions). Inputs carry a dtype and a
// shape whose sizes are concrete or symbolic; ops are matmul (four layouts, optionally batched)
// and pointwise epilogue ops. Scheduling attributes live on the TensorViews (schedule/).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "heddle/ir/errors.h"
#include "heddle/ir/iter_domain.h"

namespace heddle {

// E4M3 / E5M2: the OCP 8-bit floats (torch.float8_e4m3fn / torch.float8_e5m2), matmul operands only
// (docs/fp8.md): e4m3 has no infinities (S.1111.111 is NaN, max 448), e5m2 is IEEE-like (max 57344).
// E8M0: the unsigned power-of-two scale byte of the MX formats (torch.float8_e8m0fnu; OCP MX v1.0 "E8M0"):
// an input that only an mx32 matmul's scales may be (ir/block_scales.cpp), never data or an epilogue operand.
// E2M1X2: two e2m1 (FP4) values packed in a byte (torch.float4_e2m1fn_x2), NVFP4's and MXFP4's data: a matmul
// operand with nv16 or mx32 scales only, its rows counted in bytes (K / 2).
enum class DType { F16, BF16, F32, E4M3, E5M2, E8M0, E2M1X2 };
const char* dtypeName(DType t);      // "f16" | "bf16" | "f32" | "e4m3" | "e5m2" | "e8m0" | "e2m1x2"
const char* dtypeCudaName(DType t);  // heddle::f16 | heddle::bf16 | float | heddle::e4m3 | heddle::e5m2 | uint8_t
int dtypeBytes(DType t);
bool isFloat8(DType t);
// accepts float16/half/f16, bfloat16/bf16, float32/float/f32, float8_e4m3fn/e4m3, float8_e5m2/e5m2,
// float8_e8m0fnu/e8m0, float4_e2m1fn_x2/e2m1x2
DType dtypeFromName(const std::string& s);

enum class OpKind {
  Input,
  Matmul,
  Add,
  Sub,
  Mul,
  Div,  // binary (tensor or scalar operand)
  Relu,
  GeluErf,
  GeluTanh,
  Silu,
  Sigmoid,
  Tanh,
  Neg,
  Cast,  // unary
  // The computed output scale (ir/quantize.cpp, docs/fp8.md "Computed output scales"): AmaxScale is
  // s = max(amax |y| over a group of the last axis, 1e-4) / (the 8-bit format's largest finite value), f32,
  // one per group; Quantize is q = satfinite(y / s of the element's group), in the 8-bit format.
  AmaxScale,
  Quantize
};
const char* opName(OpKind k);

// The scales of a scaled matmul (docs/fp8.md "Block scales and promotion"). Block128: DeepGEMM-style
// blocks of 128 along K, scale_a [M, ceil(K/128)] (1 x 128 per row of A) and scale_b [ceil(N/128),
// ceil(K/128)] (128 x 128 of B), f32: D = sum over k-blocks kb of (A_kb @ B_kb) * sa[m, kb] * sb[n/128, kb].
// Mx32: MXFP8 (docs/fp8.md "MX formats"): one e8m0 scale per row and 32 elements of K for A and B (per column
// of D for B), in torch's blocked layout: scale_a [round_up(M, 128), round_up(K/32, 4)], scale_b
// [round_up(N, 128), round_up(K/32, 4)] bytes; D = sum over k of A[m, k] B[k, n] 2^(sa[m, k/32] + sb[n, k/32] - 254).
// Nv16: NVFP4, e2m1x2 operands (stored [M, K/2] and [N, K/2] bytes) with one ue4m3 scale (e4m3, sign 0) per row
// and 16 elements of K, blocked likewise: [round_up(rows, 128), round_up(K/16, 4)]. Mx32 with e2m1x2 operands is
// MXFP4: the packed operands with Mx32's e8m0 scales per 32 of K.
enum class ScaleKind { None, Block128, Mx32, Nv16 };
const char* scaleKindName(ScaleKind k);  // "none" | "block128" | "mx32" | "nv16"
ScaleKind scaleKindFromName(const std::string& s);
constexpr int kScaleBlock = 128;  // the K (and N) extent of one block scale
constexpr int kMxBlock = 32;      // the K extent of one MXFP8 scale (OCP MX v1.0: block size 32)
// Fusion::quantize: the group of a scale per row (the whole last axis), and the floor of the amax (DeepGEMM's
// per_token_cast_to_fp8 clamps the amax at 1e-4: an all-zero group gets a finite, nonzero scale).
constexpr int kQuantRow = 0;
constexpr double kQuantEps = 1e-4;
// group="mx32": an MX-format output (ir/quantize.cpp, docs/fp8.md "MX formats"): e8m0 scales per row and 32
// columns, in torch's blocked layout [round_up(M, 128), round_up(N/32, 4)] (the next mx32 matmul's scale_a).
constexpr int kQuantMx32 = -32;
std::string quantGroupName(int group);  // "row" | "mx32" | the group size
double maxFinite(DType t);              // 448 (e4m3), 57344 (e5m2); a ScheduleError for the other dtypes
bool isBinary(OpKind k);
bool isUnary(OpKind k);

class TensorView;
class Fusion;

// One size of a tensor: a concrete extent or a named symbol bound at launch.
struct Size {
  int64_t value = -1;  // >= 0 when concrete
  std::string symbol;  // non-empty when symbolic
  bool isSymbolic() const { return !symbol.empty(); }
  std::string str() const;
  bool operator==(const Size& o) const { return value == o.value && symbol == o.symbol; }
};

struct Expr {
  OpKind kind = OpKind::Input;
  std::vector<TensorView*> inputs;        // tensor operands (for binary with a scalar: one)
  std::optional<double> scalar;           // scalar operand of a binary op
  bool scalarOnLeft = false;              // e.g. 1.0 - x
  bool transA = false, transB = false;    // matmul: operand stored transposed
  DType castTo = DType::F32;              // Cast; AmaxScale / Quantize: the 8-bit format
  int quantGroup = 0;                     // AmaxScale / Quantize: elements of the last axis per scale (0 = all)
  ScaleKind scaleKind = ScaleKind::None;  // matmul: scales of its k-blocks (Fusion::blockScales)
  TensorView* scaleA = nullptr;           // matmul with scales: [M, ceil(K/128)] f32 (mx32: blocked e8m0)
  TensorView* scaleB = nullptr;           // matmul with scales: [ceil(N/128), ceil(K/128)] f32 (mx32: blocked)
  TensorView* output = nullptr;
  // A grouped matmul (Fusion::groupedMatmul): the name of its int32 [E] group-ends input ("" = not grouped)
  // and the expert count E (w's leading axis). docs/grouped.md.
  std::string groupOffsets;
  Size groupExperts;
  // The masked layout (Fusion::maskedGroupedMatmul): groupOffsets names the per-expert row counts [E] of a
  // batched x [E, max_tokens, K]; rows past counts[e] are padding (docs/grouped.md, "The masked layout").
  bool groupMasked = false;
};

// Where a cached copy of a tensor lives and how it gets there (cache_after).
enum class MemoryType { Global, Shared, Local };
enum class LoadKind { None, Plain, CpAsync, TmaLoad, AsyncLds };  // AsyncLds: AMD LDS DMA (vmcnt)
const char* loadKindName(LoadKind k);                             // "plain" | "cp_async" | "tma_load" | "async_lds"

struct CircularBufferOptions {
  int stages = 0;           // >= 2 when set
  int prefetch = 0;         // normalised: 0 <= prefetch < stages
  bool mbarrierWar = true;  // TMA rings without roles: slots released through empty mbarriers (else a block sync)
  bool enabled() const { return stages > 0; }
};

// warp_specialize(roles): a named group of warps with an optional register budget.
struct Role {
  std::string name;
  int warps = 0;
  int registers = 0;  // 0 = not set; else 24..256, multiple of 8
  int stages = 0;     // the epilogue role on sm_100a: tensor-memory accumulator stages, 1 or 2 (0 = auto)
};

class TensorView {
 public:
  int id = -1;
  std::string name;
  DType dtype = DType::F32;
  std::vector<Size> shape;     // logical shape (row-major semantics)
  Expr* definition = nullptr;  // null for inputs
  std::vector<Expr*> uses;
  bool isInput = false, isOutput = false;
  const Fusion* owner = nullptr;  // the Fusion that created it; ops refuse tensors of another Fusion

  // --- schedule attributes (set by schedule/, validated there) ---
  LoopDomain domain;  // loop axes after split/reorder/parallelize
  MemoryType memory = MemoryType::Global;
  LoadKind loadKind = LoadKind::None;  // for cache tensors: how they are filled
  TensorView* cacheOf = nullptr;       // cache_after: the tensor this one copies
  CircularBufferOptions circular;      // circular_buffer(stages, prefetch)
  std::vector<Role> roles;             // warp_specialize(roles)
  int splitK = 1;                      // split_k(splits): CTAs sharing one output tile's k loop
  int streamK = 0;                     // stream_k(ctas): persistent CTAs sharing tiles x k-tiles (0 = off)
  std::string epilogueStore;           // epilogue_store(kind): "tma", "direct", "" (the default)
  int clusterSize = 1;                 // cluster(size, along): CTAs per thread-block cluster (1 = none)
  std::string clusterAlong = "m";      // the tile axis the cluster's CTAs are neighbours along
  int computeAtAxis = -1;              // loop axis of the consumer this cache is filled in
  // An [E, N] input of a grouped matmul's epilogue whose row e belongs to expert e (Fusion::perExpert):
  // output row r reads the row of r's expert; it broadcasts as [1, N] (docs/grouped.md).
  bool perExpert = false;
  int promotionK = 0;  // promotion(k): a block-scaled matmul's K elements per promotion into f32 (0 = 128)

  int rank() const { return (int)shape.size(); }
  std::string str() const;  // "T3 (bf16)[M, 4096]"
};

class Fusion {
 public:
  Fusion() = default;
  Fusion(const Fusion&) = delete;
  Fusion& operator=(const Fusion&) = delete;

  TensorView* addInput(const std::string& name, DType dt, std::vector<Size> shape);
  TensorView* matmul(TensorView* a, TensorView* b, bool transA, bool transB);
  // A grouped matmul (mixture of experts, the torch._grouped_mm convention): x [T, K] holds the tokens
  // sorted by expert, w [E, K, N] (transB: [E, N, K]) one weight matrix per expert, and the int32 [E]
  // launch argument `offsets` the group ends (rows offsets[e-1] .. offsets[e] of x belong to expert e,
  // offsets[-1] = 0). The result is [T, N]: row r = x[r] @ w[e] for the expert e whose group holds r.
  // The fusion's only matmul; the epilogue after it is per element as for any matmul. docs/grouped.md.
  TensorView* groupedMatmul(TensorView* x, TensorView* w, bool transB, const std::string& offsets);
  // The masked layout (DeepGEMM's decode layout): x [E, max_tokens, K], w [E, K, N] (transB: [E, N, K]) and
  // the int32 [E] launch argument `counts`: rows r < counts[e] of x[e] are expert e's tokens, the rest are
  // padding. The result is [E, max_tokens, N]: row r of expert e is x[e, r] @ w[e] for r < counts[e]; the
  // padding rows are neither computed into anything visible nor stored. docs/grouped.md.
  TensorView* maskedGroupedMatmul(TensorView* x, TensorView* w, bool transB, const std::string& counts);
  // Marks the input t [E, N] as per expert for the fusion's grouped matmul (a bias per expert): in the
  // epilogue, output row r reads t[e] for r's expert e. Refused without a grouped matmul, for a computed
  // tensor, or for a shape other than [E, N] with w's E. Returns t.
  TensorView* perExpert(TensorView* t);
  // Gives matmul output `mm` its k-block scales (ir/block_scales.cpp): scale tensors are f32 fusion inputs
  // of the shapes ScaleKind names; a ScheduleError naming the scale tensor and the expected shape otherwise.
  void blockScales(TensorView* mm, TensorView* scaleA, TensorView* scaleB, ScaleKind kind);
  TensorView* binary(OpKind k, TensorView* a, TensorView* b);
  TensorView* binaryScalar(OpKind k, TensorView* a, double s, bool scalarOnLeft);
  TensorView* unary(OpKind k, TensorView* a);
  TensorView* cast(TensorView* a, DType dt);
  // Quantize y to the 8-bit format dt with a scale computed from y (ir/quantize.cpp): groups of `group`
  // elements along y's last axis (kQuantRow: the whole axis), s [..., ceil(N/group)] f32 and q y's shape in dt:
  //   s[.., j] = max(amax |y[.., j*group : (j+1)*group]|, kQuantEps) / max_finite(dt),
  //   q[.., n] = satfinite(y[.., n] / s[.., n / group]).
  // Returns {q, s}. A ScheduleError names the rule for another dtype or group, or a symbolic N with groups.
  // kQuantMx32: s e8m0 [round_up(M, 128), round_up(N/32, 4)] blocked, the OCP MX FLOOR shared exponent.
  std::pair<TensorView*, TensorView*> quantize(TensorView* y, DType dt, int group);
  void addOutput(TensorView* t);

  // cache_after: a new tensor that holds a copy of `t` in `mem`, filled with `kind`.
  TensorView* cacheAfter(TensorView* t, LoadKind kind);

  const std::vector<TensorView*>& inputs() const { return inputs_; }
  const std::vector<TensorView*>& outputs() const { return outputs_; }
  std::vector<TensorView*> allTensors() const;
  std::vector<Expr*> exprs() const;  // topological order
  TensorView* tensor(int id) const { return tvs_.at(id).get(); }
  TensorView* findMatmul() const;  // the matmul output, or null (a group: its first member)
  // Matmuls that share their A operand (a "matmul group": SwiGLU's gate and up projections, q/k/v):
  // every matmul output in creation order. One kernel computes them all: each CTA tile's accumulator
  // holds a slice of every member, so the epilogue combines them per element (silu(g) * u).
  std::vector<TensorView*> matmuls() const;
  static constexpr int kMaxGroup = 4;
  std::vector<TensorView*> cachesOf(TensorView* t) const;

  std::string str() const;                // readable IR, one line per expression
  int serial() const { return serial_; }  // "fusion #<serial>" in messages
  // Refuses (ScheduleError) a tensor created by another Fusion: `op` names the call.
  void checkOwned(const TensorView* t, const char* op) const;

 private:
  int serial_ = nextSerial();
  static int nextSerial();
  void checkGroupMember(const Expr* first, TensorView* a, TensorView* b, bool transA, bool transB) const;
  void checkGroupedOperands(TensorView* x, TensorView* w, const std::string& call) const;
  // the group-ends / counts launch argument's name: its own, not an input's
  void checkGroupArgName(TensorView* x, TensorView* w, const std::string& name, const std::string& what,
                         const std::string& call) const;
  TensorView* newTensor(DType dt, std::vector<Size> shape, const std::string& prefix);
  Expr* newExpr(OpKind k, std::vector<TensorView*> ins, TensorView* out);
  std::vector<std::unique_ptr<TensorView>> tvs_;
  std::vector<std::unique_ptr<Expr>> exprs_;
  std::vector<TensorView*> inputs_, outputs_;
};

// Broadcast the shapes of two pointwise operands (numpy rules); errors name both tensors.
std::vector<Size> broadcastShapes(const TensorView* a, const TensorView* b);

}  // namespace heddle
