"""The torch internals heddle uses, in one place (issue 27: the GPU machine runs torch 2.11, CI torch 2.13,
and private torch APIs move between releases).

Every private torch name heddle touches (torch._*, torch.utils._*) is reached through a function here; no
other heddle module names one (tests/torch/test_torch_compat.py checks the source). Each function says which
releases its call was checked against (their sources: 2.11.0 and 2.13.0) and what it does where the
internal is missing, so a torch that moves one fails here, by name, or falls back as written. The tests
run each function on the installed torch and its fallback with the internal taken away; the GPU window
runs the torch.compile backend tests on 2.11 (docs/torch.md, "torch versions").

Nothing here imports torch._dynamo or inductor at import time (`import heddle` must not pay for them).
"""
from __future__ import annotations

import types
from typing import Any, Callable, Optional, Tuple

CHECKED = ("2.11", "2.13")  # torch releases whose sources every call below was read against


def torch_version() -> Tuple[int, int]:
    """(major, minor) of the installed torch ('2.13.0+cpu' -> (2, 13))."""
    import torch
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def version_string() -> str:
    """torch.__version__ as a plain str, local tag included ('2.13.0+cpu'; 2.11, 2.13): heddle._C_aten is used
    only under the torch whose string it was built with (heddle.core.aten)."""
    import torch
    return str(torch.__version__)


# --- torch._C: the eager launch path's fast accessors --------------------------------------------

def cuda_current_device() -> Optional[Callable[[], int]]:
    """torch._C._cuda_getDevice (CUDA builds of 2.11 and 2.13: torch.cuda.current_device without its Python
    layers); None on a CPU build or where it is gone: callers use torch.cuda.current_device."""
    import torch
    return getattr(torch._C, "_cuda_getDevice", None)


def cuda_raw_stream() -> Optional[Callable[[int], int]]:
    """torch._C._cuda_getCurrentRawStream(device index) -> the current CUstream as an int (CUDA builds of 2.11
    and 2.13); None where absent: callers use torch.cuda.current_stream(i).cuda_stream."""
    import torch
    return getattr(torch._C, "_cuda_getCurrentRawStream", None)


MODE_QUERY_NAMES = ("_len_torch_dispatch_stack", "_is_torch_function_mode_enabled", "_are_functorch_transforms_active")


def mode_queries() -> Tuple[Callable[[], Any], ...]:
    """torch._C's queries for dispatch modes, function modes and functorch transforms, each true while one is
    active (2.11, 2.13). A torch without any of them gets three that are always true: every heddle.matmul
    call then takes the custom op (correct, slower), never the planned eager path."""
    import torch
    queries = tuple(getattr(torch._C, n, None) for n in MODE_QUERY_NAMES)
    return (lambda: True,) * len(MODE_QUERY_NAMES) if None in queries else queries


# --- torch.ops ---------------------------------------------------------------------------------

def custom_op_def_type() -> type:
    """torch._library.custom_ops.CustomOpDef (2.11, 2.13): the type torch.library.custom_op returns; Kernel.op
    subclasses it to name a missing input itself."""
    import torch._library.custom_ops
    return torch._library.custom_ops.CustomOpDef


def op_overload_type() -> type:
    """torch._ops.OpOverload (2.11, 2.13): the type of a graph node's target that is an op overload."""
    import torch
    return torch._ops.OpOverload


def op_namespace_base() -> type:
    """torch._ops._OpNamespace (2.11, 2.13: constructed with the namespace's name; __getattr__ resolves ops),
    which heddle's resolver subclasses so torch.ops.heddle registers ops by name on first lookup."""
    import torch
    return torch._ops._OpNamespace


def ops_namespace(name: str):
    """The torch.ops namespace object `name` already created, or None (torch.ops.__dict__, 2.11, 2.13)."""
    import torch
    return torch.ops.__dict__.get(name)


def install_ops_namespace(name: str, namespace) -> None:
    """Make `namespace` torch.ops.<name> and list it in dir(torch.ops) (torch.ops._dir, a list in 2.11 and
    2.13; without it the attribute still works and dir() misses the name)."""
    import torch
    setattr(torch.ops, name, namespace)
    listed = getattr(torch.ops, "_dir", None)
    if isinstance(listed, list) and name not in listed:
        listed.append(name)


# --- pytree, modes, symbolic shapes, tracing (torch.utils._*, torch.fx, torch._guards) -----------

def tree_leaves(tree) -> list:
    """torch.utils._pytree.tree_leaves (2.11, 2.13)."""
    import torch.utils._pytree as pytree
    return pytree.tree_leaves(tree)


def tree_flatten(tree):
    """torch.utils._pytree.tree_flatten (2.11, 2.13): (leaves, spec); tree_unflatten(leaves, spec) inverts it."""
    import torch.utils._pytree as pytree
    return pytree.tree_flatten(tree)


def tree_unflatten(leaves, spec):
    import torch.utils._pytree as pytree
    return pytree.tree_unflatten(leaves, spec)


def disable_current_modes():
    """torch.utils._python_dispatch._disable_current_modes() (2.11, 2.13): a context in which the active
    dispatch modes (dynamo's fake mode) are off, so tensors compute real numbers."""
    from torch.utils._python_dispatch import _disable_current_modes
    return _disable_current_modes()


def detect_fake_mode(values):
    """torch._guards.detect_fake_mode (2.11, 2.13): the FakeTensorMode of fake `values`, or None."""
    from torch._guards import detect_fake_mode as detect
    return detect(values)


def statically_known_true(expr) -> bool:
    """torch.fx.experimental.symbolic_shapes.statically_known_true (2.11, 2.13): true without adding a guard."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true as known
    return bool(known(expr))


def is_concrete_int(x) -> bool:
    """torch.fx.experimental.symbolic_shapes.is_concrete_int (2.11, 2.13)."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int as concrete
    return bool(concrete(x))


def make_fx(fn, **kw):
    """torch.fx.experimental.proxy_tensor.make_fx (2.11, 2.13)."""
    from torch.fx.experimental.proxy_tensor import make_fx as trace
    return trace(fn, **kw)


# --- dynamo ------------------------------------------------------------------------------------

def dynamo_reset() -> None:
    """torch.compiler.reset (public in 2.11 and 2.13); torch._dynamo.reset where it is missing."""
    import torch
    reset = getattr(getattr(torch, "compiler", None), "reset", None)
    if reset is None:
        import torch._dynamo
        reset = torch._dynamo.reset
    reset()


def aot_autograd_cache_hits() -> int:
    """This process's count of AOTAutograd cache hits: torch._dynamo.utils.counters["aot_autograd"]
    ["autograd_cache_hit"] (2.11, 2.13); 0 where the counter is missing."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return int(counters.get("aot_autograd", {}).get("autograd_cache_hit", 0))


def recompile_limit(config=None) -> int:
    """How many times dynamo compiles one frame before running it eagerly: torch._dynamo.config.recompile_limit
    (2.11, 2.13), else its older name cache_size_limit (kept as an alias in both), else dynamo's default 8.
    config: the config module to read (default torch._dynamo.config; tests pass a stand-in)."""
    if config is None:
        import torch._dynamo
        config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return 8


def current_compile_id(context=None) -> Optional[Tuple[Any, Any, Any]]:
    """(frame_id, frame_compile_id, compiled_autograd_id) of the frame dynamo is compiling, from
    torch._guards.CompileContext.current_compile_id() (2.11, 2.13: a CompileId with those fields); None outside
    a compile or where the call or a field is missing. context: CompileContext (tests pass a stand-in)."""
    if context is None:
        from torch._guards import CompileContext as context
    current = getattr(context, "current_compile_id", None)
    cid = current() if current is not None else None
    if cid is None:
        return None
    try:
        return cid.frame_id, cid.frame_compile_id, cid.compiled_autograd_id
    except AttributeError:
        return None


# --- aot_autograd, functorch config, inductor -------------------------------------------------

def aot_pieces() -> types.SimpleNamespace:
    """aot_autograd (torch._dynamo.backends.common), make_boxed_func (torch._functorch.aot_autograd) and
    min_cut_rematerialization_partition (torch._functorch.partitioners): same names and keyword arguments
    (fw_compiler, bw_compiler, inference_compiler, decompositions, partition_fn,
    keep_inference_input_mutations) in 2.11 and 2.13."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    return types.SimpleNamespace(aot_autograd=aot_autograd, make_boxed_func=make_boxed_func,
                                 min_cut_rematerialization_partition=min_cut_rematerialization_partition)


def functorch_config_patch(config=None, **options):
    """torch._functorch.config.patch(**options) with the options this torch knows (2.11 and 2.13 know
    unlift_effect_tokens and enable_autograd_cache); an unknown option is dropped: the feature it would set
    does not exist there. config: the config module (tests pass a stand-in)."""
    if config is None:
        from torch._functorch import config
    return config.patch(**{k: v for k, v in options.items() if hasattr(config, k)})


def inductor_config_has(key: str) -> bool:
    """Whether torch._inductor.config has option `key` (the backend passes unknown options on to inductor)."""
    import torch._inductor.config as icfg
    return hasattr(icfg, key)


def inductor_pieces() -> types.SimpleNamespace:
    """compile_fx, compile_fx_inner (torch._inductor.compile_fx), list_mode_options (torch._inductor) and
    select_decomp_table (torch._inductor.decomposition): compile_fx(gm, inputs, inner_compile=,
    config_patches=, decompositions=) in 2.11 and 2.13."""
    from torch._inductor import list_mode_options
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    from torch._inductor.decomposition import select_decomp_table
    return types.SimpleNamespace(compile_fx=compile_fx, compile_fx_inner=compile_fx_inner,
                                 list_mode_options=list_mode_options, select_decomp_table=select_decomp_table)


def inner_compile_kind(kw: dict) -> str:
    """"backward", "inference" or "forward" from inductor's inner_compile keywords (is_backward and
    is_inference in 2.11 and 2.13; missing ones read as False)."""
    return "backward" if kw.get("is_backward") else ("inference" if kw.get("is_inference") else "forward")


def inner_compile_kwargs(kw: dict, full_table_fn: Callable[[], dict]) -> dict:
    """inductor's inner_compile keywords with its lowering decompositions set to inductor's full table.
    2.13 passes get_decomp_fn (returning the table heddle gave compile_fx, which withholds ops heddle
    matches whole): replaced by full_table_fn (the module-level select_decomp_table, which also keeps the
    FX graph cache key picklable). 2.11 passes none: its lowering takes select_decomp_table() itself, so
    nothing is added."""
    if "get_decomp_fn" in kw:
        kw = dict(kw, get_decomp_fn=full_table_fn)
    return kw


__all__ = [
    "CHECKED", "torch_version", "cuda_current_device", "cuda_raw_stream", "mode_queries", "op_overload_type",
    "op_namespace_base", "ops_namespace", "install_ops_namespace", "tree_leaves", "tree_flatten", "tree_unflatten",
    "disable_current_modes", "detect_fake_mode", "statically_known_true", "is_concrete_int", "make_fx",
    "dynamo_reset", "recompile_limit", "current_compile_id", "aot_pieces", "functorch_config_patch",
    "inductor_config_has", "inductor_pieces", "inner_compile_kind", "inner_compile_kwargs",
]
