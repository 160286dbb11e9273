// heddle._C.runtime.CallTable: heddle.matmul's front (and heddle.scaled_mm's, the grouped fronts'): a
// whole call's arguments keyed to the plan entry a PlanTable (plan_bindings.cpp) holds for its tensors,
// one C++ call per repeated call; what it shares with PlanTable is plan_table.h. docs/runtime.md,
// "Eager calls".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "heddle/bindings/plan_table.h"
#include "heddle/runtime/launch_table.h"

namespace py = pybind11;
using namespace heddle;
using namespace heddle::rt;

namespace heddle::bindings {

namespace {

// One adopted call: the plan entry it launches through and what its key holds.
struct CallEntry {
  std::shared_ptr<const PlanEntry> plan;
  std::vector<std::pair<Py_ssize_t, py::object>> strings;  // (argument index, str): compared on a hit
  std::vector<py::object> held;                            // the identity-keyed arguments
  std::vector<size_t> pick;  // the plan's tensor j is the call's tensor pick[j] (empty: the call's, in order)
};

// heddle.matmul's front: a whole call's arguments -> the plan entry a PlanTable holds for its tensors,
// adopted after the call's full path (checks, op choice, launch) went through that plan. Each argument
// is keyed in order: a tensor of exactly the `exact` type by its signature (as in PlanTable); None, a
// bool, an int, a float or a str by value (a str by its hash, compared on a hit); an object of one of the
// `identity` types (torch.dtype) by identity (held by the entry, so its address stays its own). Any other
// argument (a tensor subclass such as nn.Parameter, a list, a float subclass) is never planned: the call
// takes the full path, which checks it. run() also sends the call there when a blocker returns true
// (dispatch or function modes, functorch transforms), when `grad_enabled()` and a tensor requires grad,
// and when the tensors' device is not the current one. With ATen access the mode check and the grad mode
// are read from torch's thread-local state instead of the blockers and grad_enabled. LaunchTable's
// `empty` is unused: a call's outputs come from the adopted PlanTable entry.
struct CallTable : LaunchTable<CallEntry> {
  using Entry = CallEntry;
  py::object exact, gradEnabled;
  std::vector<py::object> blockers, identity;

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
  return fastEntryResult([&] { return fastEntryTable<CallTable>(self).run(args, n); });
}

PyMethodDef kCallTableRun = {"run", (PyCFunction)(void (*)())callTableRun, METH_FASTCALL,
                             "CallTable.run without pybind11's dispatch"};

}  // namespace

void bindCallTable(py::module_& rt) {
  py::class_<CallTable> callTable(rt, "CallTable",
                                  "heddle.matmul's front: a whole call's arguments -> the launch plan its tensors "
                                  "took, one C++ call per repeated call (docs/runtime.md, 'Eager calls').");
  callTable
      .def(py::init([](py::object empty, size_t capacity, py::object exactType, const py::sequence& identityTypes,
                       const py::sequence& blockers, py::object gradEnabled, py::object currentDevice,
                       py::object rawStream, py::object aten) {
             CallTable::checkCapacity("CallTable", capacity);
             if (!PyType_Check(exactType.ptr())) throw InputError("CallTable: exact_type must be a type");
             CallTable t;
             t.setUp(std::move(empty), capacity, std::move(currentDevice), std::move(rawStream), std::move(aten));
             t.exact = std::move(exactType);
             for (const auto& i : identityTypes) {
               if (!PyType_Check(i.ptr())) throw InputError("CallTable: identity_types must be types");
               t.identity.push_back(py::reinterpret_borrow<py::object>(i));
             }
             for (const auto& b : blockers) t.blockers.push_back(py::reinterpret_borrow<py::object>(b));
             t.gradEnabled = std::move(gradEnabled);
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
           "argument's address per call); False when one is not (a copy)");
  bindTableCommon(callTable, "fast_run", &kCallTableRun,
                  "run(*args) as a builtin function bound to this table (no pybind11 dispatch per call; keeps the "
                  "table alive): what heddle.matmul's front calls");
}

}  // namespace heddle::bindings
