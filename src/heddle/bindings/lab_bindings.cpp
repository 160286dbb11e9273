// heddle._C.sync_lab: build a small kernel from a Python description and run the sync planner on
// it. Used by the planner's placement tests (and the simulator's planted-bug pairs).
//
//   program := [stmt, ...]
//   stmt    := ("loop", var, start, stop, stage, [stmt...])   stage: serial|prologue|main|epilogue
//            | ("write" | "read", buffer, stage_expr, mapping[, async])   async on an AMD target: LDS DMA (vmcnt)
//                a mapping "name@LO:HI" spreads the elements over threads LO..HI-1 (a role of the block)
//            | ("if", cond_expr, [then...][, [else...]])               cond naming an unbound variable: both paths
//            | ("let", var, expr)                                      a value the kernel computes (const int var = expr)
//            | ("commit",) | ("barrier",) | ("wait", n) | ("setmaxnreg", registers)   (a .dec: a warpgroup collective)
//            | ("buffer", name, bytes_per_stage[, align])       declare before use (default 128 B, align 16)
//            | ("barrier_init", id, waves) | ("barrier_join", id) | ("barrier_leave",)
//            | ("barrier_signal", id) | ("barrier_signal_isfirst", id) | ("barrier_wait", id)
//                AMD barrier objects: id -1 the workgroup barrier (split-barrier targets), 0 the NULL
//                barrier and 1..16 named barriers (targets with TargetInfo::namedBarriers)
// Expressions are strings or ints ("(i + 1) % 2", "N - 1", "tid < 32 && f"); N is the trip-count
// variable, tid/warp/lane are the thread, any other unbound name is a uniform kernel scalar.
// min_trips: the smallest N the program is written for (default: stages); search_budget: nodes of
// the planner's exact barrier search before it settles for a valid placement; plan=False: the
// program's own syncs are the plan (the planner is not run; check_uniformity still is);
// roles=True: the program is a producer/consumer split of waves (if (warp < P) { loop writing
// X[i % S] } else { loop reading it }) and named_barrier_roles places its named-barrier protocol.
#include <map>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "heddle/bindings/lowered.h"
#include "heddle/bindings/program_parse.h"
#include "heddle/codegen/printer.h"
#include "heddle/lower/lower.h"
#include "heddle/sync/plan.h"

namespace py = pybind11;
using namespace heddle;

namespace {

const std::map<std::string, kir::SyncKind>& barrierOps() {
  static const std::map<std::string, kir::SyncKind> m = {
      {"barrier_init", kir::SyncKind::BarrierInit},
      {"barrier_join", kir::SyncKind::BarrierJoin},
      {"barrier_leave", kir::SyncKind::BarrierLeave},
      {"barrier_signal", kir::SyncKind::BarrierSignal},
      {"barrier_signal_isfirst", kir::SyncKind::BarrierSignalIsFirst},
      {"barrier_wait", kir::SyncKind::BarrierWait}};
  return m;
}

void build(kir::Kernel& k, kir::Block& b, const py::list& prog, int stages, const std::string& loopVar,
           const TargetInfo& target) {
  for (auto& item : prog) {
    auto t = item.cast<py::tuple>();
    auto op = t[0].cast<std::string>();
    if (op == "loop") {
      auto* l = b.add<kir::ForLoop>();
      l->var = t[1].cast<std::string>();
      l->start = bindings::parseExprArg(t[2]);
      l->stop = bindings::parseExprArg(t[3]);
      l->stage = bindings::parseLoopStage(t[4].cast<std::string>());
      build(k, l->body, t[5].cast<py::list>(), stages, l->var, target);
    } else if (op == "if") {
      auto* c = b.add<kir::IfThenElse>();
      c->cond = bindings::parseExprArg(t[1]);
      build(k, c->thenBody, t[2].cast<py::list>(), stages, loopVar, target);
      if (t.size() > 3) build(k, c->elseBody, t[3].cast<py::list>(), stages, loopVar, target);
    } else if (op == "write" || op == "read") {
      auto name = t[1].cast<std::string>();
      kir::Buffer* buf = nullptr;
      for (auto& x : k.buffers)
        if (x->name == name) buf = x.get();
      if (!buf) {
        auto nb = std::make_unique<kir::Buffer>();
        nb->name = name;
        nb->stages = stages;
        nb->rows = nb->cols = 8;
        buf = k.addBuffer(std::move(nb));
      }
      auto* a = b.add<kir::SmemAccess>();
      a->buf = buf;
      a->stage = bindings::parseExprArg(t[2]);
      a->write = op == "write";
      a->mapping = t[3].cast<std::string>();
      a->async = t.size() > 4 && t[4].cast<bool>();
      a->vmcnt = a->async && target.backend == Backend::Hip;
      a->iter = loopVar.empty() ? kir::IExpr(0) : kir::IExpr::var(loopVar);
      a->label = op + " " + name;
    } else if (op == "buffer") {
      auto nb = std::make_unique<kir::Buffer>();
      nb->name = t[1].cast<std::string>();
      nb->stages = stages;
      nb->rows = 1;
      nb->cols = (int)(t[2].cast<int64_t>() / 2);
      nb->align = t.size() > 3 ? t[3].cast<int>() : 16;
      k.addBuffer(std::move(nb));
    } else if (op == "let") {
      b.add<kir::Let>(t[1].cast<std::string>(), bindings::parseExprArg(t[2]));
    } else if (op == "commit") {
      b.add<kir::Sync>(kir::SyncKind::CpAsyncCommit);
    } else if (op == "barrier") {
      b.add<kir::Sync>(kir::SyncKind::BlockSync);
    } else if (op == "setmaxnreg") {
      b.add<kir::Sync>(kir::SyncKind::SetMaxNReg, t[1].cast<int>())->count = -1;
    } else if (op == "wait") {
      b.add<kir::Sync>(kir::SyncKind::CpAsyncWait, t[1].cast<int>());
    } else if (barrierOps().count(op)) {
      const auto kind = barrierOps().at(op);
      const int id = kind == kir::SyncKind::BarrierLeave ? 1 : t[1].cast<int>();
      if (id == kir::kWorkgroupBarrier ? !target.splitBarrier : (id < 0 || id > target.namedBarriers))
        fail<HeddleError>("sync_lab: '", op, "' on barrier ", id, ": target ", target.describe(), " has ",
                          target.namedBarriers  ? "barriers -1, 0 and 1.." + std::to_string(target.namedBarriers)
                          : target.splitBarrier ? std::string("only the workgroup barrier -1")
                                                : std::string("no split or named barriers"));
      auto* s = b.add<kir::Sync>(kind, kind == kir::SyncKind::BarrierLeave ? 0 : id);
      if (kind == kir::SyncKind::BarrierInit) s->count = t[2].cast<int>();
    } else {
      fail<HeddleError>("sync_lab: unknown statement '", op, "'");
    }
  }
}

}  // namespace

void bindLab(py::module_& m) {
  m.def(
      "sync_lab",
      [](const py::list& prog, int stages, bool planSmem, const std::string& target, int minTrips, int64_t searchBudget,
         bool plan, bool roles) {
        auto l = std::make_shared<Lowered>();
        static Fusion emptyFusion;
        const TargetInfo& t = targetInfo(target);
        l->ctx.reset(new LowerContext{emptyFusion, t, {}, {}, {}, {}});
        auto& k = l->ctx->kernel;
        k.name = "sync_lab";
        k.launch.threads = 128;  // 4 warps (CUDA, GFX12) or 2 wavefronts (CDNA)
        build(k, k.body, prog, stages, "", t);
        // the smallest trip count N the program is written for (default: the stage count, as a
        // prologue of stages-1 loads needs); the planner proves the plan from there on
        k.tripChecks.push_back({"N", kir::IExpr::var("N"), minTrips >= 1 ? minTrips : std::max(1, stages), "lab",
                                "the lab program's smallest trip count"});
        k.renumber();
        if (planSmem) passes::planSmem(*l->ctx);
        if (roles) passes::namedBarrierRoles(k, t, stages);
        else if (plan) sync::planSyncs(k, sync::PipelineLoop{"N", 1, std::max(1, stages)}, t, searchBudget);
        sync::stampPass(k, "sync_lab");
        k.renumber();
        passes::checkUniformity(*l->ctx);  // the program's own barriers too
        return l;
      },
      py::arg("program"), py::arg("stages") = 1, py::arg("plan_smem") = false, py::arg("target") = "sm_80",
      py::arg("min_trips") = 0, py::arg("search_budget") = 200000, py::arg("plan") = true, py::arg("roles") = false);
  // the HIP printer's spelling of a lab kernel's sync ops (a lab kernel has no full source)
  m.def("hip_sync_ops", [](const Lowered& l) { return printHipSyncOps(l.k(), l.ctx->target); });
}
