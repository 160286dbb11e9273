// heddle._C.runtime, AMD half: hiprtc (compile_hip, through the kernel cache), the HIP runtime and
// HipKernel (the HIP counterpart of runtime.Kernel, same launch signature). Thin: see runtime/hip/.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "heddle/bindings/launch_args.h"
#include "heddle/ir/errors.h"
#include "heddle/runtime/hip/hip_driver.h"
#include "heddle/runtime/hip/hip_rtc.h"

namespace py = pybind11;
using namespace heddle::rt;

void bindHip(py::module_& m) {
  py::module_ rt = m.attr("runtime");
  rt.def("hiprtc_available", [] { return Hiprtc::available(); });
  rt.def("hiprtc_search_paths", &hiprtcCandidates, "hiprtc candidates in the order they would be tried now.");
  rt.def("hiprtc_info", [] {
    const Hiprtc& h = Hiprtc::instance();
    py::dict d;
    d["path"] = h.libraryPath();
    d["version"] = h.version();
    return d;
  });
  rt.def(
      "hiprtc_options",
      [](const std::string& arch, const std::vector<std::string>& extra) {
        RtcOptions o;
        o.arch = arch;
        o.extraOptions = extra;
        return hiprtcOptionList(o);
      },
      py::arg("arch"), py::arg("options") = std::vector<std::string>{});
  rt.def(
      "compile_hip",
      [](const std::string& source, const std::string& name, const std::string& arch,
         const std::vector<std::string>& options, std::optional<bool> isolate, bool useCache,
         const std::map<std::string, std::string>& headers) {
        CompileRequest req;
        req.source = source;
        req.name = name;
        req.headers = headers;
        req.options.arch = arch;
        req.options.extraOptions = options;
        req.options.isolate = isolate;
        req.options.wantPtx = false;
        req.useCache = useCache;
        py::gil_scoped_release release;
        return compileHip(req);
      },
      py::arg("source"), py::arg("name"), py::arg("arch"), py::arg("options") = std::vector<std::string>{},
      py::arg("isolate") = py::none(), py::arg("use_cache") = true,
      py::arg("headers") = std::map<std::string, std::string>{},
      "Compile HIP source with hiprtc (through the kernel cache; isolated in a child process unless isolate=False "
      "or HEDDLE_RTC_ISOLATE=0). The code object is the result's `cubin`.");
  rt.def("hip_available", [] { return HipRuntime::instance().available(); });
  rt.def("hip_unavailable_reason", [] { return HipRuntime::instance().unavailableReason(); });
  py::class_<HipLoadedKernel, KernelLauncher>(rt, "HipKernel",
                                              "A compiled HIP kernel, loaded lazily on the current AMD device.")
      .def_static(
          "load",
          [](const CachedKernel& k, const std::string& name) {
            return std::make_unique<HipLoadedKernel>(k.result, k.key, name);
          },
          py::arg("result"), py::arg("kernel_name"))
      .def(
          "launch",
          [](HipLoadedKernel& k, const py::sequence& grid, const py::sequence& block, unsigned smem, uint64_t stream,
             const py::list& args) {
            std::vector<KernelArg> packed;
            for (const auto& a : args) packed.push_back(heddle::bindings::kernelArg(a, false));
            auto g = heddle::bindings::dim3(grid, "grid");
            auto b = heddle::bindings::dim3(block, "block");
            py::gil_scoped_release release;
            k.launch(g, b, smem, stream, packed);
          },
          py::arg("grid"), py::arg("block"), py::arg("smem") = 0, py::arg("stream") = 0, py::arg("args") = py::list(),
          "args: list of (kind, value), kind in 'ptr', 'i32', 'i64', 'f32'.");
}
