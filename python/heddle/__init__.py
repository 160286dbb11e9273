"""heddle: a JIT tensor fuser for pipelined matmul + epilogue kernels with a minimal, explained
sync plan, compiled at run time with NVRTC.

    import heddle
    fd = heddle.Fusion()                       # define
    ...
    fd.auto_schedule("sm_80")                  # or split/parallelize/cache_after/circular_buffer
    k = fd.compile("sm_80")                    # lower + NVRTC (no GPU needed)
    print(k.explain())                         # every sync and why
    y = k(a, b, bias)                          # run (CUDA tensors)

    y = heddle.matmul(a, b, bias=bias, activation="gelu")   # automatic schedule, torch custom op
"""
from . import _C
from . import ops
from . import verify
from .api import matmul
from .errors import CompileError, HeddleError, InputError, RuntimeUnavailable, ScheduleError
from .fusion import Fusion, Tensor
from .kernel import Kernel
from .verify import simulate
from .interpret import interpret
from .runtime import ensure_search_dirs, gpu_available, nvrtc_available

ensure_search_dirs()  # let the C++ loader find NVRTC in the nvidia-* wheels

__version__ = "0.1.0"


def __getattr__(name):
    # heddle.autotune / heddle.bench load on first use (and `python -m heddle.autotune` runs cleanly)
    if name in ("autotune", "bench"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'heddle' has no attribute {name!r}")

known_targets = _C.known_targets
target_info = _C.target_info
pass_names = _C.pass_names

__all__ = [
    "Fusion", "Tensor", "Kernel", "matmul", "ops", "simulate", "interpret", "verify", "autotune", "bench",
    "HeddleError", "ScheduleError", "InputError", "CompileError", "RuntimeUnavailable",
    "nvrtc_available", "gpu_available", "known_targets", "target_info", "pass_names",
]
