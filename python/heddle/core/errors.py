"""heddle's exceptions (raised from C++ and Python alike)."""
from .._C import CompileError, DriverError, HeddleError, InputError, RuntimeUnavailable, ScheduleError

__all__ = ["HeddleError", "ScheduleError", "InputError", "CompileError", "DriverError", "RuntimeUnavailable"]
