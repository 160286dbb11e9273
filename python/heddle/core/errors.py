"""heddle's exceptions (raised from C++ and Python alike)."""
from .._C import CompileError, HeddleError, InputError, RuntimeUnavailable, ScheduleError

__all__ = ["HeddleError", "ScheduleError", "InputError", "CompileError", "RuntimeUnavailable"]
