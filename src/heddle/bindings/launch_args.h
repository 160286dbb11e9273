// Python launch values -> C++ (shared by runtime.Kernel and runtime.HipKernel): grid/block dims and
// (kind, value) kernel arguments. Values that do not fit (None, floats, ints beyond the C type) are
// InputErrors naming the value, never pybind's "Unable to cast".
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <limits>
#include <string>

#include "heddle/ir/errors.h"
#include "heddle/runtime/launch.h"

namespace heddle::bindings {

namespace py = pybind11;

template <typename T>
T intArg(const py::handle& v, const std::string& what) {
  long long x = 0;
  bool ok = !py::isinstance<py::float_>(v) && !py::isinstance<py::bool_>(v);
  if (ok) {
    try {
      x = v.cast<long long>();
    } catch (const py::cast_error&) { ok = false; }
  }
  if (!ok || x < (long long)std::numeric_limits<T>::min() ||
      (x > 0 && (unsigned long long)x > std::numeric_limits<T>::max()))
    fail<InputError>(what, " must be an int in [", +std::numeric_limits<T>::min(), ", ", +std::numeric_limits<T>::max(),
                     "], got ", py::repr(v).cast<std::string>());
  return static_cast<T>(x);
}

inline uint64_t pointerValue(const py::handle& v) {
  if (py::hasattr(v, "data_ptr")) return v.attr("data_ptr")().cast<uint64_t>();  // torch.Tensor
  return v.cast<uint64_t>();
}

// kinds: 'ptr' (int or tensor), 'i32', 'i64', 'f32', and 'bytes' where the backend takes it
inline rt::KernelArg kernelArg(const py::handle& item, bool bytes) {
  auto t = item.cast<py::sequence>();
  if (t.size() != 2) throw InputError("kernel arguments are (kind, value) pairs");
  std::string kind = t[0].cast<std::string>();
  py::handle v = t[1];
  if (kind == "ptr") return rt::KernelArg::ptr(pointerValue(v));
  if (kind == "i32") return rt::KernelArg::i32(intArg<int32_t>(v, "kernel argument ('i32', value)"));
  if (kind == "i64") return rt::KernelArg::i64(intArg<int64_t>(v, "kernel argument ('i64', value)"));
  if (kind == "f32") return rt::KernelArg::f32(v.cast<float>());
  if (bytes && kind == "bytes") return rt::KernelArg::bytes(v.cast<std::string>());
  fail<InputError>("unknown kernel argument kind '", kind, "': expected 'ptr', 'i32', 'i64', 'f32'",
                   bytes ? " or 'bytes'" : " (HIP takes no 'bytes')");
}

inline std::array<unsigned, 3> dim3(const py::sequence& t, const char* what) {
  if (t.size() < 1 || t.size() > 3) fail<InputError>(what, " must have 1 to 3 entries");
  std::array<unsigned, 3> d = {1, 1, 1};
  for (size_t i = 0; i < t.size(); ++i)
    d[i] = intArg<unsigned>(t[i], std::string(what) + "[" + std::to_string(i) + "]");
  return d;
}

}  // namespace heddle::bindings
