// The eager path's launch tables as the two binding files that make them share them: PlanTable
// (plan_bindings.cpp: tensors -> the launch plan of their call signature) and CallTable (call_table.cpp:
// a whole heddle.matmul call -> the PlanTable entry it adopted). What they share: the plan entry, the
// signature read of one tensor, the launch of an entry, the current stream, the ATen access, the fields
// and set-up of a table, and the members every table binds alike. The key and table logic that reads no
// Python object is runtime/launch_table.h; docs/runtime.md, "Eager calls".
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "heddle/bindings/aten_access.h"
#include "heddle/bindings/fast_entry.h"
#include "heddle/ir/errors.h"
#include "heddle/runtime/launch_table.h"

namespace heddle::bindings {

namespace py = pybind11;

struct PyPlan;  // heddle._C.runtime.LaunchPlan (plan_bindings.cpp)

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

// The ATen access in `capsule` (heddle._C_aten.access), or nullptr for None; an InputError for a capsule of
// another layout (a _C_aten from another heddle build).
const AtenAccess* atenAccess(const py::object& capsule);

// The call signature of one tensor into `key`, its address into `addresses`; false (no Python error
// left set) when `t` is not tensor-like, when (noGrad) it requires grad, or when its memory does not hold
// its value (a negative view, torch._neg_view: the memory holds -t with t's shape, strides and address; a
// ZeroTensor: address 0): the caller's full path resolves it or says what is wrong. `aten` (may be null)
// reads an exact torch.Tensor; anything else is read through its Python attributes.
bool tensorSignature(PyObject* t, std::vector<int64_t>* key, std::vector<uint64_t>* addresses,
                     const AtenAccess* aten = nullptr, bool noGrad = false);

// The outputs of a launch through `e` (made by its outputs' new_empty, or at::empty through `aten`; their
// addresses appended to `addresses`), launched on `stream`; None when an address breaks a slot (the caller
// takes the full path).
py::object launchEntry(const PlanEntry& e, uint64_t stream, std::vector<uint64_t>* addresses, bool dryRun,
                       const AtenAccess* aten);

// The stream a launch on `device` goes on: 0 for the CPU (only a test's fake driver launches CPU tensors),
// else the device's current stream (rawStream(index)) when `device` is the current CUDA device
// (currentDevice()); false when it is not, or either query is missing: the caller's Python path makes the
// device current (or the full path does) and launches there.
bool currentStream(const py::object& currentDevice, const py::object& rawStream, long long device, uint64_t* stream);

// What every launch table holds: its entries by key, the output allocator, the ATen access and the
// device queries.
template <class Entry>
struct LaunchTable {
  py::object empty;                     // torch.empty
  py::object atenCapsule;               // heddle._C_aten.access or None
  const AtenAccess* aten = nullptr;     // its table (nullptr: every tensor read through Python)
  py::object currentDevice, rawStream;  // the current CUDA device and its stream (None: not queried)
  bool dryRun = false;  // every launch packs its arguments and stops before the driver (host-cost benchmarks)
  rt::SignatureTable<Entry> entries;

  // `table` names the class in the error.
  static void checkCapacity(const char* table, size_t capacity) {
    if (capacity == 0) fail<InputError>(table, ": capacity must be at least 1");
  }

  void setUp(py::object emptyFn, size_t capacity, py::object currentDeviceFn, py::object rawStreamFn,
             py::object atenCapsuleObject) {
    aten = atenAccess(atenCapsuleObject);
    atenCapsule = std::move(atenCapsuleObject);
    empty = std::move(emptyFn);
    entries = rt::SignatureTable<Entry>(capacity);
    currentDevice = std::move(currentDeviceFn);
    rawStream = std::move(rawStreamFn);
  }
};

// heddle._C.runtime.PlanTable: launch plans by call signature (plan_bindings.cpp).
struct PlanTable : LaunchTable<PlanEntry> {
  // exact: every tensor's type must be this one (nullptr: any); noGrad: no tensor may require grad.
  // device: the first tensor's device index (-1: the CPU).
  bool signature(const py::sequence& tensors, std::vector<int64_t>* key, std::vector<uint64_t>* addresses,
                 PyObject* exact = nullptr, bool noGrad = false, long long* device = nullptr) const;
  std::shared_ptr<const PlanEntry> find(const py::sequence& tensors) const;
  // False (nothing remembered) when the tensors have no signature: no later call could find the plan.
  bool add(const py::sequence& tensors, py::object planObject, const py::sequence& outputs);
  py::object run(uint64_t stream, const py::sequence& tensors, bool dry, const py::object& exact, bool noGrad) const;
  // Kernel.__call__'s and FusedMatmul.planned's whole repeated call: run() on the tensors' device's current
  // stream, queried here. None also when that device is not the current one (the caller's Python path
  // switches the device) or the table has no device queries.
  py::object call(const py::sequence& tensors, const py::object& exact, bool noGrad) const;
};

// The members every table class binds alike: its hot method `fastName` as a builtin function bound to the
// table (fastEntry with `fastDef`), __len__, clear and dry_run.
template <class Table>
void bindTableCommon(py::class_<Table>& c, const char* fastName, PyMethodDef* fastDef, const char* fastDoc) {
  c.def_property_readonly(
       fastName, [fastDef](py::object self) { return fastEntry(self, &self.cast<const Table&>(), fastDef); }, fastDoc)
      .def("__len__", [](const Table& t) { return t.entries.size(); })
      .def("clear", [](Table& t) { t.entries.clear(); })
      .def_readwrite("dry_run", &Table::dryRun,
                     "True: every launch through this table stops before the driver call (host-cost benchmarks)");
}

// Adds heddle._C.runtime.CallTable to `rt` (call_table.cpp).
void bindCallTable(py::module_& rt);

}  // namespace heddle::bindings
