// heddle._C.runtime.LaunchPlan (runtime/launch_plan.h): one call takes the tensors, reads their
// addresses, binds the slots (tensor maps patched, the stream's workspace) and launches through the
// backend's launcher (runtime/backend.h). Thin: the plan's contents come from heddle.Kernel.
// heddle._C.runtime.WorkspaceTable: a kernel's workspaces by stream. heddle._C.runtime.PlanTable: the
// eager path's one call per launch: the tensors' call signature (shapes, strides, dtypes, device index,
// address modulo 16; a tensor whose memory is not its value, torch's negative bit or a null address, has
// none) read here from their Python attributes (no torch headers), its plan looked up
// (runtime/launch_table.h), the outputs allocated (torch.empty), the addresses checked, packed and
// launched. heddle._C.runtime.CallTable (call_table.cpp): the same for a whole heddle.matmul call, keyed
// to a PlanTable's plan; what the two share is plan_table.h. Both take an optional ATen access
// (bindings/aten_access.h, from heddle._C_aten): an exact torch.Tensor is then read from its at::Tensor and
// the outputs come from at::empty, with no call into torch's Python API.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "heddle/bindings/launch_args.h"
#include "heddle/bindings/plan_table.h"
#include "heddle/runtime/backend.h"
#include "heddle/runtime/launch.h"
#include "heddle/runtime/launch_plan.h"
#include "heddle/runtime/launch_table.h"

namespace py = pybind11;
using namespace heddle;
using namespace heddle::rt;

namespace heddle::bindings {

// The plan and what launches it: a backend's loaded kernel (KernelLauncher: launched from C++), or any
// object with the same launch(grid, block, smem, stream, args) method (a test's fake driver: called
// through Python).
struct PyPlan {
  std::shared_ptr<LaunchPlan> plan;
  py::object launcher;
  KernelLauncher* native = nullptr;

  std::vector<uint64_t> addresses(const py::sequence& tensors) const {
    std::vector<uint64_t> a;
    a.reserve(tensors.size());
    for (const auto& t : tensors) a.push_back(heddle::bindings::pointerValue(t));
    return a;
  }
};

namespace {

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

// (arg, tensor, (data_type, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob))
MapSlot mapSlot(const py::handle& item) {
  auto t = item.cast<py::tuple>();
  if (t.size() != 3) throw InputError("launch plan: maps are (argument, tensor, description) triples");
  auto d = t[2].cast<py::tuple>();
  if (d.size() != 10)
    throw InputError("launch plan: a tensor map's description has 10 fields (cuTensorMapEncodeTiled's)");
  MapSlot m;
  m.arg = t[0].cast<int>();
  m.tensor = t[1].cast<uint32_t>();
  m.spec = TiledTensorMapSpec{d[0].cast<int>(),
                              d[1].cast<uint64_t>(),
                              d[2].cast<std::vector<uint64_t>>(),
                              d[3].cast<std::vector<uint64_t>>(),
                              d[4].cast<std::vector<uint32_t>>(),
                              d[5].cast<std::vector<uint32_t>>(),
                              d[6].cast<int>(),
                              d[7].cast<int>(),
                              d[8].cast<int>(),
                              d[9].cast<int>()};
  return m;
}

WorkspaceUse workspaceUse(const py::object& w) {
  WorkspaceUse use;
  if (w.is_none()) return use;
  auto t = w.cast<py::tuple>();
  if (t.size() != 4) throw InputError("launch plan: workspace is (ws argument, flags argument, slots, WorkspaceTable)");
  use.wsArg = t[0].cast<int>();
  use.flagsArg = t[1].cast<int>();
  use.slots = t[2].cast<uint64_t>();
  use.table = t[3].cast<std::shared_ptr<WorkspaceTable>>();
  return use;
}

// A tensor map made by another encoder than the driver's (the interpreter's): encoded again through it with
// the new address (bind runs with the GIL held).
MapPatcher pythonPatcher(py::object encoder) {
  return [encoder = std::move(encoder)](TensorMap* map, const TiledTensorMapSpec& s, uint64_t address) {
    py::bytes b = encoder(s.dataType, address, s.globalDim, s.globalStrides, s.boxDim, s.elementStrides,
                          py::arg("interleave") = s.interleave, py::arg("swizzle") = s.swizzle,
                          py::arg("l2_promotion") = s.l2Promotion, py::arg("oob_fill") = s.oobFill);
    std::string bytes = b;
    if (bytes.size() != sizeof *map)
      fail<InputError>("launch plan: the tensor-map encoder returned ", bytes.size(), " bytes, not ", sizeof *map);
    std::memcpy(map, bytes.data(), sizeof *map);
  };
}

// Launches `plan` with `addresses` (inputs, then outputs); false when a slot breaks.
bool launchPlan(const PyPlan& p, uint64_t stream, const std::vector<uint64_t>& addresses, bool dryRun) {
  if (p.native || dryRun) {
    BoundArgs bound;
    if (!p.plan->bind(addresses, stream, &bound)) return false;
    if (dryRun) return bound.ptrs.size() == p.plan->args().size();  // everything but the driver
    py::gil_scoped_release release;
    launchBound(*p.plan, *p.native, stream, bound);
    return true;
  }
  std::vector<KernelArg> args;  // a launcher written in Python (a test's fake driver) takes the (kind, value) list
  if (!p.plan->bind(addresses, stream, &args)) return false;
  const auto& g = p.plan->grid();
  const auto& b = p.plan->block();
  p.launcher.attr("launch")(py::make_tuple(g[0], g[1], g[2]), py::make_tuple(b[0], b[1], b[2]), p.plan->smemBytes(),
                            stream, argList(args));
  return true;
}

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

// The signature key of a tensor read through ATen: the same values, in the same order, as the Python reads.
void appendFacts(const TensorFacts& f, std::vector<int64_t>* key, std::vector<uint64_t>* addresses) {
  key->push_back(f.ndim);
  key->insert(key->end(), f.sizes, f.sizes + f.ndim);
  key->push_back(f.ndim);
  key->insert(key->end(), f.strides, f.strides + f.ndim);
  key->push_back((int64_t)(uintptr_t)f.dtype);
  key->push_back(f.device);
  key->push_back((int64_t)(f.address % 16));
  addresses->push_back(f.address);
}

// True when `t` requires grad, or when that cannot be read (either way: not a call to plan).
bool requiresGrad(PyObject* t) {
  static PyObject* gradName = interned("requires_grad");
  PyObject* g = PyObject_GetAttr(t, gradName);
  int requires = g ? PyObject_IsTrue(g) : -1;
  Py_XDECREF(g);
  if (requires < 0) PyErr_Clear();
  return requires != 0;
}

}  // namespace

// ---- shared with call_table.cpp (plan_table.h) ----------------------------------------------------
const AtenAccess* atenAccess(const py::object& capsule) {
  if (capsule.is_none()) return nullptr;
  auto* a = static_cast<const AtenAccess*>(PyCapsule_GetPointer(capsule.ptr(), heddle::bindings::kAtenAccessCapsule));
  if (!a) {
    PyErr_Clear();
    throw InputError("aten: expected heddle._C_aten.access (a capsule named heddle._C_aten.access) or None");
  }
  if (a->abi != heddle::bindings::kAtenAccessAbi || a->size != sizeof(AtenAccess))
    fail<InputError>("aten: heddle._C_aten has ABI ", a->abi, " (", a->size, " bytes), this _C takes ABI ",
                     heddle::bindings::kAtenAccessAbi, " (", sizeof(AtenAccess), " bytes): rebuild heddle");
  return a;
}

bool tensorSignature(PyObject* t, std::vector<int64_t>* key, std::vector<uint64_t>* addresses, const AtenAccess* aten,
                     bool noGrad) {
  if (aten) {
    TensorFacts f;
    int r = aten->read(t, &f);
    if (r == heddle::bindings::AtenRead_Ok) {
      if (noGrad && f.requiresGrad) return false;
      appendFacts(f, key, addresses);
      return true;
    }
    if (r == heddle::bindings::AtenNoSignature) return false;
  }
  if (noGrad && requiresGrad(t)) return false;
  static PyObject* shapeName = interned("shape");
  static PyObject* strideName = interned("stride");
  static PyObject* dtypeName = interned("dtype");
  static PyObject* deviceName = interned("get_device");
  static PyObject* ptrName = interned("data_ptr");
  static PyObject* negName = interned("is_neg");
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
  ok = ok && ptr && !PyErr_Occurred() && address != 0;
  Py_XDECREF(ptr);
  PyObject* neg = ok ? PyObject_CallMethodNoArgs(t, negName) : nullptr;
  ok = ok && neg == Py_False;
  Py_XDECREF(neg);
  if (!ok) {
    PyErr_Clear();
    return false;
  }
  key->push_back(index);
  key->push_back((int64_t)(address % 16));
  addresses->push_back(address);
  return true;
}

py::object launchEntry(const PlanEntry& e, uint64_t stream, std::vector<uint64_t>* addresses, bool dryRun,
                       const AtenAccess* aten) {
  static PyObject* ptrName = interned("data_ptr");
  py::tuple outs(e.outs.size());
  for (size_t i = 0; i < e.outs.size(); ++i) {
    const PlanEntry::Output& out = e.outs[i];
    PyObject* o = aten ? aten->emptyLike(out.like.ptr(), out.sizes.data(), (int)out.sizes.size())
                       : PyObject_Call(out.alloc.ptr(), out.args.ptr(), nullptr);
    if (!o) throw py::error_already_set();
    outs[i] = py::reinterpret_steal<py::object>(o);
    TensorFacts f;
    if (aten && aten->read(o, &f) == heddle::bindings::AtenRead_Ok) {
      addresses->push_back(f.address);
      continue;
    }
    PyObject* ptr = PyObject_CallMethodNoArgs(o, ptrName);
    if (!ptr) throw py::error_already_set();
    addresses->push_back(PyLong_AsUnsignedLongLong(ptr));
    Py_DECREF(ptr);
  }
  if (!launchPlan(*e.plan, stream, *addresses, dryRun)) return py::none();
  return outs.size() == 1 ? py::object(outs[0]) : py::object(outs);
}

bool currentStream(const py::object& currentDevice, const py::object& rawStream, long long device, uint64_t* stream) {
  *stream = 0;
  if (device < 0) return true;
  if (currentDevice.is_none() || rawStream.is_none()) return false;
  PyObject* cur = PyObject_CallNoArgs(currentDevice.ptr());
  long long c = cur ? PyLong_AsLongLong(cur) : -2;
  Py_XDECREF(cur);
  if (PyErr_Occurred()) PyErr_Clear();
  if (c != device) return false;
  py::int_ index(device);
  PyObject* s = PyObject_CallOneArg(rawStream.ptr(), index.ptr());
  if (!s) throw py::error_already_set();
  *stream = PyLong_AsUnsignedLongLong(s);
  Py_DECREF(s);
  if (PyErr_Occurred()) throw py::error_already_set();
  return true;
}

// ---- PlanTable (plan_table.h) -------------------------------------------------------------------
bool PlanTable::signature(const py::sequence& tensors, std::vector<int64_t>* key, std::vector<uint64_t>* addresses,
                          PyObject* exact, bool noGrad, long long* device) const {
  Py_ssize_t n = PySequence_Size(tensors.ptr());
  if (n < 0) {
    PyErr_Clear();
    return false;
  }
  key->reserve(16 * n);
  addresses->reserve(n + 2);
  for (Py_ssize_t i = 0; i < n; ++i) {
    py::object t = py::reinterpret_steal<py::object>(PySequence_GetItem(tensors.ptr(), i));
    if (!t || (exact && (PyObject*)Py_TYPE(t.ptr()) != exact) ||
        !tensorSignature(t.ptr(), key, addresses, aten, noGrad)) {
      PyErr_Clear();
      return false;
    }
    if (i == 0 && device) *device = (*key)[key->size() - 2];  // tensorSignature ends with (device, address % 16)
  }
  return true;
}

std::shared_ptr<const PlanEntry> PlanTable::find(const py::sequence& tensors) const {
  std::vector<int64_t> key;
  std::vector<uint64_t> addresses;
  if (!signature(tensors, &key, &addresses)) return nullptr;
  return entries.find(key);
}

bool PlanTable::add(const py::sequence& tensors, py::object planObject, const py::sequence& outputs) {
  std::vector<int64_t> key;
  std::vector<uint64_t> addresses;
  if (!signature(tensors, &key, &addresses)) return false;
  auto e = std::make_shared<PlanEntry>();
  e->plan = planObject.cast<const PyPlan*>();
  e->planObject = std::move(planObject);
  for (const auto& o : outputs) {
    PlanEntry::Output out;
    py::tuple shape = py::tuple(o.attr("shape"));
    py::tuple dims(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
      out.sizes.push_back(shape[i].cast<int64_t>());
      dims[i] = py::int_(out.sizes.back());
    }
    out.args = shape.size() ? dims : py::make_tuple(dims);  // a 0-d output: new_empty(())
    out.like = empty(0, py::arg("dtype") = o.attr("dtype"), py::arg("device") = o.attr("device"));
    out.alloc = out.like.attr("new_empty");
    e->outs.push_back(std::move(out));
  }
  entries.put(std::move(key), std::move(e));
  return true;
}

py::object PlanTable::run(uint64_t stream, const py::sequence& tensors, bool dry, const py::object& exact,
                          bool noGrad) const {
  std::vector<int64_t> key;
  std::vector<uint64_t> addresses;
  if (!signature(tensors, &key, &addresses, exact.is_none() ? nullptr : exact.ptr(), noGrad)) return py::none();
  std::shared_ptr<const PlanEntry> e = entries.find(key);  // alive through torch.empty and the launch, whatever
  if (!e) return py::none();                               // another thread does to the table
  return launchEntry(*e, stream, &addresses, dry || dryRun, aten);
}

py::object PlanTable::call(const py::sequence& tensors, const py::object& exact, bool noGrad) const {
  std::vector<int64_t> key;
  std::vector<uint64_t> addresses;
  long long device = -1;
  if (!signature(tensors, &key, &addresses, exact.is_none() ? nullptr : exact.ptr(), noGrad, &device))
    return py::none();
  std::shared_ptr<const PlanEntry> e = entries.find(key);
  if (!e) return py::none();
  uint64_t stream;
  if (!currentStream(currentDevice, rawStream, device, &stream)) return py::none();
  return launchEntry(*e, stream, &addresses, dryRun, aten);
}

namespace {

PyObject* planTableCall(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  return heddle::bindings::fastEntryResult([&]() -> py::object {
    if (n != 1) throw InputError("PlanTable.fast_call takes one argument: the tensors");
    return heddle::bindings::fastEntryTable<PlanTable>(self).call(py::reinterpret_borrow<py::sequence>(args[0]),
                                                                  py::none(), false);
  });
}

PyMethodDef kPlanTableCall = {"call", (PyCFunction)(void (*)())planTableCall, METH_FASTCALL,
                              "PlanTable.call(tensors) without pybind11's dispatch"};

}  // namespace
}  // namespace heddle::bindings

using namespace heddle::bindings;

void bindPlan(py::module_& m) {
  py::module_ rt = m.attr("runtime").cast<py::module_>();
  py::class_<PyPlan>(rt, "LaunchPlan",
                     "A launch prepared for one call signature: per call, the tensors' addresses into their slots "
                     "(docs/runtime.md, 'Eager calls').")
      .def(py::init([](py::object launcher, const py::sequence& grid, const py::sequence& block, unsigned smem,
                       const py::list& args, const std::vector<std::tuple<int, uint32_t, uint64_t>>& slots,
                       const py::sequence& cluster, int device, const py::list& maps, const py::object& workspace,
                       const py::object& encoder) {
             std::vector<KernelArg> packed;
             for (const auto& a : args) packed.push_back(heddle::bindings::kernelArg(a, true));
             std::vector<PlanSlot> s;
             for (const auto& [arg, tensor, align] : slots) s.push_back({arg, tensor, align});
             std::vector<MapSlot> ms;
             for (const auto& m : maps) ms.push_back(mapSlot(m));
             PyPlan p;
             p.plan = std::make_shared<LaunchPlan>(heddle::bindings::dim3(grid, "grid"),
                                                   heddle::bindings::dim3(block, "block"), smem, std::move(packed),
                                                   std::move(s), std::move(ms), workspaceUse(workspace),
                                                   encoder.is_none() ? MapPatcher() : pythonPatcher(encoder));
             p.plan->setCluster(heddle::bindings::dim3(cluster, "cluster"));
             p.plan->setDevice(device);
             p.launcher = launcher;
             if (py::isinstance<KernelLauncher>(launcher)) p.native = launcher.cast<KernelLauncher*>();
             return p;
           }),
           py::arg("launcher"), py::arg("grid"), py::arg("block"), py::arg("smem"), py::arg("args"), py::arg("slots"),
           py::arg("cluster") = py::make_tuple(1, 1, 1), py::arg("device") = -1, py::arg("maps") = py::list(),
           py::arg("workspace") = py::none(), py::arg("encoder") = py::none(),
           "slots: (argument index, tensor index, alignment in bytes) per pointer argument that is a tensor's address; "
           "cluster: CTAs per thread-block cluster (a clustered kernel, launched with cuLaunchKernelEx); device: the "
           "CUDA device whose primary context the launch uses (the tensors'; -1: the current context); maps: "
           "(argument index, tensor index, (data_type, address, dims, strides, box, element_strides, interleave, "
           "swizzle, l2_promotion, oob_fill)) per tensor-map argument, what it was encoded from; workspace: "
           "(ws argument, flags argument, slots needed, WorkspaceTable) of a split-K / stream-K kernel; encoder: "
           "the tensor-map encoder the maps came from when not the driver's (a call with another address encodes "
           "its map again through it; the driver's maps get cuTensorMapReplaceAddress)")
      .def(
          "launch",
          [](const PyPlan& p, uint64_t stream, const py::sequence& tensors, bool dryRun) {
            return launchPlan(p, stream, p.addresses(tensors), dryRun);
          },
          py::arg("stream"), py::arg("tensors"), py::arg("dry_run") = false,
          "Launches with these tensors (inputs, then the output) on `stream`; False (nothing launched) when an "
          "address breaks its slot (alignment; or no workspace of its size for this stream). dry_run: bind and pack "
          "the driver's argument array, launch nothing (host-cost benchmarks without a GPU).")
      .def(
          "args",
          [](const PyPlan& p, const py::sequence& tensors, uint64_t stream) -> py::object {
            std::vector<KernelArg> args;
            if (!p.plan->bind(p.addresses(tensors), stream, &args)) return py::none();
            return argList(args);
          },
          py::arg("tensors"), py::arg("stream") = 0,
          "The (kind, value) list launch would pass on `stream`, or None when a slot is broken.")
      .def(
          "packed",
          [](const PyPlan& p, const py::sequence& tensors, uint64_t stream) -> py::object {
            BoundArgs bound;
            if (!p.plan->bind(p.addresses(tensors), stream, &bound)) return py::none();
            py::list out;  // the bytes behind each pointer of the driver's array (8 per scalar: the low ones count)
            const auto& args = p.plan->args();
            for (size_t i = 0; i < args.size(); ++i) {
              size_t n = args[i].kind == KernelArg::Kind::Bytes ? args[i].blob.size() : sizeof(uint64_t);
              out.append(py::bytes(static_cast<const char*>(bound.ptrs[i]), n));
            }
            return out;
          },
          py::arg("tensors"), py::arg("stream") = 0,
          "The driver's argument array launch would pass, as the bytes each pointer points to (a test of the pack), "
          "or None when a slot is broken.")
      .def_property_readonly("grid", [](const PyPlan& p) {
        const auto& g = p.plan->grid();
        return py::make_tuple(g[0], g[1], g[2]);
      });

  py::class_<WorkspaceTable, std::shared_ptr<WorkspaceTable>>(
      rt, "WorkspaceTable",
      "A split-K / stream-K kernel's workspaces by (device, stream), read by its launch plans (runtime/launch_plan.h)")
      .def(py::init<>())
      .def(
          "set",
          [](WorkspaceTable& t, int device, uint64_t stream, const py::handle& ws, const py::handle& flags,
             uint64_t slots) {
            t.set(device, stream, {heddle::bindings::pointerValue(ws), heddle::bindings::pointerValue(flags), slots});
          },
          py::arg("device"), py::arg("stream"), py::arg("ws"), py::arg("flags"), py::arg("slots"),
          "The workspace of (device, stream): partial sums and flags (tensors or addresses) holding `slots` slots")
      .def(
          "get",
          [](const WorkspaceTable& t, int device, uint64_t stream) -> py::object {
            WorkspaceTable::Entry e;
            if (!t.find(device, stream, 0, &e)) return py::none();
            return py::make_tuple(e.ws, e.flags, e.slots);
          },
          py::arg("device"), py::arg("stream"), "(ws address, flags address, slots), or None")
      .def("__len__", &WorkspaceTable::size)
      .def("clear", &WorkspaceTable::clear);

  py::class_<PlanTable> planTable(rt, "PlanTable",
                                  "Launch plans by call signature: run() takes the tensors and does the rest in one "
                                  "call (docs/runtime.md, 'Eager calls').");
  planTable
      .def(py::init(
               [](py::object empty, size_t capacity, py::object currentDevice, py::object rawStream, py::object aten) {
                 PlanTable::checkCapacity("PlanTable", capacity);
                 PlanTable t;
                 t.setUp(std::move(empty), capacity, std::move(currentDevice), std::move(rawStream), std::move(aten));
                 return t;
               }),
           py::arg("empty"), py::arg("capacity") = 64, py::arg("current_device") = py::none(),
           py::arg("raw_stream") = py::none(), py::arg("aten") = py::none(),
           "empty: the output allocator (torch.empty), called once per plan and output as empty(0, dtype=, "
           "device=); each call's output is that tensor's new_empty(*sizes); capacity: signatures kept (beyond "
           "it the table is emptied and re-filled on use); current_device(), raw_stream(index): the current CUDA "
           "device and its stream as ints, for call() (None: call() runs no CUDA tensors); aten: heddle._C_aten.access "
           "(exact torch.Tensors read and outputs allocated through ATen, same keys) or None")
      .def("add", &PlanTable::add, py::arg("tensors"), py::arg("plan"), py::arg("outputs"),
           "Remembers `plan` for the signature of `tensors`; outputs: the outputs its first launch got (their "
           "shape, dtype and device are what later calls allocate). False, nothing remembered, when the tensors "
           "have no signature (not tensors; a negative view or a tensor without memory, which run() refuses)")
      .def("run", &PlanTable::run, py::arg("stream"), py::arg("tensors"), py::arg("dry_run") = false,
           py::arg("exact_type") = py::none(), py::arg("no_grad") = false,
           "The output (a tuple for several) of a launch through this signature's plan, or None: no plan for "
           "the signature, or an address that breaks its slot (the caller takes the full path). dry_run: all "
           "but the driver call. exact_type: None also for a tensor whose type is not exactly this one (a "
           "subclass); no_grad: None also for a tensor that requires grad (autograd must see the call).")
      .def("call", &PlanTable::call, py::arg("tensors"), py::arg("exact_type") = py::none(), py::arg("no_grad") = false,
           "run() on the tensors' device's current stream, queried in C++: the output, or None (also when that "
           "device is not the current one: the caller switches it and uses run())")
      .def("__contains__",
           [](const PlanTable& t, const py::sequence& tensors) {
             std::vector<int64_t> key;
             std::vector<uint64_t> addresses;
             return t.signature(tensors, &key, &addresses) && t.entries.contains(key);
           })
      .def(
          "key",
          [](const PlanTable& t, const py::sequence& tensors) -> py::object {
            std::vector<int64_t> key;
            std::vector<uint64_t> addresses;
            if (!t.signature(tensors, &key, &addresses)) return py::none();
            return py::cast(key);
          },
          "The signature key the table looks `tensors` up by (ints), or None when they have none (tests: the "
          "ATen and the Python reads give the same key)");
  bindTableCommon(planTable, "fast_call", &kPlanTableCall,
                  "call(tensors) as a builtin function bound to this table (no pybind11 dispatch per call; keeps the "
                  "table alive): what Kernel.__call__ holds");
  bindCallTable(rt);
}
