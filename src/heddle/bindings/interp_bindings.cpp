// heddle._C.interp: thin bindings of src/heddle/interp (the interpreter of printed kernels):
// host compiler discovery, build + load of an interpreter library, one run, the tensor-map encoder.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "heddle/interp/host_build.h"
#include "heddle/ir/errors.h"

namespace py = pybind11;
using namespace heddle::interp;

namespace {

const char* kindName(int k) {
  switch (k) {
    case HRT_PTR: return "ptr";
    case HRT_I32: return "i32";
    case HRT_I64: return "i64";
    case HRT_F32: return "f32";
    case HRT_TENSORMAP: return "tensormap";
    default: return "other";
  }
}

// args: [(kind, value)] as heddle.Kernel.prepare builds them ("ptr" | "i32" | "i64" | "f32" | "bytes")
std::string runLib(const Library& lib, std::vector<unsigned> grid, std::vector<unsigned> block, unsigned smem,
                   const py::list& args, const std::vector<std::string>& names, const py::list& regions,
                   const std::string& schedule, uint64_t seed, int64_t maxEvents, int maxFindings,
                   std::vector<uint32_t> ctas, bool stopAtFirst, int workers, unsigned cluster, unsigned registers) {
  std::vector<hrt_param> params = lib.params();
  if (params.size() != args.size())
    heddle::fail<heddle::InputError>("interpret: ", lib.kernelName, " takes ", params.size(),
                                     " parameters, the launch passes ", args.size());
  std::vector<hrt_arg> a(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto t = args[i].cast<py::sequence>();
    std::string kind = t[0].cast<std::string>();
    std::memset(&a[i], 0, sizeof(hrt_arg));
    const std::string pname = i < names.size() ? names[i] : "#" + std::to_string(i);
    auto mismatch = [&](const char* want) {
      heddle::fail<heddle::InputError>("interpret: parameter ", i, " ('", pname, "') of ", lib.kernelName, " is ", want,
                                       " in the printed source, but the launch passes '", kind, "'");
    };
    const int pk = params[i].kind;
    if (kind == "ptr") {
      if (pk != HRT_PTR) mismatch(kindName(pk));
      py::handle v = t[1];
      a[i].bits = py::hasattr(v, "data_ptr") ? v.attr("data_ptr")().cast<uint64_t>() : v.cast<uint64_t>();
      a[i].kind = HRT_PTR;
    } else if (kind == "i32") {
      if (pk != HRT_I32) mismatch(kindName(pk));
      a[i].bits = (uint64_t)(int64_t)t[1].cast<int32_t>();
      a[i].kind = HRT_I32;
    } else if (kind == "i64") {
      if (pk != HRT_I64) mismatch(kindName(pk));
      a[i].bits = (uint64_t)t[1].cast<int64_t>();
      a[i].kind = HRT_I64;
    } else if (kind == "f32") {
      if (pk != HRT_F32) mismatch(kindName(pk));
      float f = t[1].cast<float>();
      uint32_t u;
      std::memcpy(&u, &f, 4);
      a[i].bits = u;
      a[i].kind = HRT_F32;
    } else if (kind == "bytes") {
      if (pk != HRT_TENSORMAP) mismatch(kindName(pk));
      std::string b = t[1].cast<std::string>();
      if (b.size() != 128)
        heddle::fail<heddle::InputError>("interpret: tensor map for '", pname, "' has ", b.size(), " bytes, not 128");
      std::memcpy(a[i].map, b.data(), 128);
      a[i].kind = HRT_TENSORMAP;
    } else {
      heddle::fail<heddle::InputError>("interpret: unknown argument kind '", kind, "'");
    }
  }
  std::vector<hrt_region> regs(regions.size());
  std::vector<std::string> regNames(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    auto t = regions[i].cast<py::sequence>();  // (name, base, bytes, writable, elem_bytes)
    regNames[i] = t[0].cast<std::string>();
    regs[i] = hrt_region{t[1].cast<uint64_t>(), t[2].cast<uint64_t>(), t[3].cast<bool>() ? 1 : 0, t[4].cast<int32_t>(),
                         regNames[i].c_str()};
  }
  if (grid.size() != 3 || block.size() != 3)
    heddle::fail<heddle::InputError>("interpret: grid and block take 3 entries");
  hrt_launch l;
  std::memset(&l, 0, sizeof l);
  for (int i = 0; i < 3; ++i) l.grid[i] = grid[i], l.block[i] = block[i];
  l.smem_bytes = smem;
  l.nargs = (int)a.size();
  l.args = a.data();
  l.nregions = (int)regs.size();
  l.regions = regs.data();
  if (schedule == "adversarial") l.schedule = HRT_ADVERSARIAL;
  else if (schedule == "random") l.schedule = HRT_RANDOM;
  else heddle::fail<heddle::InputError>("interpret: schedule '", schedule, "': expected 'adversarial' or 'random'");
  l.seed = seed;
  l.max_events = maxEvents;
  l.max_findings = maxFindings;
  l.ncta_subset = (int)ctas.size();
  l.cta_subset = ctas.data();
  l.stop_at_first = stopAtFirst ? 1 : 0;
  l.workers = workers;
  l.cluster = cluster;
  l.regs_per_thread = registers;
  py::gil_scoped_release nogil;
  return run(lib, l);
}

}  // namespace

void bindInterp(py::module_& root) {
  py::module_ m = root.def_submodule("interp", "the interpreter of printed kernels (src/heddle/interp)");
  m.def("host_compiler", [] {
    const HostCompiler& c = hostCompiler();
    py::dict d;
    d["path"] = c.path;
    d["version"] = c.version;
    d["clang"] = c.clang;
    return d;
  });
  py::class_<Library, std::shared_ptr<Library>>(m, "Library")
      .def_readonly("path", &Library::path)
      .def_readonly("kernel_name", &Library::kernelName)
      .def_readonly("cached", &Library::cached)
      .def_readonly("build_ms", &Library::buildMs)
      .def("params",
           [](const Library& l) {
             py::list out;
             for (auto& p : l.params()) out.append(py::make_tuple(kindName(p.kind), p.bytes));
             return out;
           })
      .def("run", &runLib, py::arg("grid"), py::arg("block"), py::arg("smem"), py::arg("args"), py::arg("names"),
           py::arg("regions"), py::arg("schedule") = "adversarial", py::arg("seed") = 0, py::arg("max_events") = 0,
           py::arg("max_findings") = 0, py::arg("ctas") = std::vector<uint32_t>{}, py::arg("stop_at_first") = false,
           py::arg("workers") = 1, py::arg("cluster") = 1, py::arg("registers") = 0);
  m.def(
      "build",
      [](const std::string& source, const std::string& name, const std::string& arch) {
        py::gil_scoped_release nogil;
        return build(source, name, arch);
      },
      py::arg("source"), py::arg("name"), py::arg("arch") = "");
  m.def(
      "encode_tensor_map_tiled",
      [](int dataType, uint64_t address, std::vector<uint64_t> dims, std::vector<uint64_t> strides,
         std::vector<uint32_t> box, std::vector<uint32_t> elementStrides, int interleave, int swizzle, int l2,
         int oob) {
        return py::bytes(
            encodeTensorMap(dataType, address, dims, strides, box, elementStrides, interleave, swizzle, l2, oob));
      },
      py::arg("data_type"), py::arg("address"), py::arg("dims"), py::arg("strides"), py::arg("box"),
      py::arg("element_strides"), py::arg("interleave") = 0, py::arg("swizzle") = 0, py::arg("l2_promotion") = 0,
      py::arg("oob_fill") = 0);
}
