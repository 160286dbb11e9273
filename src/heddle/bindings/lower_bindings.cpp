// Python bindings for lowering: the LoweredKernel object (kernel IR, sync plan, source, launch
// geometry, launch-time checks). Thin: lowering, printing and checks are C++.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "heddle/bindings/lowered.h"
#include "heddle/lower/lower.h"
#include "heddle/schedule/register_pool.h"
#include "heddle/sync/explain.h"

namespace py = pybind11;
using namespace heddle;

namespace {

std::map<std::string, int64_t> toEnv(const py::dict& d) {
  std::map<std::string, int64_t> env;
  for (auto& [k, v] : d) env[k.cast<std::string>()] = v.cast<int64_t>();
  return env;
}

int countSyncs(const kir::Block& b, kir::SyncKind kind) {
  int n = 0;
  kir::walk(b, [&](const kir::Node& x) {
    n += x.kind == kir::NodeKind::Sync && static_cast<const kir::Sync&>(x).sync == kind;
  });
  return n;
}

// Structural view of the kernel IR for tests and tools: nested lists of dicts.
py::list structure(const kir::Block& b) {
  py::list out;
  for (auto& s : b.stmts) {
    py::dict d;
    d["id"] = s->id;
    d["text"] = kir::describe(*s);
    switch (s->kind) {
      case kir::NodeKind::For: {
        auto& f = static_cast<const kir::ForLoop&>(*s);
        d["kind"] = "for";
        d["stage"] = kir::loopStageName(f.stage);
        d["start"] = f.start.str();
        d["stop"] = f.stop.str();
        d["body"] = structure(f.body);
        break;
      }
      case kir::NodeKind::Sync: {
        auto& y = static_cast<const kir::Sync&>(*s);
        d["kind"] = "sync";
        d["sync"] = kir::syncKindName(y.sync);
        d["arg"] = y.arg;
        d["reason"] = y.reason;
        if (y.buf) {  // Hopper ops: the mbarrier (or accumulator) and its index / parity / count
          d["buf"] = y.buf->name;
          d["index"] = y.index.str();
          d["parity"] = y.parity.str();
          d["count"] = y.count;
        }
        break;
      }
      case kir::NodeKind::If: {
        auto& c = static_cast<const kir::IfThenElse&>(*s);
        d["kind"] = "if";
        d["cond"] = c.cond.str();
        if (c.electWarp >= 0) d["elect_warp"] = c.electWarp;
        d["then"] = structure(c.thenBody);
        d["else"] = structure(c.elseBody);
        break;
      }
      case kir::NodeKind::TileLoad: {
        auto& t = static_cast<const kir::TileLoad&>(*s);
        d["kind"] = "load";
        d["buffer"] = t.dst->name;
        d["stage"] = t.stage.str();
        d["iter"] = t.iter.str();
        d["load_kind"] = loadKindName(t.kind);
        break;
      }
      case kir::NodeKind::MmaStep: {
        auto& m = static_cast<const kir::MmaStep&>(*s);
        d["kind"] = "mma";
        d["stage"] = m.stageA.str();
        d["iter"] = m.iter.str();
        break;
      }
      case kir::NodeKind::EpilogueStore: d["kind"] = "epilogue"; break;
      case kir::NodeKind::Alloc: d["kind"] = "alloc"; break;
      case kir::NodeKind::Let: d["kind"] = "let"; break;
      case kir::NodeKind::TmaStore: d["kind"] = "tma_store"; break;
      case kir::NodeKind::MmaPromote: d["kind"] = "promote"; break;
      default: d["kind"] = "other";
    }
    out.append(d);
  }
  return out;
}

}  // namespace

void bindLower(py::module_& m) {
  py::class_<Lowered, std::shared_ptr<Lowered>>(m, "LoweredKernel")
      .def_property_readonly("name", [](const Lowered& l) { return l.k().name; })
      .def_property_readonly("target", [](const Lowered& l) { return l.ctx->target.name; })
      .def_property_readonly("rtc_arch", [](const Lowered& l) { return l.ctx->target.rtcArch; })
      .def_property_readonly(
          "backend", [](const Lowered& l) { return std::string(l.backend().name()); },
          "the runtime backend its target compiles and launches with ('cuda', 'hip')")
      .def_property_readonly(
          "compiler_report", [](const Lowered& l) { return l.backend().compilerReport(); },
          "its compiler reports registers, spills and advisories (ptxas): what Kernel.build checks")
      .def_property_readonly("kernel_ir", [](const Lowered& l) { return l.k().str(); })
      .def_property_readonly("source", [](const Lowered& l) { return l.source; })
      .def_property_readonly("schedule", [](const Lowered& l) { return l.ctx->tiling.str(); })
      .def_property_readonly("threads", [](const Lowered& l) { return l.k().launch.threads; })
      .def(
          "check_register_pool",
          [](const Lowered& l, int ptxasRegisters) {
            const auto& t = l.ctx->tiling;
            if (t.mm)
              checkRegisterPool(t.mm->name, roleBudgets(t.rolePipeline),
                                registerPool(l.k().launch.threads, ptxasRegisters));
          },
          py::arg("ptxas_registers"),
          "ScheduleError when the role budgets do not fit the setmaxnreg pool of the compiled kernel (ptxas's "
          "registers per thread x threads; schedule/register_pool.h)")
      .def_property_readonly("smem_bytes", [](const Lowered& l) { return l.k().launch.smemBytes; })
      .def_property_readonly("structure", [](const Lowered& l) { return structure(l.k().body); })
      .def(
          "explain",
          [](const Lowered& l, const std::string& format) {
            if (format == "mermaid") return sync::explainMermaid(l.k());
            if (format != "text")
              fail<InputError>("explain(format='", format,
                               "'): formats are 'text' (every sync and why) and "
                               "'mermaid' (roles, buffers, mbarriers)");
            return sync::explainSyncPlan(l.k());
          },
          py::arg("format") = "text")
      .def_property_readonly("sync_summary", [](const Lowered& l) { return l.k().syncPlan.summary; })
      .def_property_readonly("barriers_per_main_iteration",
                             [](const Lowered& l) { return l.k().syncPlan.barriersPerMainIteration; })
      .def("count_syncs",
           [](const Lowered& l, const std::string& kind) {
             for (int i = 0; i < 64; ++i)  // every kind syncKindName spells
               if (kind == kir::syncKindName((kir::SyncKind)i)) return countSyncs(l.k().body, (kir::SyncKind)i);
             fail<HeddleError>("count_syncs: unknown sync kind '", kind, "'");
           })
      .def_property_readonly("sync_plan",
                             [](const Lowered& l) {
                               py::list out;
                               for (auto& e : l.k().syncPlan.entries) {
                                 py::dict d;
                                 d["hazards"] = e.hazards;
                                 d["producer"] = e.producer;
                                 d["consumer"] = e.consumer;
                                 d["buffer"] = e.buffer;
                                 d["stage"] = e.stage;
                                 d["mechanism"] = e.mechanism;
                                 d["origin"] = e.origin.str();
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly("smem_plan",
                             [](const Lowered& l) {
                               py::list out;
                               for (auto& s : l.k().smemPlan.slots) {
                                 py::dict d;
                                 d["buffer"] = s.buffer;
                                 d["offset"] = s.offset;
                                 d["bytes"] = s.bytes;
                                 d["align"] = s.align;
                                 d["alias_of"] = s.aliasOf;
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly(
          "params",
          [](const Lowered& l) {
            py::list out;
            for (auto& p : l.k().params) {
              static const char* kinds[] = {"ptr", "i32", "i64", "f32", "tensormap", "ptr", "ptr"};
              out.append(py::make_tuple(p.name, kinds[p.kind], std::string(dtypeName(p.dtype)), p.tensor));
            }
            return out;
          })
      .def_property_readonly("pair_operands",
                             [](const Lowered& l) {  // vec_e=2: what the launch checks
                               py::list out;
                               for (auto& op : l.k().epilogue)
                                 if (op.pairs)
                                   for (auto& p : l.k().params)
                                     if (p.name == op.tensorParam) out.append(p.tensor);
                               return out;
                             })
      .def_property_readonly("tile",
                             [](const Lowered& l) {
                               auto& t = l.k().tile;
                               py::dict d;
                               d["bm"] = t.bm;
                               d["bn"] = t.bn;
                               d["bk"] = t.bk;
                               d["wgmma"] = t.mma == MmaKind::Wgmma;
                               d["mma"] = mmaKindName(t.mma);  // the kernel's one MMA kind
                               d["batch_walk"] = t.batchWalk;  // a persistent walk over batch x m-tiles x n-tiles
                               d["grouped"] = t.grouped;  // a grouped matmul's device walk (lower/build/grouped_walk.h)
                               d["masked"] = t.masked;    // the masked layout's row counts (grouped_walk.h)
                               return d;
                             })
      .def_property_readonly("tensor_maps",
                             [](const Lowered& l) {  // Hopper: what the launcher encodes
                               py::list out;
                               for (auto& m : l.k().tensorMaps) {
                                 py::dict d;
                                 d["param"] = m.param;
                                 d["operand"] = m.operand;
                                 d["box_cols"] = m.boxCols;
                                 d["box_rows"] = m.boxRows;
                                 d["swizzle"] = m.swizzle;
                                 d["batched"] = m.batched;
                                 d["l2_promotion"] = m.l2Promotion;
                                 d["box_depth"] = m.boxDepth;  // a batched (3-D) map's box along dim 3
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly(
          "passes",
          [](const Lowered& l) {
            py::list out;  // (name, ms, changed, ir after, ran, when): ran False = skipped, its `when` did not hold
            for (auto& p : l.ctx->passes) out.append(py::make_tuple(p.name, p.ms, p.changed, p.irAfter, p.ran, p.when));
            return out;
          })
      .def_property_readonly(
          "pass_dump", [](const Lowered& l) { return passDump(*l.ctx); },
          "HEDDLE_DUMP=passes: each pass ran (its IR after, with dump_passes) or skipped, and when "
          "it runs")
      .def_property_readonly("split_k", [](const Lowered& l) { return l.k().splitK; })
      .def_property_readonly("stream_k", [](const Lowered& l) { return l.k().streamK; })
      .def_property_readonly(
          "cluster", [](const Lowered& l) { return l.k().cluster; },
          "CTAs per thread-block cluster along x (1: no cluster; launch with cluster=(c, 1, 1))")
      .def_property_readonly(
          "cluster_along", [](const Lowered& l) { return std::string(1, l.k().clusterAlong); },
          "the tile axis ('m' or 'n') along which a cluster's CTAs compute neighbouring tiles")
      .def_property_readonly("needs_workspace", [](const Lowered& l) { return l.k().splitK > 1 || l.k().streamK > 0; })
      .def("workspace",
           [](const Lowered& l, const py::dict& env) {
             // split-K: (slots, floats per slot); slot = tile * (splits - 1) + split, one flag per slot
             auto& k = l.k();
             // stream-K: one slot and one flag per CTA
             if (k.streamK > 0) return py::make_tuple(k.workspaceTiles.eval(toEnv(env)), k.tile.bm * k.tile.bn);
             if (k.splitK <= 1) return py::make_tuple(int64_t(0), 0);
             return py::make_tuple(k.workspaceTiles.eval(toEnv(env)) * (k.splitK - 1), k.tile.bm * k.tile.bn);
           })
      .def("grid",
           [](const Lowered& l, const py::dict& env) {
             auto e = toEnv(env);
             auto& g = l.k().launch;
             return py::make_tuple(g.gridX.eval(e), g.gridY.eval(e), g.gridZ.eval(e));
           })
      .def("check_launch", [](const Lowered& l, const py::dict& env) {
        auto e = toEnv(env);
        for (auto& c : l.k().tripChecks) {
          int64_t n = c.trips.eval(e);
          if (n < c.minTrips)
            fail<InputError>("K=", e.count("K") ? e.at("K") : -1, " gives ", n, " iteration(s) of the ", c.loop,
                             " loop (k-tile ", l.ctx->tiling.bk, "), but the kernel caching ", c.tensor,
                             " needs at least ", c.minTrips, ": ", c.rule);
        }
      });

  m.def(
      "lower",
      [](const Fusion& f, const std::string& target, int vecA, int vecB, bool dumpPasses, int vecE) {
        LowerOptions o;
        o.vecA = vecA;
        o.vecB = vecB;
        o.vecE = vecE;
        o.dumpPasses = dumpPasses;
        return rt::lowerKernel(f, targetInfo(target), o);
      },
      py::arg("fusion"), py::arg("target") = "sm_80", py::arg("vec_a") = 8, py::arg("vec_b") = 8,
      py::arg("dump_passes") = false, py::arg("vec_e") = 1, py::keep_alive<0, 1>());
  m.def("pass_names", [] {
    std::vector<std::string> r;
    for (auto& p : passList()) r.push_back(p.name);
    return r;
  });
}
