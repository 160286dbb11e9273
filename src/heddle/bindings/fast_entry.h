// A table's hot method as a plain CPython vectorcall function (METH_FASTCALL) bound to the table: calling
// it skips pybind11's argument dispatch (overload loop, argument casters, the args tuple: about 0.1 us of a
// repeated eager call; docs/runtime.md, "Eager calls in one C++ call"). The function holds a capsule whose
// pointer is the C++ table and whose context keeps the table's Python object alive. C++ exceptions become
// Python ones through pybind11's registered translators (heddle's InputError ... as from any binding).
#pragma once

#include <pybind11/pybind11.h>

namespace heddle::bindings {

namespace py = pybind11;

constexpr const char* kFastEntryCapsule = "heddle.fast_entry";

template <class Table>
const Table& fastEntryTable(PyObject* self) {
  return *static_cast<const Table*>(PyCapsule_GetPointer(self, kFastEntryCapsule));
}

// Runs body() (returning a py::object) as a METH_FASTCALL function's result: a new reference, or nullptr
// with the Python error set.
template <class Body>
PyObject* fastEntryResult(Body&& body) {
  try {
    return body().release().ptr();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

// The builtin function `def` bound to `table`, the C++ object inside `owner` (a pybind11 instance).
inline py::object fastEntry(py::handle owner, const void* table, PyMethodDef* def) {
  PyObject* cap = PyCapsule_New(const_cast<void*>(table), kFastEntryCapsule,
                                [](PyObject* c) { Py_XDECREF(static_cast<PyObject*>(PyCapsule_GetContext(c))); });
  if (!cap) throw py::error_already_set();
  Py_INCREF(owner.ptr());
  if (PyCapsule_SetContext(cap, owner.ptr()) != 0) {
    Py_DECREF(owner.ptr());
    Py_DECREF(cap);
    throw py::error_already_set();
  }
  PyObject* f = PyCFunction_New(def, cap);
  Py_DECREF(cap);
  if (!f) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(f);
}

}  // namespace heddle::bindings
