// heddle._C: the pybind11 module. Maps the C++ error types (ir/errors.h) to Python exception
// classes heddle._C.HeddleError (a RuntimeError) and its subclasses, then adds each submodule.
#include <pybind11/pybind11.h>

#include "heddle/ir/errors.h"

namespace py = pybind11;

void bindRuntime(py::module_& m);
void bindIr(py::module_& m);
void bindLower(py::module_& m);
void bindLab(py::module_& m);
void bindRoleGraph(py::module_& m);  // role_graph_bindings.cpp: heddle._C.role_graph_lab
void bindVerify(py::module_& m);
void bindHip(py::module_& m);     // hip_bindings.cpp: adds the AMD half of heddle._C.runtime
void bindPlan(py::module_& m);    // plan_bindings.cpp: LaunchPlan, PlanTable (CallTable: call_table.cpp)
void bindInterp(py::module_& m);  // interp_bindings.cpp: heddle._C.interp

PYBIND11_MODULE(_C, m) {
  m.doc() = "heddle C++ core";
  // Base first: pybind11 tries translators in reverse registration order, so subclasses win.
  auto& base = py::register_exception<heddle::HeddleError>(m, "HeddleError", PyExc_RuntimeError);
  py::register_exception<heddle::ScheduleError>(m, "ScheduleError", base);
  py::register_exception<heddle::InputError>(m, "InputError", base);
  py::register_exception<heddle::CompileError>(m, "CompileError", base);
  py::register_exception<heddle::DriverError>(m, "DriverError", base);
  py::register_exception<heddle::RuntimeUnavailable>(m, "RuntimeUnavailable", base);
  bindIr(m);
  bindLower(m);
  bindLab(m);
  bindRoleGraph(m);
  bindRuntime(m);
  bindHip(m);
  bindPlan(m);
  bindVerify(m);
  bindInterp(m);
}
