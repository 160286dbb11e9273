// build_epilogue: the pointwise ops after the matmul as a per-element register program.
//
// Before (fusion): T2 = matmul(a, b); T3 = add(T2, bias); T4 = gelu(T3); T5 = cast(T4, bf16); output T5
// After (kernel.epilogue, register r0 holds the f32 accumulator of one output element):
//   r1 = load bias[col]      (row stride: broadcast, col stride: bias_s1)
//   r2 = add r0, r1
//   r3 = gelu r2
//   r4 = cast r3 -> bf16     (rounds through bf16, stays f32 in registers)
//   store r4 -> D (bf16)
// A grouped matmul's per-expert operand [E, N] (Fusion::perExpert): no row stride, its E axis read at
// batch_idx, the tile's expert (`r1 = load bias[batch_idx, col]`, lower/build/grouped_walk.h).
// Further outputs (output T3 as well: the pre-activation a backward keeps) store their register to
// D1, D2, ... at D's index (same ldd and batch stride); the name gains _o<dtype> per further output.
// and the kernel name gains the program: ..._e_add_gelu_bf16 (operand loads are implied by the ops that
// use them; a cast is named by its type; no op at all: _e_none), so two epilogues never share a name.
// Broadcast operands index with stride params; an axis of size 1 (or missing) is not indexed.
// A matmul group (SwiGLU: g = matmul(x, w1); u = matmul(x, w3); out = silu(g) * u): member 0 is r0,
// member p a register defined by `rP = acc part p` (the same element of member p's accumulator slice):
//   r1 = acc part 1;  r2 = silu r0;  r3 = mul r2, r1;  r4 = cast r3 -> bf16;  store r4 -> D
//
// A computed output scale (Fusion::quantize: s = amax_scale(y), q = quantize(y, s); docs/fp8.md "Computed
// output scales") adds no op: Kernel::quant names y's register, the group and the scale param D1 [M, groups]
// (outputs exactly q, then s); the wgmma printer reduces each group's amax across the quad, the tcgen05
// printer per thread (one row a thread), and stores q to D:
//   r3 = gelu r2;  quant r3 -> D (e4m3), scale per row and 128 columns -> D1;  name ..._e_gelu_q128
// Only on the sm_90a warp-specialized wgmma kernels (direct store or the MMA role's TMA store) and the sm_100a
// tcgen05 kernel (direct or TMA store, a TMA-loaded bias / residual too), the group inside one CTA tile
// (checkQuantSchedule: a ScheduleError naming the rule otherwise). group="mx32" (an MX-format output): D1 is the
// e8m0 scale in torch's blocked layout, QuantOut::groups its round_up(N/32, 4) columns; name ..._qmx32 (sm_100a
// tcgen05, direct or TMA store).
//
// Runs when: always.
#include <map>
#include <set>

#include "heddle/lower/lower.h"

namespace heddle::passes {

namespace {

std::string outputNames(const Fusion& f) {
  std::string r;
  for (auto* o : f.outputs()) r += (r.empty() ? "" : ", ") + o->name;
  return r;
}

// Where a computed output scale lowers (docs/fp8.md "Computed output scales"): the sm_90a warp-specialized
// wgmma kernels with the direct store or the MMA role's TMA store, where a row's columns of the D fragment live
// in one quad of lanes, so a group's amax is a per-thread max and two shfl.xor steps; the sm_100a tcgen05
// kernel's epilogue warpgroup storing directly from tcgen05.ld 32x32b or through its TMA store, where a row's columns
// all sit in one thread (a per-thread max), with or without a TMA-loaded bias / residual ring; the group inside one
// CTA tile.
// An MX-format output (group="mx32", docs/fp8.md "MX formats"): the tcgen05 epilogue only (one
// tcgen05.ld.32x32b.x32 is one row's MX block: a per-thread amax), its direct store or its TMA store (q staged in
// chunks of 128 columns, 4 blocks each; the codes stored directly), with or without a TMA-loaded bias / residual
// ring (its slot read between the fullE wait and the emptyE arrive, as for the f32 scale); the n tiles must cover the blocked scale's
// round_up(N/32, 4) blocks, so that the padding blocks are stored (code 0) by the tile that holds them: bn a
// multiple of 128 (the m tiles of 128 rows cover round_up(M, 128) rows already).
void checkMxOutSchedule(const LowerContext& c, const std::string& what) {
  const auto& t = c.tiling;
  const auto& rp = t.rolePipeline;
  if (!rp.tcgen05)
    fail<ScheduleError>(what,
                        ": an MX-format output (e8m0 scales per 32 columns, blocked) is lowered on the sm_100a "
                        "tcgen05 kernel only (TMA + tcgen05 roles); target ",
                        c.target.name, " with this schedule has none: use group=128 or group='row'");
  if (t.bn % 128)
    fail<ScheduleError>(what, ": the n tile ", t.bn,
                        " is not a multiple of 128; the MX scale's blocked layout pads N/32 blocks to a multiple of "
                        "4 (128 columns), which the n tiles must cover to store the padding: use an n tile of 128 "
                        "or 256");
}

void checkQuantSchedule(const LowerContext& c, const Expr* e) {
  const auto& t = c.tiling;
  const auto& rp = t.rolePipeline;
  const std::string what = std::string("quantize(") + e->inputs[0]->name + ", " + dtypeName(e->castTo) +
                           ", group=" + quantGroupName(e->quantGroup) + ")";
  if (!rp.enabled || !rp.warpSpecialized)
    fail<ScheduleError>(what,
                        ": a computed output scale is lowered on the sm_90a warp-specialized wgmma kernels "
                        "(cooperative or ping-pong: cache A and B with tma_load and warp_specialize the "
                        "load and mma roles) and the sm_100a tcgen05 kernel only; target ",
                        c.target.name, " with this schedule has no such kernel");
  if (e->quantGroup == kQuantMx32) checkMxOutSchedule(c, what);
  // the tcgen05 kernel's epilogue warpgroup is its own role (warps 4-7): the store is direct from its registers.
  // On sm_90a the MMA warpgroups' TMA-store epilogue (epilogue_store("tma"), passes/tma_store_epilogue.cpp) takes
  // it: q through the staged chunks of 128 columns, s stored directly
  // sm_100a: the epilogue warpgroup's direct store or its TMA store (epilogue_store("tma"): q through the staged
  // chunks of 128 columns, s stored directly), with or without a TMA-loaded bias / residual, whose fullE wait and
  // emptyE arrive enclose every read of the tile's slot (lower/build/epilogue_tma.cpp epilogueWithOperand; the
  // staged chunks: tcgen05_specialize), the amax passes included
  if (!rp.tcgen05 && (rp.tmaStore || rp.role(PipelineRole::Epilogue) || !rp.epiTma.empty()))
    fail<ScheduleError>(what,
                        ": an epilogue role (sm_90a) and TMA-loaded epilogue operands are not lowered with a "
                        "computed output scale; use roles load and mma, with the direct store or "
                        "epilogue_store('tma'), and no tma_load cache of an epilogue operand");
  // a staged chunk is 128 columns (one 128-byte swizzle row of 8-bit q): on sm_90a a row's amax over a wider n tile
  // would span chunks, while each chunk's quad reduction covers its own fragment columns only (the y of the earlier
  // chunk written over its accumulators). The tcgen05 kernel re-reads the row's other columns from tensor memory
  if (rp.mmaTmaStore && e->quantGroup == kQuantRow && t.bn > rp.storeCols)
    fail<ScheduleError>(
        what, ": a scale per row through the TMA-store epilogue needs the n tile in one staged chunk of ", rp.storeCols,
        " columns (the row's amax is reduced before its chunk is written), but the n tile "
        "is ",
        t.bn, ": split n by ", rp.storeCols, ", use group=128, or epilogue_store('direct')");
  if (t.splitK > 1 || t.streamK > 0 || t.batched || t.grouped || t.parts > 1)
    fail<ScheduleError>(what,
                        ": split-K, stream-K, batched, grouped matmuls and matmul groups are not lowered "
                        "with a computed output scale (a group's amax needs the tile's final values)");
  const Size& n = t.mm->shape.back();
  if (e->quantGroup == kQuantRow && (n.isSymbolic() || n.value > t.bn))
    fail<ScheduleError>(what,
                        ": a scale per row needs one CTA tile to cover all of N (the amax of a row is "
                        "reduced inside the tile); N = ",
                        n.str(), " but the n tile is ", t.bn, ": use group=128, or an n tile of at least N");
  if (e->quantGroup > 0 && t.bn % e->quantGroup)
    fail<ScheduleError>(what, ": the n tile ", t.bn, " splits a group of ", e->quantGroup,
                        " columns between CTAs (its amax is reduced inside one tile); split n by a multiple of ",
                        e->quantGroup);
}

}  // namespace

void buildEpilogue(LowerContext& c) {
  auto& k = c.kernel;
  auto& f = c.fusion;
  auto* mm = c.tiling.mm;
  if (f.outputs().empty()) fail<ScheduleError>("this fusion has no output; mark the matmul or its epilogue result");
  std::map<const TensorView*, int> reg{{mm, 0}};
  int next = 1;
  const int rank = mm->rank();
  for (int p = 1; p < c.tiling.parts; ++p) {  // the further members of a matmul group
    kir::EpiOp op;
    op.op = OpKind::Matmul;
    op.a = p;
    op.dst = next++;
    reg[c.tiling.mms[p]] = op.dst;
    k.epilogue.push_back(op);
  }
  auto operandLoad = [&](TensorView* x, const std::string& user) {
    if (!x->isInput)
      fail<ScheduleError>("epilogue op ", user, ": operand ", x->name,
                          " does not depend on the matmul and is not an "
                          "input; compute it outside the fusion and pass it as an input");
    if (x->rank() > rank)
      fail<ScheduleError>("epilogue op ", user, ": operand ", x->str(), " has more axes than the matmul result ",
                          mm->str(), "; epilogue operands broadcast into the matmul's shape, never beyond it");
    for (int ax = x->perExpert ? 1 : 0; ax < x->rank(); ++ax) {  // per expert: its E axis is the expert's
      auto& s = x->shape[ax];
      auto& o = mm->shape[rank - x->rank() + ax];
      bool one = !s.isSymbolic() && s.value == 1;
      if (!one && !(s == o) && !(s.isSymbolic() || o.isSymbolic()))
        fail<ScheduleError>("epilogue op ", user, ": operand ", x->str(), " axis ", ax, " has size ", s.str(),
                            " but the matmul result has ", o.str(), "; it must match or be 1");
    }
    kir::EpiOp op;
    op.op = OpKind::Input;
    op.dst = next++;
    op.tensorParam = "E_" + x->name;
    op.dtype = x->dtype;
    auto stride = [&](int fromRight) -> std::string {
      int ax = x->rank() - fromRight;
      if (ax < 0) return "";
      auto& s = x->shape[ax];
      if (!s.isSymbolic() && s.value == 1) return "";
      return op.tensorParam + "_s" + std::to_string(ax);
    };
    op.colStride = stride(1);
    op.rowStride = stride(2);
    op.batchStride = rank == 3 ? stride(3) : "";
    if (x->perExpert) {  // [E, N] of a grouped matmul: row batch_idx (the tile's expert, grouped_walk.h)
      op.batchStride = op.rowStride;
      op.rowStride = "";
    }
    bool seen = false;
    for (auto& p : k.params) seen |= p.name == op.tensorParam;
    if (!seen) {
      kir::Param p;
      p.kind = kir::Param::TensorPtr;
      p.name = op.tensorParam;
      p.dtype = x->dtype;
      p.tensor = x->name;
      k.params.push_back(p);
      for (auto* st : {&op.batchStride, &op.rowStride, &op.colStride})
        if (!st->empty()) {
          kir::Param sp;
          sp.kind = kir::Param::Int64;
          sp.name = *st;
          k.params.push_back(sp);
        }
    }
    k.epilogue.push_back(op);
    reg[x] = op.dst;
    return op.dst;
  };
  std::set<const TensorView*> quantized;  // q and s of a quantize: outputs only
  for (auto* e : f.exprs()) {
    if (e->kind == OpKind::Matmul) continue;
    for (auto* in : e->inputs)
      if (quantized.count(in) && !(e->kind == OpKind::Quantize && in == e->inputs[1]))  // q = y / s reads s
        fail<ScheduleError>("epilogue op ", opName(e->kind), " -> ", e->output->name, " reads ", in->name,
                            ", a result of quantize; quantize's q and s are the fusion's outputs, nothing after them");
    if (e->kind == OpKind::AmaxScale || e->kind == OpKind::Quantize) {  // docs/fp8.md "Computed output scales"
      auto* y = e->inputs[0];
      if (!reg.count(y) || y->isInput)
        fail<ScheduleError>(opName(e->kind), " -> ", e->output->name, ": ", y->name,
                            " is not computed from the matmul; quantize the matmul's epilogue value");
      if (e->kind == OpKind::AmaxScale) {
        checkQuantSchedule(c, e);
        k.quant = kir::Kernel::QuantOut{reg[y], e->quantGroup, (int)e->output->shape.back().value, ""};
      } else if (!k.quant || k.quant->reg != reg[y]) {
        fail<ScheduleError>("quantize -> ", e->output->name, " divides ", y->name, " by a scale of another value");
      }
      reg[e->output] = reg[y];
      quantized.insert(e->output);
      continue;
    }
    bool fromMm = false;
    for (auto* in : e->inputs) fromMm |= reg.count(in) && !in->isInput;
    if (!fromMm)
      fail<ScheduleError>("epilogue op ", opName(e->kind), " -> ", e->output->name,
                          " does not consume the matmul "
                          "result; heddle fuses pointwise ops that follow the matmul. Compute it outside the fusion");
    kir::EpiOp op;
    op.op = e->kind;
    for (size_t i = 0; i < e->inputs.size(); ++i) {
      auto* in = e->inputs[i];
      int r = reg.count(in) ? reg[in] : operandLoad(in, std::string(opName(e->kind)) + " -> " + e->output->name);
      (i == 0 ? op.a : op.b) = r;
    }
    op.scalar = e->scalar;
    op.scalarOnLeft = e->scalarOnLeft;
    op.dtype = e->kind == OpKind::Cast ? e->castTo : e->output->dtype;
    op.dst = next++;
    reg[e->output] = op.dst;
    k.epilogue.push_back(op);
  }
  for (auto* o : f.outputs())
    if (!reg.count(o) || o->isInput)
      fail<ScheduleError>("output ", o->name,
                          " is not computed from the matmul; mark the matmul or its epilogue "
                          "result as the output");
  auto* out = f.outputs()[0];
  k.epilogueResult = reg[out];
  std::string sig = "_e";
  for (auto& op : k.epilogue)
    if (op.op != OpKind::Input && op.op != OpKind::Matmul)
      sig += std::string("_") + (op.op == OpKind::Cast ? dtypeName(op.dtype) : opName(op.op));
  k.name += sig == "_e" ? "_e_none" : sig;
  k.outDtype = out->dtype;
  kir::Param d;
  d.kind = kir::Param::TensorPtr;
  d.name = "D";
  d.dtype = out->dtype;
  d.tensor = out->name;
  d.isConst = false;
  k.params.push_back(d);
  kir::Param ldd;
  ldd.kind = kir::Param::Int64;
  ldd.name = "ldd";
  k.params.push_back(ldd);
  if (k.quant) {  // q is D; s [M, groups] is D1, indexed row * groups + group (its own layout, no ldd)
    auto outs = f.outputs();
    if (outs.size() != 2 || outs[0]->definition->kind != OpKind::Quantize ||
        outs[1]->definition->kind != OpKind::AmaxScale)
      fail<ScheduleError>(
          "quantize: mark q, then s, as the fusion's outputs (fd.output(q); fd.output(s)) and no other; "
          "the outputs are ",
          outputNames(f));
    kir::Param ds = d;
    ds.name = k.quant->scale = "D1";
    ds.dtype = outs[1]->dtype;  // f32, or e8m0 codes of an MX-format output ([round_up(M, 128), groups] blocked)
    ds.tensor = outs[1]->name;
    k.params.push_back(ds);
    k.name += "_q" + quantGroupName(k.quant->group);
  }
  for (size_t i = 1; i < f.outputs().size() && !k.quant; ++i) {  // further outputs: D's index, their own pointer
    auto* o = f.outputs()[i];
    k.extraOutputs.push_back({"D" + std::to_string(i), reg[o], o->dtype});
    kir::Param di = d;
    di.name = k.extraOutputs.back().param;
    di.dtype = o->dtype;
    di.tensor = o->name;
    k.params.push_back(di);
    k.name += std::string("_o") + dtypeName(o->dtype);  // a kernel with another output never shares a name
  }
  if (c.tiling.batched) {
    kir::Param bs;
    bs.kind = kir::Param::Int64;
    bs.name = "batch_stride_d";
    k.params.push_back(bs);
  }
}

}  // namespace heddle::passes
