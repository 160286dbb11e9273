// heddle._C.runtime: thin Python bindings of src/heddle/runtime (NVRTC, kernel cache, CUDA driver,
// kernel launch). No semantics live here; C++ exceptions propagate and module.cpp maps them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <optional>

#include "heddle/bindings/launch_args.h"
#include "heddle/bindings/lowered.h"
#include "heddle/ir/errors.h"
#include "heddle/runtime/backend.h"
#include "heddle/runtime/cache/cache.h"
#include "heddle/runtime/cuda/cuda_driver.h"
#include "heddle/runtime/cuda/nvrtc.h"
#include "heddle/runtime/dynlib.h"
#include "heddle/runtime/launch.h"
#include "heddle/runtime/rtc.h"
#include "heddle/runtime/sha256.h"

namespace py = pybind11;
using namespace heddle::rt;
using heddle::bindings::dim3;
using heddle::bindings::pointerValue;

namespace {

const RtcResult& res(const CachedKernel& k) { return *k.result; }

// The ptxas report a memory entry left in its disk entry (RtcResult::reportOnDisk), read back.
std::string ptxasReportFromDisk(const CachedKernel& k) {
  if (auto report = KernelCache::global().ptxasReportOf(k.key)) return *report;
  throw heddle::RuntimeUnavailable("the ptxas report of " + res(k).name +
                                   " is not kept in the memory cache (its parsed facts are: .stats) and its disk "
                                   "entry is gone (or the disk cache is off); HEDDLE_DUMP=ptxas keeps it in memory, or "
                                   "compile again with use_cache=False");
}

std::string ptxasReportOf(const CachedKernel& k) {
  return res(k).reportOnDisk ? ptxasReportFromDisk(k) : res(k).ptxasReport;
}

py::dict kernelStatsDict(const PtxasKernelStats& k) {
  py::dict d;
  d["name"] = k.name;
  d["registers"] = k.registers;
  d["spill_stores"] = k.spillStoreBytes;
  d["spill_loads"] = k.spillLoadBytes;
  d["stack_frame"] = k.stackFrame;
  d["smem"] = k.smemBytes;
  return d;
}

void bindTypes(py::module_& rt) {
  py::class_<PtxasStats>(rt, "PtxasStats", "Parsed ptxas -v report (worst case over kernels).")
      .def_readonly("registers", &PtxasStats::registers)
      .def_readonly("spill_stores", &PtxasStats::spillStoreBytes)
      .def_readonly("spill_loads", &PtxasStats::spillLoadBytes)
      .def_readonly("stack_frame", &PtxasStats::stackFrame)
      .def_readonly("smem", &PtxasStats::smemBytes)
      .def_readonly("setmaxnreg_ignored", &PtxasStats::setmaxnregIgnored)
      .def_readonly("wgmma_serialized", &PtxasStats::wgmmaSerialized)
      .def_readonly("advisories", &PtxasStats::advisories)
      .def_readonly("warnings", &PtxasStats::warnings)
      .def_property_readonly("kernels",
                             [](const PtxasStats& s) {
                               py::list l;
                               for (const auto& k : s.kernels) l.append(kernelStatsDict(k));
                               return l;
                             })
      .def("__repr__", [](const PtxasStats& s) {
        return "PtxasStats(registers=" + std::to_string(s.registers) +
               ", spill_stores=" + std::to_string(s.spillStoreBytes) +
               ", spill_loads=" + std::to_string(s.spillLoadBytes) + ", smem=" + std::to_string(s.smemBytes) +
               ", setmaxnreg_ignored=" + (s.setmaxnregIgnored ? "True" : "False") +
               ", wgmma_serialized=" + (s.wgmmaSerialized ? "True" : "False") + ")";
      });

  py::class_<CachedKernel>(rt, "RtcResult", "A compiled program (from NVRTC or the kernel cache).")
      .def_property_readonly("cubin", [](const CachedKernel& k) { return py::bytes(res(k).cubin); })
      .def_property_readonly("ptx",
                             [](const CachedKernel& k) {
                               if (!k.ptxDropped) return res(k).ptx;
                               if (auto ptx = KernelCache::global().ptxOf(k.key))
                                 return *ptx;  // memory keeps no PTX: the disk entry
                               throw heddle::RuntimeUnavailable(
                                   "the PTX of " + res(k).name +
                                   " is not kept in the memory cache and its disk entry "
                                   "is gone (or the disk cache is off); HEDDLE_KEEP_PTX=1 (or HEDDLE_DUMP=ptx) keeps "
                                   "PTX in memory, or compile again with use_cache=False");
                             })
      .def_readonly("ptx_dropped", &CachedKernel::ptxDropped,
                    "The PTX is not held (a memory hit, a built Kernel's result): .ptx reads it back from the disk "
                    "entry")
      .def_property_readonly(
          "held_bytes", [](const CachedKernel& k) { return resultBytes(res(k)); },
          "Bytes this result holds (cubin, PTX if kept, logs, names), as cache_memory_bytes counts an entry")
      .def_property_readonly(
          "shares_memory_entry", [](const CachedKernel& k) { return KernelCache::global().holds(k); },
          "Whether this is the memory cache's own result for its key (its bytes are held once, by the cache)")
      .def_property_readonly(
          "log",
          [](const CachedKernel& k) {
            const RtcResult& r = res(k);
            return r.log.empty() && r.reportOnDisk ? ptxasReportFromDisk(k) : programLog(r);
          },
          "NVRTC's program log; a memory entry of a clean compile keeps it once, as its ptxas report (read back "
          "from the disk entry, as .ptxas is)")
      .def_property_readonly(
          "ptxas", [](const CachedKernel& k) { return ptxasReportOf(k); },
          "The ptxas -v report's text. A memory entry keeps only its parsed facts (.stats) when "
          "its disk entry holds the text: read back from there (report_on_disk)")
      .def_property_readonly(
          "report_on_disk", [](const CachedKernel& k) { return res(k).reportOnDisk; },
          "The ptxas report's text is not held (a memory entry whose disk entry has it): .ptxas reads it back")
      .def_property_readonly("stats", [](const CachedKernel& k) { return res(k).stats; })
      .def_property_readonly("compile_ms", [](const CachedKernel& k) { return res(k).compileMs; })
      .def_property_readonly("nvrtc_version", [](const CachedKernel& k) { return res(k).nvrtcVersion; })
      .def_property_readonly("name", [](const CachedKernel& k) { return res(k).name; })
      .def_property_readonly("arch", [](const CachedKernel& k) { return res(k).arch; })
      .def_property_readonly("cache_source", [](const CachedKernel& k) { return cacheSourceName(k.source); })
      .def_readonly("key", &CachedKernel::key)
      .def("__repr__", [](const CachedKernel& k) {
        return "RtcResult(name='" + res(k).name + "', arch='" + res(k).arch +
               "', cubin=" + std::to_string(res(k).cubin.size()) + " B, cache_source='" + cacheSourceName(k.source) +
               "')";
      });
}

void bindCompile(py::module_& rt) {
  rt.def("set_extra_search_dirs", &setExtraSearchDirs, py::arg("dirs"),
         "Directories searched for NVRTC after the CUDA toolkit and before the plain sonames.");
  rt.def("extra_search_dirs", &extraSearchDirs);
  rt.def("nvrtc_search_paths", &nvrtcCandidates, "NVRTC candidates in the order they would be tried now.");
  rt.def("nvrtc_available", [] { return Nvrtc::available(); });
  rt.def(
      "parse_ptxas", [](const std::string& log) { return parsePtxasReport(log).stats; }, py::arg("log"),
      "The PtxasStats of a ptxas -v report (what a compile's stats hold), for checks on a report's text.");
  rt.def(
      "nvrtc_options",
      [](const std::string& arch, bool lineinfo) {
        RtcOptions o;
        o.arch = arch;
        o.lineinfo = lineinfo;
        return nvrtcOptionList(o);
      },
      py::arg("arch"), py::arg("lineinfo") = false,
      "The NVRTC options a compile for `arch` passes now (HEDDLE_DEBUG's included): part of the cache key.");
  rt.def("nvrtc_info", [] {
    const Nvrtc& n = Nvrtc::instance();
    py::dict d;
    d["path"] = n.libraryPath();
    d["version"] = n.version();
    d["supported_archs"] = n.supportedArchs();
    return d;
  });
  rt.def(
      "compile",
      [](std::string source, const std::string& name, const std::string& arch, const std::vector<std::string>& options,
         std::optional<bool> isolate, bool wantPtx, bool useCache, bool lineinfo, int maxRegisters,
         const std::map<std::string, std::string>& headers) {
        CompileRequest req;
        req.source = std::move(source);  // the converted argument, not a second copy of it
        req.name = name;
        req.headers = headers;
        req.options.arch = arch;
        req.options.extraOptions = options;
        req.options.isolate = isolate;
        req.options.wantPtx = wantPtx;
        req.options.lineinfo = lineinfo;
        req.options.maxRegisters = maxRegisters;
        req.useCache = useCache;
        py::gil_scoped_release release;
        return compile(req);
      },
      py::arg("source"), py::arg("name"), py::arg("arch"), py::arg("options") = std::vector<std::string>{},
      py::arg("isolate") = py::none(), py::arg("want_ptx") = true, py::arg("use_cache") = true,
      py::arg("lineinfo") = false, py::arg("max_registers") = 0,
      py::arg("headers") = std::map<std::string, std::string>{},
      "Compile CUDA source with NVRTC (through the kernel cache). Embedded heddle/*.cuh headers are available.");
  rt.def(
      "compile_lowered",
      [](const Lowered& l, const std::vector<std::string>& options, std::optional<bool> isolate, bool wantPtx,
         bool useCache, bool keepPtx) {
        BuildOptions o;
        o.extraOptions = options;
        o.isolate = isolate;
        o.wantPtx = wantPtx;
        o.useCache = useCache;
        o.keepPtx = keepPtx;
        py::gil_scoped_release release;
        return compileLowered(l, o);
      },
      py::arg("lowered"), py::arg("options") = std::vector<std::string>{}, py::arg("isolate") = py::none(),
      py::arg("want_ptx") = true, py::arg("use_cache") = true, py::arg("keep_ptx") = true,
      "Compile a LoweredKernel's source with its target's backend (NVRTC / hiprtc, through the kernel cache): "
      "runtime/build.h, the second half of the front door. keep_ptx=False: a result kept for launching, the "
      "cache's own cubin and launch facts without the PTX (read back from disk or compiled again when asked; "
      "kept when HEDDLE_KEEP_PTX=1 or HEDDLE_DUMP names ptx).");
  rt.def(
      "embedded_header_names",
      [] {
        std::vector<std::string> names;
        for (const auto& [name, text] : heddle::embeddedHeaders()) names.push_back(name);
        return names;
      },
      "Device headers kernels can #include (\"heddle/<file>.cuh\").");
  rt.def(
      "embedded_headers_digest",
      [] {
        const std::string& built = heddle::embeddedHeadersDigest();
        py::dict texts;
        for (const auto& [name, text] : heddle::embeddedHeaders()) texts[py::str(name)] = py::bytes(text);
        return py::make_tuple(built, texts);
      },
      "(the build-time digest that stands for the embedded headers in cache keys, {name: the embedded text}): "
      "a test recomputes the one from the other and from the files");
  rt.def(
      "sha256",
      [](const py::bytes& data, const std::string& impl) {
        if (impl.empty()) return sha256Hex(std::string(data));
        if (impl != "portable" && impl != "sha-ni")
          throw py::value_error("sha256: impl='" + impl +
                                "' is not one of 'portable', 'sha-ni' (or '' for the default)");
        if (impl == "sha-ni" && !sha256ShaNiAvailable())
          throw py::value_error("sha256: impl='sha-ni' but this CPU (or build) has no SHA extensions");
        return Sha256(impl == "sha-ni" ? Sha256Impl::ShaNi : Sha256Impl::Portable)
            .update(std::string(data))
            .hexDigest();
      },
      py::arg("data"), py::arg("impl") = "",
      "sha256 hex digest of `data` (cache keys and entry checksums); impl: 'portable' or 'sha-ni' for a test, "
      "'' for the process's choice (sha256_impl())");
  rt.def(
      "sha256_impl", [] { return std::string(sha256ImplName(sha256Impl())); },
      "The sha256 compression this process uses: 'sha-ni' (x86 SHA extensions) or 'portable' (HEDDLE_SHA256=portable "
      "forces it)");
  rt.def("sha256_sha_ni_available", &sha256ShaNiAvailable);
  rt.def(
      "cache_key_of",
      [](const std::string& source, const std::string& name, const std::string& arch, bool lineinfo,
         const std::vector<std::string>& options, const std::string& compilerVersion,
         std::optional<std::string> heddleVersion) {
        KeyInputs in;
        in.source = source;
        in.name = name;
        in.options.arch = arch;
        in.options.lineinfo = lineinfo;
        in.options.extraOptions = options;
        in.compilerVersion = compilerVersion;
        in.headersDigest = embeddedHeadersDigest();
        if (heddleVersion) in.heddleVersion = *heddleVersion;
        auto [a, b] = frontDigest(in);
        char front[33];
        std::snprintf(front, sizeof front, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
        return py::make_tuple(KernelCache::computeKey(in), std::string(front));
      },
      py::arg("source"), py::arg("name"), py::arg("arch"), py::arg("lineinfo") = false,
      py::arg("options") = std::vector<std::string>{}, py::arg("compiler_version") = "",
      py::arg("heddle_version") = py::none(),
      "(sha256 cache key, memory-front digest) of a compile's key inputs with the embedded headers; "
      "heddle_version names another heddle build (the key of a kernel compiled by it).");
}

void bindCache(py::module_& rt) {
  rt.def("cache_stats", [] {
    CacheStats s = KernelCache::global().stats();
    py::dict d;
    d["memory_hits"] = s.memoryHits;
    d["disk_hits"] = s.diskHits;
    d["compiles"] = s.compiles;
    d["corrupt"] = s.corrupt;
    d["disk_write_errors"] = s.diskWriteErrors;
    d["evictions"] = s.evictions;
    return d;
  });
  rt.def(
      "cache_memory_bytes", [] { return KernelCache::global().memoryBytes(); },
      "Bytes the memory cache holds for its kernels' results (cubin, PTX when kept, logs, names).");
  rt.def("cache_reset_stats", [] { KernelCache::global().resetStats(); });
  rt.def(
      "cache_clear",
      [](bool memory, bool disk) -> size_t {
        if (memory) KernelCache::global().clear();
        return disk ? KernelCache::global().clearDisk() : 0;
      },
      py::arg("memory") = true, py::arg("disk") = false, "Returns the number of disk files removed.");
  rt.def("cache_dir", [] { return KernelCache::global().diskDir(); });
  rt.def(
      "set_cache_dir", [](std::optional<std::string> dir) { KernelCache::global().setDiskDir(dir.value_or("")); },
      py::arg("path"), "Override the disk cache directory; None restores the environment lookup.");
  rt.def("cache_disk_enabled", [] { return KernelCache::global().diskEnabled(); });
  rt.def(
      "cache_disk_usable", [] { return KernelCache::global().diskDirUsable(); },
      "False when the cache directory is owned by another user or writable by others (memory only).");
  rt.def("cache_memory_size", [] { return KernelCache::global().memorySize(); }, "Kernels held in memory.");
  rt.def("cache_memory_limit", &KernelCache::memoryLimit, "The memory bound ($HEDDLE_MEMORY_CACHE_SIZE).");
  rt.def("register_code_env_var", &KernelCache::registerCodeEnvVar, py::arg("name"),
         "Make an environment variable's value part of every kernel cache key.");
  rt.def("code_env_vars", &KernelCache::codeEnvVars);
}

void bindDriver(py::module_& rt) {
  rt.def("driver_available", [] { return CudaDriver::instance().available(); });
  rt.def("driver_unavailable_reason", [] { return CudaDriver::instance().unavailableReason(); });
  rt.def("device_count", [] {
    CudaDriver::instance().require();
    return CudaDriver::instance().deviceCount();
  });
  rt.def(
      "device_info",
      [](int device) {
        DeviceInfo info = CudaDriver::instance().deviceInfo(device);
        py::dict d;
        d["cc_major"] = info.ccMajor;
        d["cc_minor"] = info.ccMinor;
        d["sms"] = info.smCount;
        d["smem_optin"] = info.smemOptin;
        return d;
      },
      py::arg("device") = 0);
  rt.def("sync_launch_enabled", &syncLaunchEnabled,
         "HEDDLE_SYNC_LAUNCH is set (read once per process): every launch waits for its stream (docs/runtime.md).");
  rt.def(
      "encode_tensor_map_tiled",
      [](int dataType, uint64_t globalAddress, std::vector<uint64_t> globalDim, std::vector<uint64_t> globalStrides,
         std::vector<uint32_t> boxDim, std::vector<uint32_t> elementStrides, int interleave, int swizzle,
         int l2Promotion, int oobFill, const std::string& what) {
        TiledTensorMapSpec s{dataType,
                             globalAddress,
                             std::move(globalDim),
                             std::move(globalStrides),
                             std::move(boxDim),
                             std::move(elementStrides),
                             interleave,
                             swizzle,
                             l2Promotion,
                             oobFill};
        TensorMap map = CudaDriver::instance().encodeTiledTensorMap(s, what);
        return py::bytes(reinterpret_cast<const char*>(&map), sizeof map);
      },
      py::arg("data_type"), py::arg("global_address"), py::arg("global_dim"), py::arg("global_strides"),
      py::arg("box_dim"), py::arg("element_strides"), py::arg("interleave") = 0, py::arg("swizzle") = 0,
      py::arg("l2_promotion") = 0, py::arg("oob_fill") = 0, py::arg("what") = "",
      "cuTensorMapEncodeTiled; returns the 128-byte CUtensorMap to pass as a ('bytes', map) argument. what: the "
      "tensor, named in the DriverError when the driver rejects the map.");

  py::class_<KernelLauncher>(
      rt, "KernelLauncher",
      "A loaded kernel of some runtime backend (runtime/backend.h): Kernel (CUDA), HipKernel (HIP)")
      .def_property_readonly("name", &KernelLauncher::name)
      .def_property_readonly("binary_key", &KernelLauncher::binaryKey);
  rt.def(
      "load",
      [](const CachedKernel& k, const std::string& name, const std::string& backend) {
        // a Kernel or HipKernel object (pybind11 finds the most-derived registered type), owning the launcher
        return py::cast(backendNamed(backend).load(k, name).release(), py::return_value_policy::take_ownership);
      },
      py::arg("result"), py::arg("kernel_name"), py::arg("backend"),
      "The kernel `kernel_name` of a compiled binary, loaded by the named backend (LoweredKernel.backend): a Kernel "
      "(CUDA) or a HipKernel (HIP), loaded lazily at its first launch.");

  py::class_<LoadedKernel, KernelLauncher>(
      rt, "Kernel",
      "A compiled kernel, loaded lazily into the context of the device a launch names (its "
      "primary context; device=-1: the current context), after checking its target loads there.")
      .def_static(
          "load",
          [](const CachedKernel& k, const std::string& name) {
            return std::make_unique<LoadedKernel>(k.result, k.key, name);
          },
          py::arg("result"), py::arg("kernel_name"))
      .def("num_registers", &LoadedKernel::numRegisters, py::arg("device") = -1,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "param_sizes",
          [](LoadedKernel& k, int device) -> py::object {
            std::vector<size_t> sizes;
            bool known;
            {
              py::gil_scoped_release release;
              known = k.paramSizes(&sizes, device);
            }
            return known ? py::object(py::cast(sizes)) : py::object(py::none());
          },
          py::arg("device") = -1,
          "The byte size of each kernel parameter as the driver reports it (cuFuncGetParamInfo, CUDA 12.4+); None "
          "when the driver cannot say. Loads the kernel like launch.")
      .def(
          "launch",
          [](LoadedKernel& k, const py::sequence& grid, const py::sequence& block, unsigned smem, uint64_t stream,
             const py::list& args, const py::sequence& cluster, int device) {
            std::vector<KernelArg> packed;
            for (const auto& a : args) packed.push_back(heddle::bindings::kernelArg(a, true));
            auto g = dim3(grid, "grid");
            auto b = dim3(block, "block");
            auto c = dim3(cluster, "cluster");
            py::gil_scoped_release release;
            k.launch(g, b, smem, stream, packed, c, device);
          },
          py::arg("grid"), py::arg("block"), py::arg("smem") = 0, py::arg("stream") = 0, py::arg("args") = py::list(),
          py::arg("cluster") = py::make_tuple(1, 1, 1), py::arg("device") = -1,
          "args: list of (kind, value), kind in 'ptr' (int or tensor), 'i32', 'i64', 'f32', 'bytes'; cluster: CTAs "
          "per thread-block cluster (x[, y[, z]]), launched with cuLaunchKernelEx when not 1; device: the CUDA "
          "device whose primary context runs it (-1: the current context, else device 0's).");
}

}  // namespace

void bindRemoteCache(py::module_& rt);  // remote_cache_bindings.cpp

void bindRuntime(py::module_& m) {
  py::module_ rt = m.def_submodule("runtime", "NVRTC, kernel cache, CUDA driver and kernel launch");
  bindTypes(rt);
  bindCompile(rt);
  bindCache(rt);
  bindRemoteCache(rt);
  bindDriver(rt);
}
