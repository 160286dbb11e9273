// Fusion IR construction: tensors, expressions, shape inference and broadcast rules.
#include "heddle/ir/fusion.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

namespace heddle {

const char* dtypeName(DType t) {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
    case DType::E8M0: return "e8m0";
    case DType::E2M1X2: return "e2m1x2";
  }
  return "?";
}
const char* dtypeCudaName(DType t) {
  switch (t) {
    case DType::F16: return "heddle::f16";
    case DType::BF16: return "heddle::bf16";
    case DType::F32: return "float";
    case DType::E4M3: return "heddle::e4m3";
    case DType::E5M2: return "heddle::e5m2";
    case DType::E8M0: return "unsigned char";  // (NVRTC has no <cstdint>: uint8_t is undefined there)
    case DType::E2M1X2: return "unsigned char";
  }
  return "?";
}
int dtypeBytes(DType t) { return t == DType::F32 ? 4 : isFloat8(t) || t == DType::E8M0 || t == DType::E2M1X2 ? 1 : 2; }
bool isFloat8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }
DType dtypeFromName(const std::string& s) {
  if (s == "f16" || s == "float16" || s == "half" || s == "torch.float16") return DType::F16;
  if (s == "bf16" || s == "bfloat16" || s == "torch.bfloat16") return DType::BF16;
  if (s == "f32" || s == "float32" || s == "float" || s == "torch.float32") return DType::F32;
  if (s == "e4m3" || s == "float8_e4m3fn" || s == "torch.float8_e4m3fn") return DType::E4M3;
  if (s == "e5m2" || s == "float8_e5m2" || s == "torch.float8_e5m2") return DType::E5M2;
  if (s == "e8m0" || s == "float8_e8m0fnu" || s == "torch.float8_e8m0fnu") return DType::E8M0;
  if (s == "e2m1x2" || s == "float4_e2m1fn_x2" || s == "torch.float4_e2m1fn_x2") return DType::E2M1X2;
  fail<ScheduleError>("unknown dtype '", s,
                      "': heddle supports float16, bfloat16, float32, float8_e4m3fn, float8_e5m2, "
                      "float8_e8m0fnu (MX scales only) and float4_e2m1fn_x2 (NVFP4 operands only)");
}

const char* opName(OpKind k) {
  switch (k) {
    case OpKind::Input: return "input";
    case OpKind::Matmul: return "matmul";
    case OpKind::Add: return "add";
    case OpKind::Sub: return "sub";
    case OpKind::Mul: return "mul";
    case OpKind::Div: return "div";
    case OpKind::Relu: return "relu";
    case OpKind::GeluErf: return "gelu";
    case OpKind::GeluTanh: return "gelu_tanh";
    case OpKind::Silu: return "silu";
    case OpKind::Sigmoid: return "sigmoid";
    case OpKind::Tanh: return "tanh";
    case OpKind::Neg: return "neg";
    case OpKind::Cast: return "cast";
    case OpKind::AmaxScale: return "amax_scale";
    case OpKind::Quantize: return "quantize";
  }
  return "?";
}
bool isBinary(OpKind k) { return k == OpKind::Add || k == OpKind::Sub || k == OpKind::Mul || k == OpKind::Div; }
bool isUnary(OpKind k) {
  return !isBinary(k) && k != OpKind::Input && k != OpKind::Matmul && k != OpKind::AmaxScale && k != OpKind::Quantize;
}

const char* loadKindName(LoadKind k) {
  switch (k) {
    case LoadKind::None: return "none";
    case LoadKind::Plain: return "plain";
    case LoadKind::CpAsync: return "cp_async";
    case LoadKind::TmaLoad: return "tma_load";
    case LoadKind::AsyncLds: return "async_lds";
  }
  return "?";
}

std::string Size::str() const { return isSymbolic() ? symbol : std::to_string(value); }

std::string TensorView::str() const {
  std::ostringstream os;
  os << name << " (" << dtypeName(dtype) << ")[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i].str();
  os << "]";
  return os.str();
}

TensorView* Fusion::newTensor(DType dt, std::vector<Size> shape, const std::string& prefix) {
  auto tv = std::make_unique<TensorView>();
  tv->id = (int)tvs_.size();
  tv->name = prefix.empty() ? "T" + std::to_string(tv->id) : prefix;
  tv->dtype = dt;
  tv->shape = std::move(shape);
  tv->owner = this;
  tvs_.push_back(std::move(tv));
  return tvs_.back().get();
}

Expr* Fusion::newExpr(OpKind k, std::vector<TensorView*> ins, TensorView* out) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->inputs = std::move(ins);
  e->output = out;
  for (auto* t : e->inputs)
    if (t->dtype == DType::E2M1X2 && k != OpKind::Matmul)
      fail<ScheduleError>(
          opName(k), "(", t->name, "): ", t->name,
          " is e2m1x2, packed FP4 pairs; it is only an operand of fd.matmul(..., scales='nv16') (NVFP4) "
          "or scales='mx32' (MXFP4)");
  for (auto* t : e->inputs)  // (quantize's q = y / s reads the e8m0 s of an MX-format output: its own scale)
    if (t->dtype == DType::E8M0 && !(k == OpKind::Quantize && t == e->inputs.back()))
      fail<ScheduleError>(opName(k), "(", t->name, "): ", t->name,
                          " is e8m0, the scale byte of the MX formats; an e8m0 input is only the scale_a / "
                          "scale_b of fd.matmul(..., scales='mx32'), never an operand or an epilogue input");
  for (auto* t : e->inputs) t->uses.push_back(e.get());
  out->definition = e.get();
  exprs_.push_back(std::move(e));
  return exprs_.back().get();
}

int Fusion::nextSerial() {
  static std::atomic<int> next{1};
  return next++;
}

void Fusion::checkOwned(const TensorView* t, const char* op) const {
  if (!t) fail<ScheduleError>(op, ": got None where a tensor of fusion #", serial_, " is expected");
  if (t->owner != this)
    fail<ScheduleError>(op, ": tensor ", t->name, " belongs to fusion #", t->owner ? t->owner->serial() : 0,
                        ", not to fusion #", serial_,
                        " that is being built; tensors cannot be shared between "
                        "fusions — declare it in this fusion with fd.input(...)");
}

// Names become C++ parameter names, torch op schema arguments and Python keywords: a C identifier
// that is no C, C++ or Python keyword.
static void checkInputName(const std::string& name) {
  static const std::set<std::string> keywords = {
      // C / C++
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
      "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
      "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
      "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
      "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
      "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "restrict", "return",
      "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
      "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
      "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
      // Python (and torch schema words)
      "False", "None", "True", "as", "assert", "async", "await", "def", "del", "elif", "except", "finally", "from",
      "global", "import", "in", "is", "lambda", "nonlocal", "pass", "raise", "with", "yield"};
  bool ident = !name.empty() && !std::isdigit((unsigned char)name[0]);
  for (char c : name)
    if (!(std::isalnum((unsigned char)c) || c == '_') || (unsigned char)c >= 0x80) ident = false;
  if (!ident)
    fail<ScheduleError>("input name '", name,
                        "' is not allowed: names are C identifiers (ASCII letters, digits and "
                        "'_', not starting with a digit), e.g. 'bias' or 'x_1'");
  if (keywords.count(name) || name.rfind("__", 0) == 0)
    fail<ScheduleError>("input name '", name,
                        "' is a C, C++ or Python keyword (or starts with '__'), which the "
                        "generated kernel and torch op cannot use as a parameter; pick another name, e.g. '",
                        name, "_in'");
}

TensorView* Fusion::addInput(const std::string& name, DType dt, std::vector<Size> shape) {
  if (shape.empty() || shape.size() > 3)
    fail<ScheduleError>("input '", name, "': rank ", shape.size(),
                        " is not supported; inputs have rank 1 (a bias), 2 (a matrix) or 3 (a batch of matrices)");
  checkInputName(name);
  for (auto& t : tvs_)
    if (t->name == name) fail<ScheduleError>("input name '", name, "' is used twice; give each input its own name");
  if (name.size() > 1 && name[0] == 'T' && name.find_first_not_of("0123456789", 1) == std::string::npos)
    fail<ScheduleError>("input name '", name,
                        "' is reserved: heddle names computed tensors T0, T1, ...; pick "
                        "another name");
  for (auto& s : shape)
    if (!s.isSymbolic() && s.value <= 0)
      fail<ScheduleError>("input '", name, "': size ", s.value, " must be positive (or a symbol such as 'M')");
  auto* tv = newTensor(dt, std::move(shape), name);
  tv->isInput = true;
  inputs_.push_back(tv);
  return tv;
}

static bool sameSize(const Size& a, const Size& b) {
  if (a.isSymbolic() || b.isSymbolic()) return a.isSymbolic() && b.isSymbolic() ? a.symbol == b.symbol : true;
  return a.value == b.value;
}

// A further matmul joins the fusion's matmul group: same A (tensor and layout), a B like the first's.
void Fusion::checkGroupMember(const Expr* first, TensorView* a, TensorView* b, bool transA, bool transB) const {
  auto* a0 = first->inputs[0];
  auto* b0 = first->inputs[1];
  const std::string call = "matmul(" + a->name + ", " + b->name + ")";
  if (a != a0 || transA != first->transA)
    fail<ScheduleError>(call, ": this fusion already has a matmul, matmul(", a0->name, ", ", b0->name,
                        "); a second "
                        "matmul joins it as a group (one kernel, e.g. SwiGLU's gate and up projections) only when it "
                        "reads the same A operand ",
                        a0->name, (first->transA ? " transposed" : ""), ". Otherwise split it into two fusions");
  if (b->rank() != 2 || b0->rank() != 2 || a->rank() != 2)
    fail<ScheduleError>(call, ": a matmul group takes rank-2 operands (", a->str(), ", ", b->str(),
                        "); run batched matmuls as separate fusions");
  if (transB != first->transB)
    fail<ScheduleError>(call, ": operand ", b->name, " is ", (transB ? "" : "not "), "transposed but ", b0->name, " is",
                        (first->transB ? "" : " not"),
                        "; the members of a matmul group share one B layout "
                        "(pass trans_b=",
                        (first->transB ? "True" : "False"), ")");
  if (!(b->shape == b0->shape) || b->dtype != b0->dtype)
    fail<ScheduleError>(call, ": operand ", b->str(), " differs from ", b0->str(),
                        " (the group's first B); the "
                        "members of a matmul group have B operands of one shape and dtype");
  for (auto* mm : matmuls())
    if (mm->definition->inputs[1] == b)
      fail<ScheduleError>(call, ": ", b->name, " is already multiplied by ", a->name, " in this fusion (", mm->name,
                          "); reuse ", mm->name, " instead of computing it twice");
  if ((int)matmuls().size() >= kMaxGroup)
    fail<ScheduleError>(call, ": a matmul group has at most ", kMaxGroup, " members; split it into two fusions");
}

TensorView* Fusion::matmul(TensorView* a, TensorView* b, bool transA, bool transB) {
  checkOwned(a, "matmul");
  checkOwned(b, "matmul");
  if (auto* first = findMatmul()) {
    if (!first->definition->groupOffsets.empty())
      fail<ScheduleError>("matmul(", a->name, ", ", b->name, "): the fusion has a grouped matmul (", first->name,
                          "), which is its only matmul; define this matmul in a fusion of its own");
    if (first->definition->scaleKind != ScaleKind::None)
      fail<ScheduleError>("matmul(", a->name, ", ", b->name, "): matmul ", first->name,
                          " has block scales; a block-scaled matmul does not join a matmul group");
    checkGroupMember(first->definition, a, b, transA, transB);
  }
  // two f16, two bf16, or two 8-bit floats (e4m3 and e5m2 mix: the FP8 tensor-core instructions take
  // each operand's format separately, PTX ISA "wgmma.mma_async" .atype/.btype)
  const bool bothFloat8 = isFloat8(a->dtype) && isFloat8(b->dtype);
  if (a->dtype == DType::F32 || b->dtype == DType::F32 || (a->dtype != b->dtype && !bothFloat8))
    fail<ScheduleError>("matmul(", a->name, ", ", b->name, "): operands are ", dtypeName(a->dtype), " and ",
                        dtypeName(b->dtype),
                        "; heddle's tensor-core matmul takes two f16, two bf16 or two 8-bit float (e4m3 / e5m2) "
                        "inputs (convert float32 tensors with .to(torch.bfloat16) before calling the kernel and "
                        "declare the inputs bf16)");
  for (auto* op : {a, b})
    if (!op->isInput)
      fail<ScheduleError>("matmul(", a->name, ", ", b->name, "): operand ", op->name,
                          " is computed inside the "
                          "fusion; matmul operands are fusion inputs, which the kernel tiles from global memory. "
                          "Compute ",
                          op->name, " before the fusion and pass it as an input");
  if (a->rank() < 2 || b->rank() < 2)
    fail<ScheduleError>("matmul(", a->name, ", ", b->name, "): operands need rank 2 or 3, got ", a->rank(), " and ",
                        b->rank());
  if (b->rank() == 3 && a->rank() == 2)
    fail<ScheduleError>("matmul(", a->name, ", ", b->name,
                        "): a batched B needs a batched A; "
                        "put the batch on A or make B rank 2");
  auto dimsOf = [](TensorView* t, bool trans, bool isA) {
    int r = t->rank();
    Size rows = t->shape[r - 2], cols = t->shape[r - 1];
    if (trans) std::swap(rows, cols);
    return isA ? std::make_pair(rows, cols) : std::make_pair(rows, cols);  // A: (M,K)  B: (K,N)
  };
  auto [M, Ka] = dimsOf(a, transA, true);
  auto [Kb, N] = dimsOf(b, transB, false);
  if (!sameSize(Ka, Kb))
    fail<ScheduleError>("matmul(", a->name, ", ", b->name, "): contraction sizes differ: ", a->name,
                        " gives K=", Ka.str(), ", ", b->name, " gives K=", Kb.str(),
                        (transA || transB ? " (after transposition)" : ""));
  std::vector<Size> shape;
  if (a->rank() == 3) {
    if (b->rank() == 3 && !sameSize(a->shape[0], b->shape[0]))
      fail<ScheduleError>("matmul(", a->name, ", ", b->name, "): batch sizes differ: ", a->shape[0].str(), " vs ",
                          b->shape[0].str());
    shape.push_back(a->shape[0]);
  }
  shape.push_back(M);
  shape.push_back(N);
  auto* out = newTensor(DType::F32, shape, "");
  auto* e = newExpr(OpKind::Matmul, {a, b}, out);
  e->transA = transA;
  e->transB = transB;
  return out;
}

// A second grouped matmul joins the first as a gated pair (silu(x @ W1_e) * (x @ W3_e), one kernel with two
// accumulators: the matmul group of validateMatmulGroup, walked over the experts): the same tokens x, the same
// group ends, w of the first's shape, dtype and layout, two members at most.
static void checkGatedPartner(const Expr* first, TensorView* x, TensorView* w, bool transB, const std::string& offsets,
                              const std::string& call) {
  auto* w0 = first->inputs[1];
  if (first->groupOffsets.empty() || first->groupMasked)
    fail<ScheduleError>(call,
                        ": the fusion already has a matmul; a grouped matmul is the fusion's only one "
                        "(define one fusion per grouped GEMM)");
  if (first->inputs[0] != x)
    fail<ScheduleError>(call, ": a second grouped matmul joins the first (grouped_matmul(", first->inputs[0]->name,
                        ", ", w0->name, ")) only as a gated pair reading the same tokens ", first->inputs[0]->name,
                        "; define one fusion per grouped GEMM otherwise");
  if (offsets != first->groupOffsets)
    fail<ScheduleError>(call, ": a gated pair shares its group ends: the first grouped matmul's are '",
                        first->groupOffsets, "', this one names '", offsets, "'");
  if (w == w0) fail<ScheduleError>(call, ": ", w->name, " is already the first member's weights; a gated pair has two");
  if (transB != first->transB || !(w->shape == w0->shape) || w->dtype != w0->dtype)
    fail<ScheduleError>(call, ": the gated pair's weights differ: ", w->str(), (transB ? " (trans_b)" : ""), " vs ",
                        w0->str(), (first->transB ? " (trans_b)" : ""),
                        "; both members take [E, K, N] (or [E, N, K] with trans_b) of one shape, dtype and layout");
}

TensorView* Fusion::groupedMatmul(TensorView* x, TensorView* w, bool transB, const std::string& offsets) {
  checkOwned(x, "grouped_matmul");
  checkOwned(w, "grouped_matmul");
  const std::string call = "grouped_matmul(" + x->name + ", " + w->name + ")";
  if (auto* first = findMatmul()) {
    checkGatedPartner(first->definition, x, w, transB, offsets, call);
    if (matmuls().size() >= 2)
      fail<ScheduleError>(call, ": the fusion already has a gated pair of grouped matmuls; a third does not join it");
  } else {
    checkGroupArgName(x, w, offsets, "group-ends argument (offsets)", call);
  }
  if (x->rank() != 2)
    fail<ScheduleError>(call, ": the tokens ", x->name, " must be rank 2 [T, K] (sorted by expert), got rank ",
                        x->rank());
  if (w->rank() != 3)
    fail<ScheduleError>(call, ": the expert weights ", w->name,
                        " must be rank 3 [E, K, N] (or [E, N, K] with trans_b), got rank ", w->rank());
  checkGroupedOperands(x, w, call);
  const Size K = x->shape[1], Kw = transB ? w->shape[2] : w->shape[1], N = transB ? w->shape[1] : w->shape[2];
  if (!sameSize(K, Kw))
    fail<ScheduleError>(call, ": contraction sizes differ: ", x->name, " gives K=", K.str(), ", ", w->name,
                        " gives K=", Kw.str(), transB ? " (w is [E, N, K] with trans_b)" : " (w is [E, K, N])");
  auto* out = newTensor(DType::F32, {x->shape[0], N}, "");
  auto* e = newExpr(OpKind::Matmul, {x, w}, out);
  e->transB = transB;
  e->groupOffsets = offsets;
  e->groupExperts = w->shape[0];
  return out;
}

TensorView* Fusion::maskedGroupedMatmul(TensorView* x, TensorView* w, bool transB, const std::string& counts) {
  checkOwned(x, "masked_grouped_matmul");
  checkOwned(w, "masked_grouped_matmul");
  const std::string call = "masked_grouped_matmul(" + x->name + ", " + w->name + ")";
  if (findMatmul())
    fail<ScheduleError>(call,
                        ": the fusion already has a matmul; a grouped matmul is the fusion's only one "
                        "(define one fusion per grouped GEMM)");
  checkGroupArgName(x, w, counts, "per-expert row counts argument (counts)", call);
  if (x->rank() != 3)
    fail<ScheduleError>(call, ": the tokens ", x->name,
                        " must be rank 3 [E, max_tokens, K] in the masked layout (rank 2 [T, K] sorted by expert is "
                        "grouped_matmul's layout), got rank ",
                        x->rank());
  if (w->rank() != 3)
    fail<ScheduleError>(call, ": the expert weights ", w->name,
                        " must be rank 3 [E, K, N] (or [E, N, K] with trans_b), got rank ", w->rank());
  checkGroupedOperands(x, w, call);
  if (!sameSize(x->shape[0], w->shape[0]))
    fail<ScheduleError>(call, ": expert counts differ: ", x->name, " gives E=", x->shape[0].str(), ", ", w->name,
                        " gives E=", w->shape[0].str(), "; the masked layout has one [max_tokens, K] slab per expert");
  const Size K = x->shape[2], Kw = transB ? w->shape[2] : w->shape[1], N = transB ? w->shape[1] : w->shape[2];
  if (!sameSize(K, Kw))
    fail<ScheduleError>(call, ": contraction sizes differ: ", x->name, " gives K=", K.str(), ", ", w->name,
                        " gives K=", Kw.str(), transB ? " (w is [E, N, K] with trans_b)" : " (w is [E, K, N])");
  // a batched matmul over the experts (batch_idx = e) whose rows stop at counts[e] (grouped_walk.h)
  auto* out = newTensor(DType::F32, {x->shape[0], x->shape[1], N}, "");
  auto* e = newExpr(OpKind::Matmul, {x, w}, out);
  e->transB = transB;
  e->groupOffsets = counts;
  e->groupExperts = w->shape[0];
  e->groupMasked = true;
  return out;
}

void Fusion::checkGroupArgName(TensorView* x, TensorView* w, const std::string& name, const std::string& what,
                               const std::string& call) const {
  if (name.empty() || name == x->name || name == w->name)
    fail<ScheduleError>(call, ": name the int32 ", what, " with a name of its own, got '", name, "'");
  for (auto* t : inputs_)
    if (t->name == name)
      fail<ScheduleError>(call, ": the name '", name, "' of the ", what, " is already an input's name; pick another");
}

void Fusion::checkGroupedOperands(TensorView* x, TensorView* w, const std::string& call) const {
  if (x->dtype == DType::F32 || isFloat8(x->dtype) || isFloat8(w->dtype) || x->dtype != w->dtype)
    fail<ScheduleError>(call, ": operands are ", dtypeName(x->dtype), " and ", dtypeName(w->dtype),
                        "; the tensor-core grouped matmul takes two f16 or two bf16 inputs (8-bit float grouped "
                        "GEMMs are not in this build: docs/grouped.md)");
  for (auto* op : {x, w})
    if (!op->isInput)
      fail<ScheduleError>(call, ": operand ", op->name,
                          " is computed inside the fusion; grouped matmul operands are fusion inputs");
}

TensorView* Fusion::perExpert(TensorView* t) {
  checkOwned(t, "per_expert");
  auto* mm = findMatmul();
  if (!mm || mm->definition->groupOffsets.empty())
    fail<ScheduleError>("per_expert(", t->name, "): the fusion has no grouped matmul; a per-expert operand ",
                        "is indexed by a grouped matmul's expert (define it with grouped_matmul first)");
  if (mm->definition->groupMasked)
    fail<ScheduleError>("per_expert(", t->name, "): the masked layout's output is [E, max_tokens, N], so a row per ",
                        "expert is an ordinary input [E, 1, N] that broadcasts over the rows; declare it so");
  if (!t->isInput)
    fail<ScheduleError>("per_expert(", t->name, "): ", t->name, " is computed inside the fusion; a per-expert ",
                        "operand is a fusion input");
  const Size& E = mm->definition->groupExperts;
  if (t->rank() != 2 || !sameSize(t->shape[0], E))
    fail<ScheduleError>("per_expert(", t->str(), "): a per-expert operand is [E, N] with the experts' E = ", E.str(),
                        " first");
  t->perExpert = true;
  return t;
}

std::vector<Size> broadcastShapes(const TensorView* a, const TensorView* b) {
  int r = std::max(a->rank(), b->rank());
  std::vector<Size> out(r);
  static const Size one{1, ""};
  for (int i = 0; i < r; ++i) {
    int ia = i - (r - a->rank()), ib = i - (r - b->rank());
    // a per-expert [E, N] operand broadcasts over the rows as [1, N] (its row is the row's expert's)
    const Size* sa = ia >= 0 ? (a->perExpert && ia == 0 ? &one : &a->shape[ia]) : nullptr;
    const Size* sb = ib >= 0 ? (b->perExpert && ib == 0 ? &one : &b->shape[ib]) : nullptr;
    auto isOne = [](const Size* s) { return !s || (!s->isSymbolic() && s->value == 1); };
    if (isOne(sa)) out[i] = sb ? *sb : Size{1, ""};
    else if (isOne(sb)) out[i] = *sa;
    else if (sameSize(*sa, *sb)) out[i] = sa->isSymbolic() ? *sb : *sa;
    else
      fail<ScheduleError>("cannot broadcast ", a->str(), " with ", b->str(), ": axis ", i, " has sizes ", sa->str(),
                          " and ", sb->str(), "; sizes must match or one of them be 1");
  }
  return out;
}

static DType promote(DType a, DType b) { return (a == DType::F32 || b == DType::F32 || a != b) ? DType::F32 : a; }

TensorView* Fusion::binary(OpKind k, TensorView* a, TensorView* b) {
  if (!isBinary(k)) fail<ScheduleError>(opName(k), " is not a binary op");
  checkOwned(a, opName(k));
  checkOwned(b, opName(k));
  for (auto* t : {a, b})
    if (isFloat8(t->dtype))
      fail<ScheduleError>(opName(k), "(", a->name, ", ", b->name, "): ", t->name, " is ", dtypeName(t->dtype),
                          "; 8-bit float tensors are matmul operands only (pass epilogue tensors as bf16, f16 or "
                          "f32; scales are f32)");
  auto* out = newTensor(promote(a->dtype, b->dtype), broadcastShapes(a, b), "");
  newExpr(k, {a, b}, out);
  return out;
}

TensorView* Fusion::binaryScalar(OpKind k, TensorView* a, double s, bool scalarOnLeft) {
  if (!isBinary(k)) fail<ScheduleError>(opName(k), " is not a binary op");
  checkOwned(a, opName(k));
  // The epilogue computes in float: a scalar rounds to float (nearest, ties to even); inf and NaN
  // are kept; a finite value that would round to infinity is refused rather than changed.
  if (std::isfinite(s) && std::isinf(static_cast<float>(s)))
    fail<ScheduleError>(opName(k), "(", a->name, ", ", s, "): the scalar ", s, " is beyond float range (largest ",
                        std::numeric_limits<float>::max(),
                        "); the epilogue computes in float: use a value within "
                        "range, or float('inf') if infinity is meant");
  auto* out = newTensor(a->dtype, a->shape, "");
  auto* e = newExpr(k, {a}, out);
  e->scalar = s;
  e->scalarOnLeft = scalarOnLeft;
  return out;
}

TensorView* Fusion::unary(OpKind k, TensorView* a) {
  if (!isUnary(k) || k == OpKind::Cast) fail<ScheduleError>(opName(k), " is not a unary op");
  checkOwned(a, opName(k));
  auto* out = newTensor(a->dtype, a->shape, "");
  newExpr(k, {a}, out);
  return out;
}

TensorView* Fusion::cast(TensorView* a, DType dt) {
  checkOwned(a, "cast");
  if (dt == DType::E8M0 || dt == DType::E2M1X2)
    fail<ScheduleError>("cast(", a->name, ", ", dtypeName(dt), "): ", dtypeName(dt),
                        " is an input format only (MX scales, NVFP4 operands); cast to f16, bf16, f32, e4m3 or "
                        "e5m2");
  auto* out = newTensor(dt, a->shape, "");
  auto* e = newExpr(OpKind::Cast, {a}, out);
  e->castTo = dt;
  return out;
}

void Fusion::addOutput(TensorView* t) {
  checkOwned(t, "output");
  if (t->isInput) fail<ScheduleError>("output ", t->name, " is an input; outputs must be computed by the fusion");
  if (std::find(outputs_.begin(), outputs_.end(), t) != outputs_.end())
    fail<ScheduleError>("tensor ", t->name, " is already an output");
  t->isOutput = true;
  outputs_.push_back(t);
}

TensorView* Fusion::cacheAfter(TensorView* t, LoadKind kind) {
  checkOwned(t, "cache_after");
  if (!t->isInput)
    fail<ScheduleError>("cache_after(", t->name, "): only fusion inputs can be cached (", t->name,
                        " is computed in registers); call it on a matmul operand");
  if (kind == LoadKind::None) fail<ScheduleError>("cache_after(", t->name, "): load kind 'none' is not a load");
  for (auto* c : cachesOf(t))
    fail<ScheduleError>("cache_after(", t->name, "): ", t->name, " already has cache ", c->name,
                        "; schedule that tensor instead of adding a second cache");
  auto* c = newTensor(t->dtype, t->shape, t->name + "_smem");
  c->cacheOf = t;
  c->memory = MemoryType::Shared;
  c->loadKind = kind;
  return c;
}

std::vector<TensorView*> Fusion::cachesOf(TensorView* t) const {
  std::vector<TensorView*> r;
  for (auto& x : tvs_)
    if (x->cacheOf == t) r.push_back(x.get());
  return r;
}

std::vector<TensorView*> Fusion::allTensors() const {
  std::vector<TensorView*> r;
  for (auto& t : tvs_) r.push_back(t.get());
  return r;
}

std::vector<Expr*> Fusion::exprs() const {
  std::vector<Expr*> r;
  for (auto& e : exprs_) r.push_back(e.get());  // creation order is topological
  return r;
}

std::vector<TensorView*> Fusion::matmuls() const {
  std::vector<TensorView*> r;
  for (auto& e : exprs_)
    if (e->kind == OpKind::Matmul) r.push_back(e->output);
  return r;
}

TensorView* Fusion::findMatmul() const {
  for (auto& e : exprs_)
    if (e->kind == OpKind::Matmul) return e->output;
  return nullptr;
}

static std::string fmtScalar(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string Fusion::str() const {
  std::ostringstream os;
  os << "fusion {\n";
  for (auto* t : inputs_) os << "  input  " << t->str() << "\n";
  for (auto& e : exprs_) {
    os << "  " << e->output->str() << " = " << opName(e->kind);
    if (e->kind == OpKind::Matmul) {
      os << "(" << e->inputs[0]->name << (e->transA ? "^T" : "") << ", " << e->inputs[1]->name
         << (e->transB ? "^T" : "") << ")  // layout " << (e->transA ? "T" : "N") << (e->transB ? "T" : "N")
         << ", f32 accumulate";
      if (e->scaleKind != ScaleKind::None)
        os << ", " << scaleKindName(e->scaleKind) << " scales " << e->scaleA->name << ", " << e->scaleB->name;
    } else if (e->kind == OpKind::Cast) {
      os << "(" << e->inputs[0]->name << ", " << dtypeName(e->castTo) << ")";
    } else if (e->kind == OpKind::AmaxScale || e->kind == OpKind::Quantize) {
      os << "(" << e->inputs[0]->name << (e->kind == OpKind::Quantize ? ", " + e->inputs[1]->name : "") << ", "
         << dtypeName(e->castTo) << ", group=" << quantGroupName(e->quantGroup) << ")";
      if (e->kind == OpKind::AmaxScale && e->quantGroup == kQuantMx32)
        os << "  // e8m0 2^(floor(log2 amax|" << e->inputs[0]->name << "| per 32) - "
           << (e->castTo == DType::E4M3 ? 8 : 15) << "), blocked";
      else if (e->kind == OpKind::AmaxScale)
        os << "  // max(amax|" << e->inputs[0]->name << "|, 1e-4) / " << maxFinite(e->castTo);
    } else if (e->scalar) {
      os << "("
         << (e->scalarOnLeft ? fmtScalar(*e->scalar) + ", " + e->inputs[0]->name
                             : e->inputs[0]->name + ", " + fmtScalar(*e->scalar))
         << ")";
    } else {
      os << "(";
      for (size_t i = 0; i < e->inputs.size(); ++i) os << (i ? ", " : "") << e->inputs[i]->name;
      os << ")";
    }
    os << "\n";
  }
  for (auto& t : tvs_)
    if (t->cacheOf)
      os << "  cache  " << t->str() << " = " << loadKindName(t->loadKind) << "(" << t->cacheOf->name << ") in shared\n";
  for (auto* t : outputs_) os << "  output " << t->name << "\n";
  os << "}\n";
  return os.str();
}

}  // namespace heddle
