// heddle._C_aten: the optional module that gives _C's launch tables ATen access (bindings/aten_access.h;
// docs/runtime.md, "Eager calls in one C++ call"). Built only where torch's headers are found at build time,
// against that torch: its torch.__version__ is recorded (torch_version, set by CMakeLists.txt) and heddle uses the module only when the
// torch it runs with is the same one (heddle/core/aten.py); else, or when the module is absent, the tables
// read tensors through their Python attributes as before. The only heddle source that includes torch.
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>

#include "heddle/bindings/aten_access.h"

namespace {

using heddle::bindings::AtenAccess;
using heddle::bindings::TensorFacts;

// What the Python-attribute reads of _C's tensorSignature give for an exact torch.Tensor (shape, stride(),
// dtype, get_device(), data_ptr(), is_neg(), requires_grad), read from its at::Tensor. nn.Parameter and
// subclasses are not taken: a subclass may answer those attributes otherwise.
int readTensor(PyObject* obj, TensorFacts* f) {
  if (!THPVariableClass || Py_TYPE(obj) != (PyTypeObject*)THPVariableClass) return heddle::bindings::AtenNotTaken;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (!t.defined()) return heddle::bindings::AtenNotTaken;
  try {
    int n = (int)t.dim();
    if (n > TensorFacts::kMaxDims) return heddle::bindings::AtenNotTaken;
    auto sizes = t.sizes();
    auto strides = t.strides();
    f->ndim = n;
    for (int i = 0; i < n; ++i) {
      f->sizes[i] = sizes[i];
      f->strides[i] = strides[i];
    }
    f->dtype = (PyObject*)torch::getTHPDtype(t.scalar_type());
    f->device = t.get_device();
    f->address = (uint64_t)(uintptr_t)t.data_ptr();  // as Tensor.data_ptr() (throws without storage)
    f->requiresGrad = t.requires_grad();
    if (f->address == 0 || t.is_neg()) return heddle::bindings::AtenNoSignature;
  } catch (const std::exception&) {  // symbolic sizes, no storage: no signature, as the Python reads' errors
    return heddle::bindings::AtenNoSignature;
  }
  return heddle::bindings::AtenRead_Ok;
}

// like.new_empty(sizes): at::empty with like's options (dtype, device, layout), wrapped as a torch.Tensor. torch's
// own error translation (HANDLE_TH_ERRORS): an allocation failure raises torch.OutOfMemoryError, as new_empty does.
PyObject* emptyLike(PyObject* like, const int64_t* sizes, int ndim) {
  HANDLE_TH_ERRORS
  if (!THPVariableClass || Py_TYPE(like) != (PyTypeObject*)THPVariableClass) {
    PyErr_SetString(PyExc_TypeError, "heddle._C_aten: an output's template is not a torch.Tensor");
    return nullptr;
  }
  const at::Tensor& t = THPVariable_Unpack(like);
  return THPVariable_Wrap(at::empty(c10::IntArrayRef(sizes, (size_t)ndim), t.options()));
  END_HANDLE_TH_ERRORS
}

int gradEnabled() { return at::GradMode::is_enabled() ? 1 : 0; }

// torch._C's three mode queries, as torch 2.13 answers them: the dispatch-mode stack (user and infra modes such
// as FakeTensorMode: TorchDispatchModeTLS::stack_len), an enabled torch function mode
// (at::impl::torch_function_mode_enabled), and a functorch transform: its dynamic-layer dispatch keys in the
// thread's included set (vmap, grad, jvp and functionalize push them while they run). tests/runtime/
// test_aten_access.py checks the answer against the Python queries under each kind of mode and transform.
int modesActive() {
  if (c10::impl::TorchDispatchModeTLS::stack_len() > 0 || at::impl::torch_function_mode_enabled()) return 1;
  auto included = c10::impl::tls_local_dispatch_key_set().included_;
  return included.has(c10::DispatchKey::FuncTorchDynamicLayerFrontMode) ||
                 included.has(c10::DispatchKey::FuncTorchDynamicLayerBackMode)
             ? 1
             : 0;
}

const AtenAccess kAccess{
    heddle::bindings::kAtenAccessAbi, sizeof(AtenAccess), readTensor, emptyLike, gradEnabled, modesActive};

PyObject* pyModesActive(PyObject*, PyObject*) { return PyBool_FromLong(modesActive()); }

PyMethodDef kMethods[] = {
    {"modes_active", pyModesActive, METH_NOARGS, "What the CallTable's ATen check of torch's modes answers (tests)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_C_aten",
                       "heddle's ATen access for the eager launch tables (docs/runtime.md)", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__C_aten() {
  PyObject* m = PyModule_Create(&kModule);
  if (!m) return nullptr;
  PyObject* cap = PyCapsule_New(const_cast<AtenAccess*>(&kAccess), heddle::bindings::kAtenAccessCapsule, nullptr);
  if (!cap || PyModule_AddObject(m, "access", cap) < 0 ||
      PyModule_AddStringConstant(m, "torch_version", HEDDLE_TORCH_VERSION) < 0 ||
      PyModule_AddIntConstant(m, "abi", heddle::bindings::kAtenAccessAbi) < 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
