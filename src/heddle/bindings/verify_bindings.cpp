// heddle._C.verify: the CPU simulator (verify/simulator.h), sync mutants (verify/mutate.h) and
// hand-built kernels for planted-bug tests (verify/tiny_kernel.h). Thin: tensors arrive as
// float32 bytes prepared by python/heddle/core/verify.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>

#include "heddle/bindings/lowered.h"
#include "heddle/bindings/program_parse.h"
#include "heddle/codegen/printer.h"
#include "heddle/verify/mutate.h"
#include "heddle/verify/simulator.h"
#include "heddle/verify/tiny_kernel.h"

namespace py = pybind11;
using namespace heddle;

namespace {

std::vector<float> floats(const py::bytes& b) {
  std::string_view s = b;
  if (s.size() % 4) fail<HeddleError>("simulate: tensor data must be float32 bytes");
  std::vector<float> v(s.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

std::vector<verify::TinyStmt> program(const py::list& prog) {
  std::vector<verify::TinyStmt> out;
  for (auto& item : prog) {
    auto t = item.cast<py::tuple>();
    auto op = t[0].cast<std::string>();
    verify::TinyStmt s;
    if (op == "loop") {
      s.op = verify::TinyStmt::Loop;
      s.var = t[1].cast<std::string>();
      s.a = bindings::parseExprArg(t[2]);
      s.b = bindings::parseExprArg(t[3]);
      s.stage = bindings::parseLoopStage(t[4].cast<std::string>());
      s.body = program(t[5].cast<py::list>());
    } else if (op == "if") {
      s.op = verify::TinyStmt::If;
      s.a = bindings::parseExprArg(t[1]);
      s.cmp = t[2].cast<std::string>();
      s.b = bindings::parseExprArg(t[3]);
      s.body = program(t[4].cast<py::list>());
      if (t.size() > 5) s.elseBody = program(t[5].cast<py::list>());
    } else if (op == "write" || op == "read") {
      s.op = op == "write" ? verify::TinyStmt::Write : verify::TinyStmt::Read;
      s.buffer = t[1].cast<std::string>();
      s.a = bindings::parseExprArg(t[2]);
      s.mapping = t[3].cast<std::string>();
      s.async = t.size() > 4 && t[4].cast<bool>();
    } else if (op == "commit") {
      s.op = verify::TinyStmt::Commit;
    } else if (op == "barrier") {
      s.op = verify::TinyStmt::Barrier;
    } else if (op == "wait") {
      s.op = verify::TinyStmt::Wait;
      s.n = t[1].cast<int>();
    } else {
      fail<HeddleError>("tiny kernel: unknown statement '", op, "'");
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::shared_ptr<Lowered> wrap(const Fusion& f, const TargetInfo& t, const LowerOptions& o, const MatmulTiling& tl,
                              kir::Kernel k) {
  auto l = std::make_shared<Lowered>();
  l->ctx.reset(new LowerContext{f, t, o, tl, std::move(k), {}});
  try {
    l->source = printKernel(l->ctx->kernel, t);
  } catch (const std::exception& e) { l->source = std::string("// not printable: ") + e.what() + "\n"; }
  return l;
}

}  // namespace

void bindVerify(py::module_& m) {
  auto v = m.def_submodule("verify", "CPU simulator of kernel IR, sync mutants, hand-built kernels");
  py::class_<verify::SimResult>(v, "SimResult")
      .def_readonly("races", &verify::SimResult::races)
      .def_readonly("deadlocks", &verify::SimResult::deadlocks)
      .def_readonly("async_misuse", &verify::SimResult::asyncMisuse)
      .def_readonly("mismatches", &verify::SimResult::mismatches)
      .def_readonly("barrier_misuse", &verify::SimResult::barrierMisuse)
      .def_readonly("steps", &verify::SimResult::steps)
      .def_readonly("ctas", &verify::SimResult::ctas)
      .def_readonly("findings", &verify::SimResult::findings)
      .def_readonly("schedule", &verify::SimResult::schedule)
      .def_property_readonly("ok", &verify::SimResult::ok)
      .def_property_readonly("output_bytes",
                             [](const verify::SimResult& r) {
                               return py::bytes(reinterpret_cast<const char*>(r.output.data()),
                                                r.output.size() * sizeof(float));
                             })
      .def("report", &verify::SimResult::report);

  v.def(
      "simulate",
      [](const Lowered& l, const std::map<std::string, int64_t>& scalars,
         const std::map<std::string, py::bytes>& tensors, const py::object& reference, const std::string& schedule,
         uint64_t seed, const std::vector<std::array<int64_t, 3>>& ctas, int64_t maxSteps, bool stopAtFirstError,
         double atol, double rtol, int maxReports) {
        verify::SimInputs in;
        in.scalars = scalars;
        for (auto& [n, b] : tensors) in.tensors[n] = floats(b);
        if (!reference.is_none()) in.reference = floats(reference.cast<py::bytes>());
        verify::SimOptions o;
        o.schedule = verify::scheduleFromName(schedule);
        o.seed = seed;
        o.ctas = ctas;
        o.maxSteps = maxSteps;
        o.stopAtFirstError = stopAtFirstError;
        o.atol = atol;
        o.rtol = rtol;
        o.maxReportsPerKind = maxReports;
        o.warpSize = l.ctx->target.warpSize;
        o.mmaFragment = l.ctx->target.mma.has(MmaKind::Mfma) ? 1 : l.ctx->target.mma.has(MmaKind::Wmma) ? 2 : 0;
        o.backOffBarrier = l.ctx->target.backOffBarrier;
        o.dropOnExit = l.ctx->target.waveBarrier;
        o.amdFences = l.ctx->target.waveBarrier;  // AMD barriers order execution; fences order memory
        py::gil_scoped_release nogil;
        return verify::simulate(l.k(), in, o);
      },
      py::arg("kernel"), py::arg("scalars"), py::arg("tensors"), py::arg("reference") = py::none(),
      py::arg("schedule") = "adversarial", py::arg("seed") = 0, py::arg("ctas") = std::vector<std::array<int64_t, 3>>{},
      py::arg("max_steps") = 50'000'000, py::arg("stop_at_first_error") = false, py::arg("atol") = -1.0,
      py::arg("rtol") = -1.0, py::arg("max_reports") = 12);

  v.def(
      "mutants",
      [](const Lowered& l, const std::optional<std::vector<std::string>>& kinds) {
        py::list out;
        for (auto& mu : kinds ? verify::enumerateMutants(l.k(), *kinds) : verify::enumerateMutants(l.k())) {
          py::dict d;
          d["kind"] = mu.kind;
          d["site"] = mu.site;
          d["description"] = mu.description;
          out.append(d);
        }
        return out;
      },
      py::arg("kernel"), py::arg("kinds") = py::none());
  v.def("mutation_kinds", [] {
    std::vector<std::string> r;
    for (auto& k : verify::mutationKinds()) r.push_back(k.name);
    return r;
  });
  v.def(
      "apply_mutant",
      [](const Lowered& l, const std::string& kind, int site) {
        verify::Mutant mu{kind, site, ""};
        return wrap(l.ctx->fusion, l.ctx->target, l.ctx->options, l.ctx->tiling, verify::applyMutant(l.k(), mu));
      },
      py::arg("kernel"), py::arg("kind"), py::arg("site"), py::keep_alive<0, 1>());
  v.def(
      "tiny_kernel",
      [](const py::list& prog, int threads, int stages, int rows, int cols, const std::string& name) {
        static Fusion emptyFusion;
        verify::TinySpec spec;
        spec.name = name;
        spec.threads = threads;
        spec.stages = stages;
        spec.rows = rows;
        spec.cols = cols;
        spec.program = program(prog);
        return wrap(emptyFusion, targetInfo("sm_80"), {}, {}, verify::buildTinyKernel(spec));
      },
      py::arg("program"), py::arg("threads") = 64, py::arg("stages") = 2, py::arg("rows") = 8, py::arg("cols") = 8,
      py::arg("name") = "tiny");
  v.def(
      "fusion_of", [](const Lowered& l) -> const Fusion& { return l.ctx->fusion; }, py::return_value_policy::reference,
      py::keep_alive<0, 1>());
}
