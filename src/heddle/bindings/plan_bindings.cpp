// heddle._C.runtime.LaunchPlan (runtime/launch_plan.h): one call takes the tensors, reads their
// addresses, binds the slots (tensor maps patched, the stream's workspace) and launches through the
// backend's launcher (runtime/backend.h). Thin: the plan's contents come from heddle.Kernel.
// heddle._C.runtime.WorkspaceTable: a kernel's workspaces by stream. heddle._C.runtime.PlanTable: the
// eager path's one call per launch: the tensors' call signature (shapes, strides, dtypes, device index,
// address modulo 16; a tensor whose memory is not its value, torch's negative bit or a null address, has
// none) read here from their Python attributes (no torch headers), its plan looked up
// (runtime/launch_table.h), the outputs allocated (torch.empty), the addresses checked, packed and
// launched. heddle._C.runtime.CallTable: the same for a whole heddle.matmul call (its tensors and the
// plain values beside them), keyed to a PlanTable's plan. Both take an optional ATen access
// (bindings/aten_access.h, from heddle._C_aten): an exact torch.Tensor is then read from its at::Tensor and
// the outputs come from at::empty, with no call into torch's Python API.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "heddle/bindings/aten_access.h"
#include "heddle/bindings/fast_entry.h"
#include "heddle/bindings/launch_args.h"
#include "heddle/runtime/backend.h"
#include "heddle/runtime/launch.h"
#include "heddle/runtime/launch_plan.h"
#include "heddle/runtime/launch_table.h"

namespace py = pybind11;
using namespace heddle;
using namespace heddle::rt;

namespace {

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

// ---- PlanTable ------------------------------------------------------------------------------------
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

using heddle::bindings::AtenAccess;
using heddle::bindings::TensorFacts;

// The ATen access in `capsule` (heddle._C_aten.access), or nullptr for None; an InputError for a capsule of
// another layout (a _C_aten from another heddle build).
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

bool requiresGrad(PyObject* t);

// The call signature of one tensor into `key`, its address into `addresses`; false (no Python error
// left set) when `t` is not tensor-like, when (noGrad) it requires grad, or when its memory does not hold
// its value (a negative view, torch._neg_view: the memory holds -t with t's shape, strides and address; a
// ZeroTensor: address 0): the caller's full path resolves it or says what is wrong. `aten` (may be null)
// reads an exact torch.Tensor; anything else is read through its Python attributes.
bool tensorSignature(PyObject* t, std::vector<int64_t>* key, std::vector<uint64_t>* addresses,
                     const AtenAccess* aten = nullptr, bool noGrad = false) {
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

// One signature's plan and what its calls allocate. Shared (never changed once made) by the table that
// made it and the call tables that adopted it.
struct PlanEntry {
  struct Output {
    // new_empty of a 0-element tensor of the output's dtype and device (made once by the table's `empty`),
    // called with the sizes as positional ints: no dtype/device keywords to parse (about 0.2 us less a call
    // than empty(*sizes, dtype=, device=); a torch.Size would cost twice the ints). With ATen access:
    // at::empty(sizes, like.options()), like being that 0-element tensor.
    py::object alloc, like;
    py::tuple args;
    std::vector<int64_t> sizes;
  };
  py::object planObject;  // keeps the plan alive
  const PyPlan* plan = nullptr;
  std::vector<Output> outs;
};

// The outputs of a launch through `e` (made by its outputs' new_empty, or at::empty through `aten`; their
// addresses appended to `addresses`), launched on `stream`; None when an address breaks a slot (the caller
// takes the full path).
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

// True when `t` requires grad, or when that cannot be read (either way: not a call to plan).
bool requiresGrad(PyObject* t) {
  static PyObject* gradName = interned("requires_grad");
  PyObject* g = PyObject_GetAttr(t, gradName);
  int requires = g ? PyObject_IsTrue(g) : -1;
  Py_XDECREF(g);
  if (requires < 0) PyErr_Clear();
  return requires != 0;
}

// The stream a launch on `device` goes on: 0 for the CPU (only a test's fake driver launches CPU tensors),
// else the device's current stream (rawStream(index)) when `device` is the current CUDA device
// (currentDevice()); false when it is not, or either query is missing: the caller's Python path makes the
// device current (or the full path does) and launches there.
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

struct PlanTable {
  py::object empty;                     // torch.empty
  py::object atenCapsule;               // heddle._C_aten.access or None
  const AtenAccess* aten = nullptr;     // its table (nullptr: every tensor read through Python)
  py::object currentDevice, rawStream;  // call(): the current CUDA device and its stream (None: not queried)
  bool dryRun = false;  // every launch packs its arguments and stops before the driver (host-cost benchmarks)
  SignatureTable<PlanEntry> entries;

  // exact: every tensor's type must be this one (nullptr: any); noGrad: no tensor may require grad.
  // device: the first tensor's device index (-1: the CPU).
  bool signature(const py::sequence& tensors, std::vector<int64_t>* key, std::vector<uint64_t>* addresses,
                 PyObject* exact = nullptr, bool noGrad = false, long long* device = nullptr) const {
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

  std::shared_ptr<const PlanEntry> find(const py::sequence& tensors) const {
    std::vector<int64_t> key;
    std::vector<uint64_t> addresses;
    if (!signature(tensors, &key, &addresses)) return nullptr;
    return entries.find(key);
  }

  // False (nothing remembered) when the tensors have no signature: no later call could find the plan.
  bool add(const py::sequence& tensors, py::object planObject, const py::sequence& outputs) {
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

  py::object run(uint64_t stream, const py::sequence& tensors, bool dry, const py::object& exact, bool noGrad) const {
    std::vector<int64_t> key;
    std::vector<uint64_t> addresses;
    if (!signature(tensors, &key, &addresses, exact.is_none() ? nullptr : exact.ptr(), noGrad)) return py::none();
    std::shared_ptr<const PlanEntry> e = entries.find(key);  // alive through torch.empty and the launch, whatever
    if (!e) return py::none();                               // another thread does to the table
    return launchEntry(*e, stream, &addresses, dry || dryRun, aten);
  }

  // Kernel.__call__'s and FusedMatmul.planned's whole repeated call: run() on the tensors' device's current
  // stream, queried here. None also when that device is not the current one (the caller's Python path
  // switches the device) or the table has no device queries.
  py::object call(const py::sequence& tensors, const py::object& exact, bool noGrad) const {
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
};

// ---- CallTable ------------------------------------------------------------------------------------
// heddle.matmul's front: a whole call's arguments -> the plan entry a PlanTable holds for its tensors,
// adopted after the call's full path (checks, op choice, launch) went through that plan. Each argument
// is keyed in order: a tensor of exactly the `exact` type by its signature (as in PlanTable); None, a
// bool, an int, a float or a str by value (a str by its hash, compared on a hit); an object of one of the
// `identity` types (torch.dtype) by identity (held by the entry, so its address stays its own). Any other
// argument (a tensor subclass such as nn.Parameter, a list, a float subclass) is never planned: the call
// takes the full path, which checks it. run() also sends the call there when a blocker returns true
// (dispatch or function modes, functorch transforms), when `grad_enabled()` and a tensor requires grad,
// and when the tensors' device is not the current one. With ATen access the mode check and the grad mode
// are read from torch's thread-local state instead of the blockers and grad_enabled.
struct CallTable {
  struct Entry {
    std::shared_ptr<const PlanEntry> plan;
    std::vector<std::pair<Py_ssize_t, py::object>> strings;  // (argument index, str): compared on a hit
    std::vector<py::object> held;                            // the identity-keyed arguments
    std::vector<size_t> pick;  // the plan's tensor j is the call's tensor pick[j] (empty: the call's, in order)
  };
  py::object empty, exact, gradEnabled, currentDevice, rawStream;
  py::object atenCapsule;            // heddle._C_aten.access or None
  const AtenAccess* aten = nullptr;  // its table: tensors read, outputs allocated and grad mode read through ATen
  std::vector<py::object> blockers, identity;
  bool dryRun = false;
  SignatureTable<Entry> entries;

  // The key of the call `args`, its tensors' addresses and the first tensor's device index (-1: the
  // CPU, or no tensor); false when an argument is never planned or (checkGrad) a tensor requires grad.
  // adopting: where the entry's strings and held objects go.
  bool key(PyObject* const* args, Py_ssize_t n, std::vector<int64_t>* key, std::vector<uint64_t>* addresses,
           long long* device, bool checkGrad, Entry* adopting) const {
    addresses->reserve(n + 2);
    *device = -1;
    bool first = true;
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* o = args[i];
      PyTypeObject* type = Py_TYPE(o);
      if ((PyObject*)type == exact.ptr()) {
        key->push_back(TagTensor);
        if (!tensorSignature(o, key, addresses, aten, checkGrad)) return false;
        if (first) *device = (*key)[key->size() - 2];  // tensorSignature ends with (device index, address % 16)
        first = false;
      } else if (o == Py_None) {
        key->push_back(TagNone);
      } else if (type == &PyBool_Type) {
        key->push_back(o == Py_True ? TagTrue : TagFalse);
      } else if (type == &PyLong_Type) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
          PyErr_Clear();
          return false;
        }
        key->push_back(TagInt);
        key->push_back(v);
      } else if (type == &PyFloat_Type) {
        double d = PyFloat_AS_DOUBLE(o);
        int64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        key->push_back(TagFloat);
        key->push_back(bits);
      } else if (type == &PyUnicode_Type) {
        Py_hash_t h = PyObject_Hash(o);  // cached in the str
        if (h == -1) {
          PyErr_Clear();
          return false;
        }
        key->push_back(TagStr);
        key->push_back((int64_t)h);
        if (adopting) adopting->strings.emplace_back(i, py::reinterpret_borrow<py::object>(o));
      } else if (isIdentityType(type)) {
        key->push_back(TagIdentity);
        key->push_back((int64_t)(uintptr_t)o);
        if (adopting) adopting->held.push_back(py::reinterpret_borrow<py::object>(o));
      } else {
        return false;
      }
    }
    return true;
  }

  bool isIdentityType(PyTypeObject* type) const {
    for (const auto& t : identity)
      if ((PyObject*)type == t.ptr()) return true;
    return false;
  }

  // True when calling f() gives a true value (or fails: then the full path runs and says what is wrong).
  static bool truthy(const py::object& f) {
    PyObject* r = PyObject_CallNoArgs(f.ptr());
    int v = r ? PyObject_IsTrue(r) : 1;
    Py_XDECREF(r);
    if (v < 0 || !r) PyErr_Clear();
    return v != 0;
  }

  py::object run(const py::args& args) const {
    return run(PySequence_Fast_ITEMS(args.ptr()), PyTuple_GET_SIZE(args.ptr()));
  }

  // run() on the arguments as a vectorcall passes them (fastRun, heddle.matmul's front)
  py::object run(PyObject* const* args, Py_ssize_t n) const {
    if (aten ? aten->modesActive() != 0 : std::any_of(blockers.begin(), blockers.end(), truthy)) return py::none();
    bool grad = aten ? aten->gradEnabled() != 0 : !gradEnabled.is_none() && truthy(gradEnabled);
    std::vector<int64_t> k;
    k.reserve(64);
    std::vector<uint64_t> addresses;
    long long device = -1;
    if (!key(args, n, &k, &addresses, &device, grad, nullptr)) return py::none();
    std::shared_ptr<const Entry> e = entries.find(k);  // alive through torch.empty and the launch
    if (!e) return py::none();
    for (const auto& [i, s] : e->strings) {
      PyObject* given = args[i];
      if (given != s.ptr() && PyUnicode_Compare(given, s.ptr()) != 0) {
        PyErr_Clear();
        return py::none();  // another str with the same hash
      }
    }
    uint64_t stream;  // the tensors' device must be the current one (the full path switches it)
    if (!currentStream(currentDevice, rawStream, device, &stream)) return py::none();
    if (!e->pick.empty()) {  // the op's tensors are views of some of the call's, at their addresses (adopt)
      std::vector<uint64_t> picked;
      picked.reserve(e->pick.size() + 2);
      for (size_t i : e->pick) picked.push_back(addresses[i]);
      addresses.swap(picked);
    }
    return launchEntry(*e->plan, stream, &addresses, dryRun, aten);
  }

  // Remembers the plan `source` holds for this call's tensors (the exact-type tensors among `args`, in
  // order) under the key of the whole call; false when there is none or an argument is never planned.
  // With `tensors` (the op's tensors, each a view of the call's argument at index pick[j] at its address, made
  // from the call's signature alone: heddle.scaled_mm's b.t(), a reshaped one-element scale): the plan of
  // those tensors; false also when one is not at its argument's address (a copy: every call makes a new one).
  bool adopt(const py::tuple& args, const PlanTable& source, const py::object& tensors, const py::object& pick) {
    auto e = std::make_shared<Entry>();
    std::vector<int64_t> k;
    std::vector<uint64_t> addresses;
    long long device = -1;
    if (!key(PySequence_Fast_ITEMS(args.ptr()), PyTuple_GET_SIZE(args.ptr()), &k, &addresses, &device, false, e.get()))
      return false;
    if (!tensors.is_none()) {
      if (!pickTensors(args, source, tensors, pick.cast<std::vector<Py_ssize_t>>(), addresses, &e->pick)) return false;
      e->plan = source.find(tensors);
    } else {
      py::list own;
      for (const auto& a : args)
        if ((PyObject*)Py_TYPE(a.ptr()) == exact.ptr()) own.append(a);
      e->plan = source.find(own);
    }
    if (!e->plan) return false;
    entries.put(std::move(k), std::move(e));  // a full table is emptied: its calls are re-adopted on use
    return true;
  }

  // pick (argument indices, one per op tensor) as indices into the call's tensor addresses; false when an
  // index names no keyed tensor or an op tensor is not at that argument's address.
  bool pickTensors(const py::tuple& args, const PlanTable& source, const py::object& tensors,
                   const std::vector<Py_ssize_t>& pick, const std::vector<uint64_t>& addresses,
                   std::vector<size_t>* out) const {
    std::vector<int64_t> ordinal(args.size(), -1);  // argument index -> its place among the call's tensors
    int64_t n = 0;
    for (size_t i = 0; i < args.size(); ++i)
      if ((PyObject*)Py_TYPE(args[i].ptr()) == exact.ptr()) ordinal[i] = n++;
    std::vector<int64_t> k;
    std::vector<uint64_t> own;
    if (!source.signature(tensors, &k, &own) || own.size() != pick.size()) return false;
    for (size_t j = 0; j < pick.size(); ++j) {
      if (pick[j] < 0 || pick[j] >= (Py_ssize_t)args.size() || ordinal[pick[j]] < 0) return false;
      size_t i = (size_t)ordinal[pick[j]];
      if (addresses[i] != own[j]) return false;
      out->push_back(i);
    }
    return true;
  }
};

PyObject* callTableRun(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  return heddle::bindings::fastEntryResult(
      [&] { return heddle::bindings::fastEntryTable<CallTable>(self).run(args, n); });
}

PyObject* planTableCall(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  return heddle::bindings::fastEntryResult([&]() -> py::object {
    if (n != 1) throw InputError("PlanTable.fast_call takes one argument: the tensors");
    return heddle::bindings::fastEntryTable<PlanTable>(self).call(py::reinterpret_borrow<py::sequence>(args[0]),
                                                                  py::none(), false);
  });
}

PyMethodDef kCallTableRun = {"run", (PyCFunction)(void (*)())callTableRun, METH_FASTCALL,
                             "CallTable.run without pybind11's dispatch"};
PyMethodDef kPlanTableCall = {"call", (PyCFunction)(void (*)())planTableCall, METH_FASTCALL,
                              "PlanTable.call(tensors) without pybind11's dispatch"};

}  // namespace

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

  py::class_<PlanTable>(rt, "PlanTable",
                        "Launch plans by call signature: run() takes the tensors and does the rest in one call "
                        "(docs/runtime.md, 'Eager calls').")
      .def(py::init(
               [](py::object empty, size_t capacity, py::object currentDevice, py::object rawStream, py::object aten) {
                 if (capacity == 0) throw InputError("PlanTable: capacity must be at least 1");
                 PlanTable t;
                 t.aten = atenAccess(aten);
                 t.atenCapsule = std::move(aten);
                 t.empty = std::move(empty);
                 t.entries = SignatureTable<PlanEntry>(capacity);
                 t.currentDevice = std::move(currentDevice);
                 t.rawStream = std::move(rawStream);
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
          "ATen and the Python reads give the same key)")
      .def_property_readonly(
          "fast_call",
          [](py::object self) {
            return heddle::bindings::fastEntry(self, &self.cast<const PlanTable&>(), &kPlanTableCall);
          },
          "call(tensors) as a builtin function bound to this table (no pybind11 dispatch per call; keeps the table "
          "alive): what Kernel.__call__ holds")
      .def("__len__", [](const PlanTable& t) { return t.entries.size(); })
      .def("clear", [](PlanTable& t) { t.entries.clear(); })
      .def_readwrite("dry_run", &PlanTable::dryRun,
                     "True: every launch through this table stops before the driver call (host-cost benchmarks)");

  py::class_<CallTable>(rt, "CallTable",
                        "heddle.matmul's front: a whole call's arguments -> the launch plan its tensors took, one C++ "
                        "call per repeated call (docs/runtime.md, 'Eager calls').")
      .def(py::init([](py::object empty, size_t capacity, py::object exactType, const py::sequence& identityTypes,
                       const py::sequence& blockers, py::object gradEnabled, py::object currentDevice,
                       py::object rawStream, py::object aten) {
             if (capacity == 0) throw InputError("CallTable: capacity must be at least 1");
             if (!PyType_Check(exactType.ptr())) throw InputError("CallTable: exact_type must be a type");
             CallTable t;
             t.aten = atenAccess(aten);
             t.atenCapsule = std::move(aten);
             t.empty = std::move(empty);
             t.entries = SignatureTable<CallTable::Entry>(capacity);
             t.exact = std::move(exactType);
             for (const auto& i : identityTypes) {
               if (!PyType_Check(i.ptr())) throw InputError("CallTable: identity_types must be types");
               t.identity.push_back(py::reinterpret_borrow<py::object>(i));
             }
             for (const auto& b : blockers) t.blockers.push_back(py::reinterpret_borrow<py::object>(b));
             t.gradEnabled = std::move(gradEnabled);
             t.currentDevice = std::move(currentDevice);
             t.rawStream = std::move(rawStream);
             return t;
           }),
           py::arg("empty"), py::arg("capacity"), py::arg("exact_type"), py::arg("identity_types"), py::arg("blockers"),
           py::arg("grad_enabled"), py::arg("current_device"), py::arg("raw_stream"), py::arg("aten") = py::none(),
           "empty: torch.empty (unused: a call's outputs come from the adopted PlanTable entry); capacity: calls "
           "kept (beyond it the table is emptied); "
           "exact_type: the tensor type keyed by signature (torch.Tensor; its subclasses are never planned); "
           "identity_types: types of arguments keyed by identity (torch.dtype); blockers: callables, any true "
           "result sends a call down the full path (dispatch and function modes, functorch transforms); "
           "grad_enabled: callable, under a true result a tensor that requires grad sends the call down the full "
           "path; current_device(), raw_stream(index): the current CUDA device and its stream as ints (None: "
           "calls on a device never run from the table); aten: heddle._C_aten.access (tensors, outputs, the grad "
           "mode and the mode check through ATen, in place of grad_enabled and blockers; same keys) or None")
      .def("run", static_cast<py::object (CallTable::*)(const py::args&) const>(&CallTable::run),
           "The output of this call launched through the plan adopted for its arguments, or None: the caller "
           "takes the full path (no plan, an argument or a state the table does not plan, an address that breaks "
           "the plan's slots)")
      .def("adopt", &CallTable::adopt, py::arg("args"), py::arg("source"), py::arg("tensors") = py::none(),
           py::arg("pick") = py::none(),
           "Keys the plan `source` (a PlanTable) holds for the tensors among `args` by the whole call `args`; "
           "False when there is none or an argument is never planned. tensors, pick: the plan is the one of "
           "`tensors` (the op's), tensor j a view at the address of args[pick[j]] (the launch takes that "
           "argument's address per call); False when one is not (a copy)")
      .def_property_readonly(
          "fast_run",
          [](py::object self) {
            return heddle::bindings::fastEntry(self, &self.cast<const CallTable&>(), &kCallTableRun);
          },
          "run(*args) as a builtin function bound to this table (no pybind11 dispatch per call; keeps the table "
          "alive): what heddle.matmul's front calls")
      .def("__len__", [](const CallTable& t) { return t.entries.size(); })
      .def("clear", [](CallTable& t) { t.entries.clear(); })
      .def_readwrite("dry_run", &CallTable::dryRun,
                     "True: every launch through this table stops before the driver call (host-cost benchmarks)");
}
