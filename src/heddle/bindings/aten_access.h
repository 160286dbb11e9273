// The eager path's torch access through ATen (docs/runtime.md, "Eager calls in one C++ call"): a table of
// C functions the optional module heddle._C_aten (src/heddle/aten, built against torch's headers) hands to
// _C in a capsule, so _C itself never includes or links torch. Through it a launch table reads an exact
// torch.Tensor's signature from its at::Tensor (no Python attribute or method calls) and allocates an output
// with at::empty; anything it does not take (a subclass, more than kMaxDims dims) it leaves to the
// Python-attribute reads, which give the same key. Versioned by kAtenAccessAbi and the struct's size: _C
// refuses a table of another layout.
#pragma once

#include <Python.h>

#include <cstdint>

namespace heddle::bindings {

constexpr uint32_t kAtenAccessAbi = 1;
constexpr const char* kAtenAccessCapsule = "heddle._C_aten.access";

struct TensorFacts {
  static constexpr int kMaxDims = 8;
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
  PyObject* dtype = nullptr;  // borrowed: the torch.dtype singleton (what t.dtype returns)
  int64_t device = -1;        // t.get_device(): -1 for the CPU
  uint64_t address = 0;       // t.data_ptr()
  bool requiresGrad = false;
};

enum AtenRead : int {
  AtenNotTaken = 0,    // not an exact torch.Tensor, or too many dims: read it through its Python attributes
  AtenRead_Ok = 1,     // facts filled
  AtenNoSignature = 2  // its memory does not hold its value (a negative view, no storage, address 0)
};

struct AtenAccess {
  uint32_t abi;   // kAtenAccessAbi
  uint32_t size;  // sizeof(AtenAccess)
  int (*read)(PyObject* tensor, TensorFacts* facts);
  // at::empty(sizes, like.options()) as a new torch.Tensor reference; nullptr with a Python error set
  PyObject* (*emptyLike)(PyObject* like, const int64_t* sizes, int ndim);
  int (*gradEnabled)();  // torch.is_grad_enabled()
  // 1 while a torch dispatch mode, a torch function mode or a functorch transform is active: what
  // torch._C._len_torch_dispatch_stack, _is_torch_function_mode_enabled and _are_functorch_transforms_active
  // answer (the CallTable's blockers), read from their thread-local state
  int (*modesActive)();
};

}  // namespace heddle::bindings
