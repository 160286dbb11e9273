// heddle._C.runtime.LaunchPlan (runtime/launch_plan.h): one call takes the tensors, reads their
// addresses, binds the slots and launches. Thin: the plan's contents come from heddle.Kernel.
// heddle._C.runtime.PlanTable: the eager path's one call per launch: the tensors' call signature
// (shapes, strides, dtypes, device index, address modulo 16) computed here, its plan looked up, the
// outputs allocated (torch.empty), the addresses checked, packed and launched. No torch headers: the
// tensors are read through their Python attributes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <unordered_map>

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

// Launches `plan` with `addresses` (inputs, then outputs); false when a slot breaks.
bool launchPlan(const PyPlan& p, uint64_t stream, const std::vector<uint64_t>& addresses, bool dryRun) {
  if (p.cuda || p.hip || dryRun) {
    BoundArgs bound;
    if (!p.plan->bind(addresses, &bound)) return false;
    if (dryRun) return bound.ptrs.size() == p.plan->args().size();  // everything but the driver
    py::gil_scoped_release release;
    if (p.cuda)
      p.cuda->launchPacked(p.plan->grid(), p.plan->block(), p.plan->smemBytes(), stream, bound.pointers(),
                           p.plan->cluster());
    else p.hip->launchPacked(p.plan->grid(), p.plan->block(), p.plan->smemBytes(), stream, bound.pointers());
    return true;
  }
  std::vector<KernelArg> args;  // a launcher written in Python (a test's fake driver) takes the (kind, value) list
  if (!p.plan->bind(addresses, &args)) return false;
  const auto& g = p.plan->grid();
  const auto& b = p.plan->block();
  p.launcher.attr("launch")(py::make_tuple(g[0], g[1], g[2]), py::make_tuple(b[0], b[1], b[2]), p.plan->smemBytes(),
                            stream, argList(args));
  return true;
}

// ---- PlanTable ------------------------------------------------------------------------------------
struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ (uint64_t)v) * 1099511628211ull;
    return (size_t)h;
  }
};

PyObject* interned(const char* s) {
  PyObject* o = PyUnicode_InternFromString(s);
  if (!o) throw py::error_already_set();
  return o;  // kept for the life of the process
}

// Appends an int tuple (a torch.Size or stride()) to the key; false when it is not one.
bool appendInts(PyObject* seq, std::vector<int64_t>* key) {
  if (!seq || !PyTuple_Check(seq)) return false;
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  key->push_back(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) return false;
    key->push_back(v);
  }
  return true;
}

// The call signature of one tensor into `key`, its address into `addresses`; false (no Python error
// left set) when `t` is not tensor-like: the caller's full path says what is wrong.
bool tensorSignature(PyObject* t, std::vector<int64_t>* key, std::vector<uint64_t>* addresses) {
  static PyObject* shapeName = interned("shape");
  static PyObject* strideName = interned("stride");
  static PyObject* dtypeName = interned("dtype");
  static PyObject* deviceName = interned("get_device");
  static PyObject* ptrName = interned("data_ptr");
  PyObject* shape = PyObject_GetAttr(t, shapeName);
  bool ok = appendInts(shape, key);
  Py_XDECREF(shape);
  PyObject* stride = ok ? PyObject_CallMethodNoArgs(t, strideName) : nullptr;
  ok = ok && appendInts(stride, key);
  Py_XDECREF(stride);
  PyObject* dtype = ok ? PyObject_GetAttr(t, dtypeName) : nullptr;  // torch dtypes are singletons
  if (dtype) key->push_back((int64_t)(uintptr_t)dtype);
  ok = ok && dtype;
  Py_XDECREF(dtype);
  PyObject* dev = ok ? PyObject_CallMethodNoArgs(t, deviceName) : nullptr;  // -1: the CPU
  long long index = dev ? PyLong_AsLongLong(dev) : -1;
  ok = ok && dev && !PyErr_Occurred();
  Py_XDECREF(dev);
  PyObject* ptr = ok ? PyObject_CallMethodNoArgs(t, ptrName) : nullptr;
  unsigned long long address = ptr ? PyLong_AsUnsignedLongLong(ptr) : 0;
  ok = ok && ptr && !PyErr_Occurred();
  Py_XDECREF(ptr);
  if (!ok) {
    PyErr_Clear();
    return false;
  }
  key->push_back(index);
  key->push_back((int64_t)(address % 16));
  addresses->push_back(address);
  return true;
}

struct PlanTable {
  struct Output {
    py::tuple args;  // the sizes as positional ints: torch.empty parses them twice as fast as a torch.Size
    py::dict kwargs;  // dtype, device
  };
  struct Entry {
    py::object planObject;  // keeps the plan alive
    const PyPlan* plan = nullptr;
    std::vector<Output> outs;
  };
  py::object empty;  // torch.empty
  size_t capacity;
  std::unordered_map<std::vector<int64_t>, Entry, KeyHash> entries;

  // exact: every tensor's type must be this one (nullptr: any); noGrad: no tensor may require grad.
  bool signature(const py::sequence& tensors, std::vector<int64_t>* key, std::vector<uint64_t>* addresses,
                 PyObject* exact = nullptr, bool noGrad = false) const {
    static PyObject* gradName = interned("requires_grad");
    Py_ssize_t n = PySequence_Size(tensors.ptr());
    key->reserve(16 * n);
    addresses->reserve(n + 2);
    for (Py_ssize_t i = 0; i < n; ++i) {
      py::object t = py::reinterpret_steal<py::object>(PySequence_GetItem(tensors.ptr(), i));
      if (!t || (exact && (PyObject*)Py_TYPE(t.ptr()) != exact)) {
        PyErr_Clear();
        return false;
      }
      if (noGrad) {
        PyObject* g = PyObject_GetAttr(t.ptr(), gradName);
        int requires = g ? PyObject_IsTrue(g) : -1;
        Py_XDECREF(g);
        if (requires != 0) {
          PyErr_Clear();
          return false;
        }
      }
      if (!tensorSignature(t.ptr(), key, addresses)) {
        PyErr_Clear();
        return false;
      }
    }
    return true;
  }

  void add(const py::sequence& tensors, py::object planObject, const py::sequence& outputs) {
    std::vector<int64_t> key;
    std::vector<uint64_t> addresses;
    if (!signature(tensors, &key, &addresses)) throw InputError("PlanTable.add: the call's tensors are not tensors");
    Entry e;
    e.plan = planObject.cast<const PyPlan*>();
    e.planObject = std::move(planObject);
    for (const auto& o : outputs) {
      Output out;
      py::tuple shape = py::tuple(o.attr("shape"));
      py::tuple dims(shape.size());
      for (size_t i = 0; i < shape.size(); ++i) dims[i] = py::int_(shape[i].cast<int64_t>());
      out.args = shape.size() ? dims : py::make_tuple(dims);  // a 0-d output: torch.empty(())
      out.kwargs["dtype"] = o.attr("dtype");
      out.kwargs["device"] = o.attr("device");
      e.outs.push_back(std::move(out));
    }
    if (entries.size() >= capacity) entries.clear();  // forgotten all at once, re-planned on use
    entries[std::move(key)] = std::move(e);
  }

  py::object run(uint64_t stream, const py::sequence& tensors, bool dryRun, const py::object& exact,
                 bool noGrad) const {
    std::vector<int64_t> key;
    std::vector<uint64_t> addresses;
    if (!signature(tensors, &key, &addresses, exact.is_none() ? nullptr : exact.ptr(), noGrad)) return py::none();
    auto it = entries.find(key);
    if (it == entries.end()) return py::none();
    const Entry e = it->second;  // a copy: alive through torch.empty and the launch, whatever another thread does
    const PyPlan& plan = *e.plan;
    static PyObject* ptrName = interned("data_ptr");
    py::tuple outs(e.outs.size());
    for (size_t i = 0; i < e.outs.size(); ++i) {
      PyObject* o = PyObject_Call(empty.ptr(), e.outs[i].args.ptr(), e.outs[i].kwargs.ptr());
      if (!o) throw py::error_already_set();
      outs[i] = py::reinterpret_steal<py::object>(o);
      PyObject* ptr = PyObject_CallMethodNoArgs(o, ptrName);
      if (!ptr) throw py::error_already_set();
      addresses.push_back(PyLong_AsUnsignedLongLong(ptr));
      Py_DECREF(ptr);
    }
    if (!launchPlan(plan, stream, addresses, dryRun)) return py::none();
    return outs.size() == 1 ? py::object(outs[0]) : py::object(outs);
  }
};

}  // namespace

void bindPlan(py::module_& m) {
  py::module_ rt = m.attr("runtime").cast<py::module_>();
  py::class_<PyPlan>(rt, "LaunchPlan",
                     "A launch prepared for one call signature: per call, the tensors' addresses into their slots "
                     "(docs/runtime.md, 'Eager calls').")
      .def(py::init([](py::object launcher, const py::sequence& grid, const py::sequence& block, unsigned smem,
                       const py::list& args, const std::vector<std::tuple<int, uint32_t, uint64_t, uint64_t>>& slots,
                       const py::sequence& cluster) {
             std::vector<KernelArg> packed;
             for (const auto& a : args) packed.push_back(heddle::bindings::kernelArg(a, true));
             std::vector<PlanSlot> s;
             for (const auto& [arg, tensor, align, pinned] : slots) s.push_back({arg, tensor, align, pinned});
             PyPlan p;
             p.plan = std::make_shared<LaunchPlan>(heddle::bindings::dim3(grid, "grid"),
                                                   heddle::bindings::dim3(block, "block"), smem, std::move(packed),
                                                   std::move(s));
             p.plan->setCluster(heddle::bindings::dim3(cluster, "cluster"));
             p.launcher = launcher;
             if (py::isinstance<LoadedKernel>(launcher)) p.cuda = launcher.cast<LoadedKernel*>();
             else if (py::isinstance<HipLoadedKernel>(launcher)) p.hip = launcher.cast<HipLoadedKernel*>();
             return p;
           }),
           py::arg("launcher"), py::arg("grid"), py::arg("block"), py::arg("smem"), py::arg("args"),
           py::arg("slots"), py::arg("cluster") = py::make_tuple(1, 1, 1),
           "slots: (argument index or -1, tensor index, alignment in bytes, pinned address or 0) per tensor use; "
           "cluster: CTAs per thread-block cluster (a clustered kernel, launched with cuLaunchKernelEx)")
      .def(
          "launch",
          [](const PyPlan& p, uint64_t stream, const py::sequence& tensors, bool dryRun) {
            return launchPlan(p, stream, p.addresses(tensors), dryRun);
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
      .def(
          "packed",
          [](const PyPlan& p, const py::sequence& tensors) -> py::object {
            BoundArgs bound;
            if (!p.plan->bind(p.addresses(tensors), &bound)) return py::none();
            py::list out;  // the bytes behind each pointer of the driver's array (8 per scalar: the low ones count)
            const auto& args = p.plan->args();
            for (size_t i = 0; i < args.size(); ++i) {
              size_t n = args[i].kind == KernelArg::Kind::Bytes ? args[i].blob.size() : sizeof(uint64_t);
              out.append(py::bytes(static_cast<const char*>(bound.ptrs[i]), n));
            }
            return out;
          },
          py::arg("tensors"),
          "The driver's argument array launch would pass, as the bytes each pointer points to (a test of the pack), "
          "or None when a slot is broken.")
      .def_property_readonly("grid", [](const PyPlan& p) {
        const auto& g = p.plan->grid();
        return py::make_tuple(g[0], g[1], g[2]);
      });

  py::class_<PlanTable>(rt, "PlanTable",
                        "Launch plans by call signature: run() takes the tensors and does the rest in one call "
                        "(docs/runtime.md, 'Eager calls').")
      .def(py::init([](py::object empty, size_t capacity) {
             if (capacity == 0) throw InputError("PlanTable: capacity must be at least 1");
             PlanTable t;
             t.empty = std::move(empty);
             t.capacity = capacity;
             return t;
           }),
           py::arg("empty"), py::arg("capacity") = 64,
           "empty: the output allocator, called as empty(shape, dtype=, device=) (torch.empty); capacity: "
           "signatures kept (beyond it the table is emptied and re-filled on use)")
      .def("add", &PlanTable::add, py::arg("tensors"), py::arg("plan"), py::arg("outputs"),
           "Remembers `plan` for the signature of `tensors`; outputs: the outputs its first launch got (their "
           "shape, dtype and device are what later calls allocate)")
      .def("run", &PlanTable::run, py::arg("stream"), py::arg("tensors"), py::arg("dry_run") = false,
           py::arg("exact_type") = py::none(), py::arg("no_grad") = false,
           "The output (a tuple for several) of a launch through this signature's plan, or None: no plan for "
           "the signature, or an address that breaks its slot (the caller takes the full path). dry_run: all "
           "but the driver call. exact_type: None also for a tensor whose type is not exactly this one (a "
           "subclass); no_grad: None also for a tensor that requires grad (autograd must see the call).")
      .def("__contains__", [](const PlanTable& t, const py::sequence& tensors) {
             std::vector<int64_t> key;
             std::vector<uint64_t> addresses;
             return t.signature(tensors, &key, &addresses) && t.entries.count(key) > 0;
           })
      .def("__len__", [](const PlanTable& t) { return t.entries.size(); })
      .def("clear", [](PlanTable& t) { t.entries.clear(); });
}
