// heddle._C.runtime.LaunchPlan (runtime/launch_plan.h): one call takes the tensors, reads their
// addresses, binds the slots and launches. Thin: the plan's contents come from heddle.Kernel.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "heddle/bindings/launch_args.h"
#include "heddle/runtime/hip_driver.h"
#include "heddle/runtime/launch.h"
#include "heddle/runtime/launch_plan.h"

namespace py = pybind11;
using namespace heddle;
using namespace heddle::rt;

namespace {

// The plan and what launches it: a loaded CUDA or HIP kernel (launched from C++), or any object with
// the same launch(grid, block, smem, stream, args) method (a test's fake driver: called through Python).
struct PyPlan {
  std::shared_ptr<LaunchPlan> plan;
  py::object launcher;
  LoadedKernel* cuda = nullptr;
  HipLoadedKernel* hip = nullptr;

  std::vector<uint64_t> addresses(const py::sequence& tensors) const {
    std::vector<uint64_t> a;
    a.reserve(tensors.size());
    for (const auto& t : tensors) a.push_back(heddle::bindings::pointerValue(t));
    return a;
  }
};

py::list argList(const std::vector<KernelArg>& args) {
  py::list out;
  for (const KernelArg& a : args) {
    switch (a.kind) {
      case KernelArg::Kind::Ptr: out.append(py::make_tuple("ptr", a.bits)); break;
      case KernelArg::Kind::I32: out.append(py::make_tuple("i32", (int32_t)(uint32_t)a.bits)); break;
      case KernelArg::Kind::I64: out.append(py::make_tuple("i64", (int64_t)a.bits)); break;
      case KernelArg::Kind::F32: {
        float f;
        uint32_t b = (uint32_t)a.bits;
        std::memcpy(&f, &b, sizeof f);
        out.append(py::make_tuple("f32", f));
        break;
      }
      case KernelArg::Kind::Bytes: out.append(py::make_tuple("bytes", py::bytes(a.blob))); break;
    }
  }
  return out;
}

}  // namespace

void bindPlan(py::module_& m) {
  py::module_ rt = m.attr("runtime").cast<py::module_>();
  py::class_<PyPlan>(rt, "LaunchPlan",
                     "A launch prepared for one call signature: per call, the tensors' addresses into their slots "
                     "(docs/runtime.md, 'Eager calls').")
      .def(py::init([](py::object launcher, const py::sequence& grid, const py::sequence& block, unsigned smem,
                       const py::list& args, const std::vector<std::tuple<int, uint32_t, uint64_t, uint64_t>>& slots) {
             std::vector<KernelArg> packed;
             for (const auto& a : args) packed.push_back(heddle::bindings::kernelArg(a, true));
             std::vector<PlanSlot> s;
             for (const auto& [arg, tensor, align, pinned] : slots) s.push_back({arg, tensor, align, pinned});
             PyPlan p;
             p.plan = std::make_shared<LaunchPlan>(heddle::bindings::dim3(grid, "grid"),
                                                   heddle::bindings::dim3(block, "block"), smem, std::move(packed),
                                                   std::move(s));
             p.launcher = launcher;
             if (py::isinstance<LoadedKernel>(launcher)) p.cuda = launcher.cast<LoadedKernel*>();
             else if (py::isinstance<HipLoadedKernel>(launcher)) p.hip = launcher.cast<HipLoadedKernel*>();
             return p;
           }),
           py::arg("launcher"), py::arg("grid"), py::arg("block"), py::arg("smem"), py::arg("args"),
           py::arg("slots"),
           "slots: (argument index or -1, tensor index, alignment in bytes, pinned address or 0) per tensor use")
      .def(
          "launch",
          [](const PyPlan& p, uint64_t stream, const py::sequence& tensors, bool dryRun) {
            std::vector<KernelArg> args;
            if (!p.plan->bind(p.addresses(tensors), &args)) return false;
            if (dryRun) {  // everything but the driver: the argument array it would get
              ArgPack pack(args);
              return pack.size() == args.size();
            }
            if (p.cuda || p.hip) {
              py::gil_scoped_release release;
              if (p.cuda) p.cuda->launch(p.plan->grid(), p.plan->block(), p.plan->smemBytes(), stream, args);
              else p.hip->launch(p.plan->grid(), p.plan->block(), p.plan->smemBytes(), stream, args);
            } else {
              const auto& g = p.plan->grid();
              const auto& b = p.plan->block();
              p.launcher.attr("launch")(py::make_tuple(g[0], g[1], g[2]), py::make_tuple(b[0], b[1], b[2]),
                                        p.plan->smemBytes(), stream, argList(args));
            }
            return true;
          },
          py::arg("stream"), py::arg("tensors"), py::arg("dry_run") = false,
          "Launches with these tensors (inputs, then the output) on `stream`; False (nothing launched) when an "
          "address breaks its slot (alignment, or a tensor map made for another address). dry_run: bind and pack "
          "the driver's argument array, launch nothing (host-cost benchmarks without a GPU).")
      .def(
          "args",
          [](const PyPlan& p, const py::sequence& tensors) -> py::object {
            std::vector<KernelArg> args;
            if (!p.plan->bind(p.addresses(tensors), &args)) return py::none();
            return argList(args);
          },
          py::arg("tensors"), "The (kind, value) list launch would pass, or None when a slot is broken.")
      .def_property_readonly("grid", [](const PyPlan& p) {
        const auto& g = p.plan->grid();
        return py::make_tuple(g[0], g[1], g[2]);
      });
}
