// Python bindings for the Fusion IR and the scheduling operations. Thin: every rule lives in C++.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "heddle/ir/fusion.h"
#include "heddle/schedule/register_pool.h"
#include "heddle/schedule/schedule.h"
#include "heddle/target/target.h"

namespace py = pybind11;
using namespace heddle;

static std::vector<Size> toShape(const py::list& shape) {
  std::vector<Size> s;
  for (auto& d : shape) {
    if (py::isinstance<py::str>(d)) {
      auto name = d.cast<std::string>();
      s.push_back({-1, name});
    } else s.push_back({d.cast<int64_t>(), ""});
  }
  return s;
}

static OpKind opFromName(const std::string& n) {
  static const std::map<std::string, OpKind> m = {{"add", OpKind::Add},          {"sub", OpKind::Sub},
                                                  {"mul", OpKind::Mul},          {"div", OpKind::Div},
                                                  {"relu", OpKind::Relu},        {"gelu", OpKind::GeluErf},
                                                  {"gelu_erf", OpKind::GeluErf}, {"gelu_tanh", OpKind::GeluTanh},
                                                  {"silu", OpKind::Silu},        {"sigmoid", OpKind::Sigmoid},
                                                  {"tanh", OpKind::Tanh},        {"neg", OpKind::Neg}};
  auto it = m.find(n);
  if (it == m.end())
    fail<ScheduleError>("unknown op '", n,
                        "'; heddle's epilogue ops are add, sub, mul, div, relu, gelu, gelu_tanh, "
                        "silu, sigmoid, tanh, neg and cast");
  return it->second;
}

static LoadKind loadKindFromName(const std::string& n) {
  if (n == "plain") return LoadKind::Plain;
  if (n == "cp_async" || n == "cpasync") return LoadKind::CpAsync;
  if (n == "tma_load" || n == "tmaLoad" || n == "tma") return LoadKind::TmaLoad;
  if (n == "async_lds" || n == "lds_dma") return LoadKind::AsyncLds;
  fail<ScheduleError>("cache_after: unknown load kind '", n, "'; use 'plain', 'cp_async' or 'tma_load'");
}

// A role count or option from Python: an int (not a bool), else a ScheduleError naming the role and the key
// (not pybind's cast error).
static int64_t roleInt(const std::string& role, const std::string& key, const py::handle& v) {
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
    fail<ScheduleError>("warp_specialize: role '", role, "' ", key, "=", py::repr(v).cast<std::string>(),
                        " is not an int; a role is an int (its warps) or a dict of warps=, warpgroups=, registers= and "
                        "(the sm_100a epilogue) stages=, each an int");
  return v.cast<int64_t>();
}

static std::vector<Role> toRoles(const py::handle& roles) {
  if (!py::isinstance<py::dict>(roles))
    fail<ScheduleError>(
        "warp_specialize: roles must be a dict of role name -> warps or {warps=, registers=, ...}, "
        "got ",
        py::repr(roles).cast<std::string>());
  std::vector<Role> r;
  for (auto& [k, v] : roles.cast<py::dict>()) {
    Role role;
    if (!py::isinstance<py::str>(k))
      fail<ScheduleError>("warp_specialize: role names are strings ('load', 'mma', 'epilogue'), got ",
                          py::repr(k).cast<std::string>());
    role.name = k.cast<std::string>();
    if (py::isinstance<py::int_>(v)) role.warps = roleWarps(role.name, "warps", roleInt(role.name, "warps", v));
    else if (!py::isinstance<py::dict>(v))
      fail<ScheduleError>("warp_specialize: role '", role.name, "' is ", py::repr(v).cast<std::string>(),
                          "; a role is an int (its warps) or a dict of warps=, warpgroups=, registers= and (the "
                          "sm_100a epilogue) stages=");
    else {
      auto d = v.cast<py::dict>();
      for (auto& [kk, vv] : d) {
        auto key = py::str(kk).cast<std::string>();
        if (key == "warps" || key == "warpgroups") role.warps = roleWarps(role.name, key, roleInt(role.name, key, vv));
        else if (key == "registers") role.registers = static_cast<int>(roleInt(role.name, key, vv));
        else if (key == "stages") role.stages = static_cast<int>(roleInt(role.name, key, vv));
        else
          fail<ScheduleError>("warp_specialize: role '", role.name, "' has unknown option '", key,
                              "'; a role takes warps=, warpgroups=, registers= and (the sm_100a epilogue) stages=");
      }
    }
    r.push_back(role);
  }
  return r;
}

void bindIr(py::module_& m) {
  py::class_<TensorView>(m, "TensorView")
      .def_property_readonly("name", [](const TensorView& t) { return t.name; })
      .def_property_readonly("dtype", [](const TensorView& t) { return std::string(dtypeName(t.dtype)); })
      .def_property_readonly("shape",
                             [](const TensorView& t) {
                               py::list l;
                               for (auto& s : t.shape) {
                                 if (s.isSymbolic()) l.append(s.symbol);
                                 else l.append(s.value);
                               }
                               return l;
                             })
      .def_property_readonly("is_input", [](const TensorView& t) { return t.isInput; })
      .def_property_readonly("domain", [](const TensorView& t) { return t.domain.str(); })
      .def_property_readonly("axes",
                             [](const TensorView& t) {
                               std::vector<std::string> r;
                               for (auto& a : t.domain.axes) r.push_back(a.name);
                               return r;
                             })
      .def_property_readonly("circular",
                             [](const TensorView& t) { return std::make_pair(t.circular.stages, t.circular.prefetch); })
      .def_property_readonly("load_kind", [](const TensorView& t) { return std::string(loadKindName(t.loadKind)); })
      .def("split", &split, py::arg("axis"), py::arg("factor"))
      .def("reorder", &reorder, py::arg("order"))
      .def(
          "parallelize",
          [](TensorView* t, const std::string& a, const std::string& p) { parallelize(t, a, parallelFromName(p)); },
          py::arg("axis"), py::arg("parallel"))
      .def("circular_buffer", &circularBuffer, py::arg("stages"), py::arg("prefetch") = -1, py::arg("war") = "mbarrier")
      .def(
          "warp_specialize", [](TensorView* t, const py::object& roles) { warpSpecialize(t, toRoles(roles)); },
          py::arg("roles"))
      .def("split_k", &splitK, py::arg("splits"))
      .def("epilogue_store", &epilogueStore, py::arg("kind"))
      .def_property_readonly("splits", [](const TensorView& t) { return t.splitK; })
      .def("stream_k", &streamK, py::arg("ctas"))
      .def("promotion", &promotion, py::arg("k"))
      .def_property_readonly("promotion_k", [](const TensorView& t) { return promotionInterval(&t); })
      .def("cluster", &cluster, py::arg("size"), py::arg("along") = "m")
      .def_property_readonly("cluster_size",
                             [](const TensorView& t) { return py::make_tuple(t.clusterSize, t.clusterAlong); })
      .def_property_readonly("stream_k_ctas", [](const TensorView& t) { return t.streamK; })
      .def_property_readonly("per_expert", [](const TensorView& t) { return t.perExpert; })
      .def("__repr__", &TensorView::str);

  py::class_<Fusion>(m, "Fusion")
      .def(py::init<>())
      .def(
          "add_input",
          [](Fusion& f, const std::string& n, const std::string& dt, const py::list& shape) {
            return f.addInput(n, dtypeFromName(dt), toShape(shape));
          },
          py::return_value_policy::reference_internal)
      .def("matmul", &Fusion::matmul, py::arg("a"), py::arg("b"), py::arg("trans_a") = false,
           py::arg("trans_b") = false, py::return_value_policy::reference_internal)
      .def("per_expert", &Fusion::perExpert, py::arg("t"), py::return_value_policy::reference_internal)
      .def("grouped_matmul", &Fusion::groupedMatmul, py::arg("x"), py::arg("w"), py::arg("trans_b") = false,
           py::arg("offsets") = "offs", py::return_value_policy::reference_internal)
      .def("masked_grouped_matmul", &Fusion::maskedGroupedMatmul, py::arg("x"), py::arg("w"),
           py::arg("trans_b") = false, py::arg("counts") = "counts", py::return_value_policy::reference_internal)
      .def(
          "block_scales",
          [](Fusion& f, TensorView* mm, TensorView* sa, TensorView* sb, const std::string& kind) {
            f.blockScales(mm, sa, sb, scaleKindFromName(kind));
          },
          py::arg("mm"), py::arg("scale_a"), py::arg("scale_b"), py::arg("kind") = "block128")
      .def(
          "binary",
          [](Fusion& f, const std::string& op, TensorView* a, TensorView* b) { return f.binary(opFromName(op), a, b); },
          py::return_value_policy::reference_internal)
      .def(
          "binary_scalar",
          [](Fusion& f, const std::string& op, TensorView* a, double s, bool left) {
            return f.binaryScalar(opFromName(op), a, s, left);
          },
          py::arg("op"), py::arg("a"), py::arg("scalar"), py::arg("scalar_on_left") = false,
          py::return_value_policy::reference_internal)
      .def(
          "unary", [](Fusion& f, const std::string& op, TensorView* a) { return f.unary(opFromName(op), a); },
          py::return_value_policy::reference_internal)
      .def(
          "cast", [](Fusion& f, TensorView* a, const std::string& dt) { return f.cast(a, dtypeFromName(dt)); },
          py::return_value_policy::reference_internal)
      .def(
          "quantize",
          [](Fusion& f, TensorView* y, const std::string& dt, const py::object& group) {
            // group: elements per scale, "row" (kQuantRow) or "mx32" (kQuantMx32, an MX-format output)
            int g = 0;
            if (py::isinstance<py::str>(group)) {
              const auto name = group.cast<std::string>();
              if (name != "row" && name != "mx32")
                fail<ScheduleError>("quantize(", y->name, "): group='", name,
                                    "'; use group=128 (1 x 128 blocks), group='row' or group='mx32'");
              g = name == "row" ? kQuantRow : kQuantMx32;
            } else {
              g = group.cast<int>();
            }
            auto [q, s] = f.quantize(y, dtypeFromName(dt), g);
            return py::make_tuple(py::cast(q, py::return_value_policy::reference),
                                  py::cast(s, py::return_value_policy::reference));
          },
          py::arg("y"), py::arg("dtype"), py::arg("group"))
      .def("add_output", &Fusion::addOutput)
      .def(
          "cache_after",
          [](Fusion& f, TensorView* t, const std::string& kind) { return f.cacheAfter(t, loadKindFromName(kind)); },
          py::arg("tensor"), py::arg("kind") = "cp_async", py::return_value_policy::reference_internal)
      .def("init_schedule",
           [](Fusion& f, TensorView* t) {
             f.checkOwned(t, "schedule");
             initLoopDomain(f, t);
           })
      .def(
          "auto_schedule",
          [](Fusion& f, const std::string& target, int64_t m, int64_t n, int64_t k, bool tma, int sms,
             const std::string& kShare, const std::string& epilogueLayout, bool epiPairs) {
            AutoScheduleHints h{m, n, k};
            h.tma = tma;
            h.sms = sms;
            h.kShare = kShare;
            h.epilogueLayout = epilogueLayout;
            h.epiPairs = epiPairs;
            autoScheduleMatmul(f, targetInfo(target), h);
          },
          py::arg("target") = "sm_80", py::arg("m") = -1, py::arg("n") = -1, py::arg("k") = -1, py::arg("tma") = true,
          py::arg("sms") = 0, py::arg("k_share") = "auto", py::arg("epilogue_layout") = "auto",
          py::arg("epilogue_pairs") = false)
      .def_static(
          "k_share_plan",
          [](int64_t tiles, int64_t nk, int stages, int sms, int bm, int bn, int bk, bool streamOk,
             const std::string& mode, const std::string& target) {
            // target: the cp.async schedule's rules for it (no k sharing without grid flags; stream-K where
            // streamKOk), as autoScheduleMatmul applies them; "" = stream_ok as given
            if (!target.empty()) {
              const TargetInfo& t = targetInfo(target);
              if (!kShareOk(t)) {
                chooseKShare(0, 0, stages, 0, bm, bn, bk, false, mode);  // the mode's spelling
                return py::make_tuple(int(1), int(0), "k sharing: none (target " + t.name + " has no grid flags)");
              }
              streamOk = streamKOk(t);
            }
            auto c = chooseKShare(tiles, nk, stages, sms, bm, bn, bk, streamOk, mode);
            return py::make_tuple(int(c.splits), int(c.streamCtas), c.str());
          },
          py::arg("tiles"), py::arg("nk"), py::arg("stages"), py::arg("sms"), py::arg("bm"), py::arg("bn"),
          py::arg("bk"), py::arg("stream_ok") = true, py::arg("mode") = "auto", py::arg("target") = "")
      .def(
          "validate",
          [](const Fusion& f, const std::string& target, int va, int vb) {
            return validateMatmulSchedule(f, targetInfo(target), va, vb).str();
          },
          py::arg("target") = "sm_80", py::arg("vec_a") = 8, py::arg("vec_b") = 8)
      .def_property_readonly("inputs", &Fusion::inputs, py::return_value_policy::reference_internal)
      .def_property_readonly("outputs", &Fusion::outputs, py::return_value_policy::reference_internal)
      .def("find_matmul", &Fusion::findMatmul, py::return_value_policy::reference_internal)
      .def(
          "caches_of",
          [](const Fusion& f, TensorView* t) {
            f.checkOwned(t, "caches_of");
            return f.cachesOf(t);
          },
          py::return_value_policy::reference_internal)
      .def("exprs",
           [](const Fusion& f) {
             py::list out;
             for (auto* e : f.exprs()) {
               py::dict d;
               d["op"] = opName(e->kind);
               std::vector<std::string> ins;
               for (auto* t : e->inputs) ins.push_back(t->name);
               d["inputs"] = ins;
               d["scalar"] = e->scalar ? py::cast(*e->scalar) : py::none();
               d["scalar_on_left"] = e->scalarOnLeft;
               d["trans_a"] = e->transA;
               d["trans_b"] = e->transB;
               d["group_offsets"] = e->groupOffsets;  // a grouped matmul's group-ends argument ("" = none)
               d["group_masked"] = e->groupMasked;    // the masked layout: group_offsets names the row counts
               d["cast"] = std::string(dtypeName(e->castTo));
               // amax_scale / quantize: elements per scale (0 = the whole row), or "mx32" (an MX-format output)
               d["group"] = e->quantGroup == kQuantMx32 ? py::cast("mx32") : py::cast(e->quantGroup);
               d["scales"] = e->scaleKind == ScaleKind::None ? py::none() : py::cast(scaleKindName(e->scaleKind));
               d["scale_a"] = e->scaleA ? py::cast(e->scaleA->name) : py::none();
               d["scale_b"] = e->scaleB ? py::cast(e->scaleB->name) : py::none();
               d["output"] = e->output->name;
               d["dtype"] = std::string(dtypeName(e->output->dtype));
               out.append(d);
             }
             return out;
           })
      .def_property_readonly("serial", &Fusion::serial)
      .def("__str__", &Fusion::str);

  m.def("validate_roles", [](const py::object& roles) { validateRoles("roles", toRoles(roles)); });
  m.def(
      "register_pool_problem",
      [](const std::vector<std::tuple<std::string, int, int>>& wgs, int ptxasRegisters) {
        std::vector<WarpgroupBudget> b;
        int threads = 0;
        for (auto& [name, n, regs] : wgs) b.push_back({name, n, regs}), threads += 128 * n;
        return registerPoolProblem(b, registerPool(threads, ptxasRegisters));
      },
      py::arg("warpgroups"), py::arg("ptxas_registers") = 0,
      "Why role budgets [(role, warpgroups, registers or 0)] do not fit the setmaxnreg register pool of a CTA of "
      "those warpgroups ('' when they do): schedule/register_pool.h.");
  m.def("known_targets", &knownTargets);
  m.def("cuda_target_for", &cudaTargetFor, py::arg("major"), py::arg("minor"),
        "The heddle target whose binaries load on a CUDA device of this compute capability (ScheduleError: none).");
  m.def("cuda_arch_mismatch", &cudaArchMismatch, py::arg("arch"), py::arg("major"), py::arg("minor"),
        "Why a binary for `arch` cannot load on a device of this capability; '' when it loads.");
  m.def("target_info", [](const std::string& n) {
    auto& t = targetInfo(n);
    py::dict d;
    d["name"] = t.name;
    d["backend"] = t.backend == Backend::Cuda ? "cuda" : "hip";
    d["warp_size"] = t.warpSize;
    d["smem_limit"] = t.smemLimit;
    d["cp_async"] = t.cpAsync;
    d["tma"] = t.tma;
    d["wgmma"] = t.mma.has(MmaKind::Wgmma);
    d["tcgen05"] = t.mma.has(MmaKind::Tcgen05);
    py::list mma;  // the MMA kinds offered, by mechanism: "mma.sync", "wgmma", "tcgen05", "MFMA", "WMMA"
    for (MmaKind m : {MmaKind::MmaSync, MmaKind::Wgmma, MmaKind::Tcgen05, MmaKind::Mfma, MmaKind::Wmma})
      if (t.mma.has(m)) mma.append(mmaKindName(m));
    d["mma"] = mma;
    d["split_barrier"] = t.splitBarrier;
    d["named_barriers"] = t.namedBarriers;
    d["rtc_arch"] = t.rtcArch;
    // a matmul group: "best" (on the pipeline a single matmul takes), "weaker" (mma.sync where a single
    // matmul takes TMA + wgmma / tcgen05) or "none" (refused: ScheduleError)
    const GroupLowering g = t.matmulGroup();
    d["matmul_group"] = g == GroupLowering::Best ? "best" : g == GroupLowering::Weaker ? "weaker" : "none";
    d["describe"] = t.describe();
    return d;
  });
}
