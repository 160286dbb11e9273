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

The package has three layers, imports running one way (docs/architecture.md, "The Python package"):
heddle.core (definition, kernels, launch, checks), heddle.tuning (autotune, bench) and heddle.pytorch
(custom ops, heddle.matmul, autograd, the torch.compile backend) above it. The backend and the tuning
layer load on first use. The flat module names of earlier releases (heddle.dynamo, heddle.autotune,
heddle.api, ...) still import: they name the modules listed in _MOVED.
"""
import importlib
import importlib.abc
import importlib.util
import sys

from . import _C
from .core import ops, verify
from .core.errors import CompileError, DriverError, HeddleError, InputError, RuntimeUnavailable, ScheduleError
from .core.fusion import Fusion, Tensor
from .core.interpret import interpret
from .core.kernel import Kernel
from .core.runtime import ensure_search_dirs, gpu_available, nvrtc_available
from .core.verify import simulate
from .core.version import __version__  # noqa: F401  (public: heddle.__version__)
from .pytorch.matmul import matmul
from .pytorch.grouped import grouped_mm
from .pytorch.grouped_gated import grouped_mm_gated
from .pytorch.grouped_masked import grouped_mm_masked
from .pytorch.scaled_mm import scaled_mm

ensure_search_dirs()  # let the C++ loader find NVRTC in the nvidia-* wheels

# Where the modules of the flat layout went: `import heddle.dynamo` and `heddle.autotune.tune(...)`
# keep working and give the module itself (not a copy), loaded when first named.
_MOVED = {
    "api": "heddle.pytorch.matmul", "dynamo": "heddle.pytorch.dynamo", "dynamo_fuse": "heddle.pytorch.dynamo_fuse",
    "dynamo_autograd": "heddle.pytorch.autograd", "autotune": "heddle.tuning.autotune",
    "autotune_space": "heddle.tuning.space", "bench": "heddle.tuning.bench", "dump": "heddle.core.dump",
    "errors": "heddle.core.errors", "fusion": "heddle.core.fusion", "inputs": "heddle.core.inputs",
    "interpret": "heddle.core.interpret", "kernel": "heddle.core.kernel", "ops": "heddle.core.ops",
    "reference": "heddle.core.reference", "runtime": "heddle.core.runtime", "tma": "heddle.core.tma",
    "verify": "heddle.core.verify",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import heddle.<old name>` of a module not loaded yet (the backend, tuning) loads it under its
    own name and binds it under the old one."""

    def find_spec(self, fullname, path=None, target=None):
        short = fullname[len("heddle."):] if fullname.startswith("heddle.") else None
        return importlib.util.spec_from_loader(fullname, self) if short in _MOVED else None

    def create_module(self, spec):
        module = importlib.import_module(_MOVED[spec.name[len("heddle."):]])
        spec.loader_state = module.__spec__  # the import machinery sets the alias's spec on the module next
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


for _old, _new in _MOVED.items():  # already loaded: bind the old name now (heddle.interpret stays the function)
    if _new in sys.modules:
        sys.modules[f"heddle.{_old}"] = sys.modules[_new]
sys.meta_path.append(_MovedModules())


def __getattr__(name):
    # heddle.autotune, heddle.dynamo, ...: the moved modules, loaded on first use
    if name in _MOVED:
        return importlib.import_module(f"heddle.{name}")
    raise AttributeError(f"module 'heddle' has no attribute {name!r}")


known_targets = _C.known_targets
target_info = _C.target_info
pass_names = _C.pass_names

__all__ = [
    "Fusion", "Tensor", "Kernel", "matmul", "grouped_mm", "grouped_mm_gated", "grouped_mm_masked",
    "scaled_mm", "ops", "simulate", "interpret", "verify",
    "autotune", "bench",
    "HeddleError", "ScheduleError", "InputError", "CompileError", "DriverError", "RuntimeUnavailable",
    "nvrtc_available", "gpu_available", "known_targets", "target_info", "pass_names",
]
