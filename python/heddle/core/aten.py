"""heddle._C_aten, the optional module that lets the eager launch tables (PlanTable, CallTable) read tensors
and allocate outputs through ATen (docs/runtime.md, "Eager calls in one C++ call").

It is built against the torch the build's Python imported and is used only under that same torch (its
torch.__version__ string, CUDA or CPU tag included): another torch may lay its tensors out otherwise. Without
it, or with HEDDLE_ATEN=0, the tables read tensors through their Python attributes: the same keys, the same
plans, about 2 us more per call.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from . import torch_compat


def access() -> Optional[Any]:
    """heddle._C_aten.access (a capsule _C's tables take as aten=) when the module is there, was built against
    the running torch and HEDDLE_ATEN is not 0; else None."""
    return _load()[0]


def status() -> str:
    """Why access() gives what it gives, in words (tests, benchmarks; a user asking why calls are slower)."""
    return _load()[1]


def _load():
    if os.environ.get("HEDDLE_ATEN", "1") == "0":
        return None, "off (HEDDLE_ATEN=0)"
    try:
        from .. import _C_aten
    except ImportError as e:
        return None, f"not built or not loadable ({e})"
    running = torch_compat.version_string()
    if _C_aten.torch_version != running:
        return None, (f"built against torch {_C_aten.torch_version}, running torch {running}: not used "
                      "(rebuild heddle against this torch)")
    return _C_aten.access, f"on (torch {running})"
