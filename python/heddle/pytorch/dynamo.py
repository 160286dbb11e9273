"""heddle as a torch.compile backend.

    model = torch.compile(model, backend="heddle")                       # fallback: inductor
    model = torch.compile(model, backend="heddle", options={"fallback": "eager"})
    print(heddle.dynamo.explain(model, x))                                # what was fused, and why not

The backend is registered through the `torch_dynamo_backends` entry point (pyproject.toml), so
`backend="heddle"` resolves after `pip install` without importing heddle. It runs aot_autograd with
inductor's decompositions and partitioner (minus the ops heddle_fuse needs whole), rewrites each
forward / backward / inference graph with heddle.pytorch.dynamo_fuse.fuse (matmul + epilogue chains become
heddle custom ops), and hands the rewritten graph to inductor (default) or runs it eagerly.
With inductor, a new process replays an earlier one's compile of the same graph through torch's
AOTAutograd and FX graph caches, under heddle's own key (heddle/pytorch/dynamo_cache.py; docs/torch.md, "Caching").

Options (torch.compile(..., options={...}) or heddle_backend(gm, inputs, key=value)):
  fallback  "inductor" (default) | "eager": who runs everything heddle does not fuse
  fuse      True (default) | False: False keeps the pipeline but fuses nothing (for A/B checks)
  groups    True (default) | False: False forms no matmul groups (gated pairs, merged q / k / v): every matmul
            its own heddle op. True forms those the device's target lowers well (docs/torch.md)
  any other key is an inductor config option (e.g. "max_autotune": True) and needs fallback inductor.
mode= ("reduce-overhead", "max-autotune", ...) is passed on to inductor; "reduce-overhead" wraps the
graph, heddle ops included, in CUDA graphs.
"""
from __future__ import annotations

import functools
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch

from ..core import torch_compat as compat
from ..core.dump import dump
from . import dynamo_cache
from .dynamo_fuse import WITHHELD, _graph_counter, decompose_leftovers, fuse
from .dynamo_report import GraphReport

__all__ = ["heddle_backend", "explain", "Explanation", "reports", "stats", "reset_stats"]

_HEDDLE_KEYS = ("fallback", "fuse", "groups")


@dataclass
class Options:
    fallback: str = "inductor"
    fuse: bool = True
    groups: bool = True
    inductor: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Optional[dict], kwargs: dict) -> "Options":
        raw = dict(options or {})
        raw.update(kwargs)
        o = cls()
        o.fallback = raw.pop("fallback", "inductor")
        if o.fallback not in ("inductor", "eager"):
            raise ValueError(f"heddle backend: fallback={o.fallback!r}; use 'inductor' or 'eager'")
        o.fuse = bool(raw.pop("fuse", True))
        o.groups = bool(raw.pop("groups", True))
        if raw:
            if o.fallback != "inductor":
                raise ValueError(f"heddle backend: unknown option(s) {sorted(raw)}; heddle's options are "
                                 f"{', '.join(_HEDDLE_KEYS)} (other keys are inductor options and need "
                                 "fallback='inductor')")
            bad = [k for k in raw if not compat.inductor_config_has(k)]
            if bad:
                raise ValueError(f"heddle backend: unknown option(s) {sorted(bad)}: neither heddle's "
                                 f"({', '.join(_HEDDLE_KEYS)}) nor torch._inductor.config keys")
            o.inductor = raw
        return o


# --------------------------------------------------------------------------------------------------
# bookkeeping: reports and counters
# --------------------------------------------------------------------------------------------------
_lock = threading.Lock()
reports: List[GraphReport] = []          # every graph heddle rewrote in this process (most recent last)
stats: Dict[str, int] = {}


def reset_stats() -> None:
    """Zero the counters and forget the reports (heddle's op registry is left alone)."""
    with _lock:
        reports.clear()
        stats.clear()
        stats.update(graphs=0, aot_graphs=0, heddle_ops=0, matmuls_left=0, cache_hits=0, cache_misses=0)


reset_stats()
_collectors: List[List[GraphReport]] = []   # explain() listens here


def _record(report: GraphReport) -> None:
    with _lock:
        reports.append(report)
        del reports[:-256]
        stats["aot_graphs"] += 1
        stats["heddle_ops"] += len(report.groups)
        stats["matmuls_left"] += len(report.unfused_matmuls)
        for c in _collectors:
            c.append(report)
    dump("partition", lambda: str(report))


def _rewrite(gm, kind: str, opts: Options) -> GraphReport:
    report = fuse(gm, kind, enabled=opts.fuse, groups=opts.groups)
    _record(report)
    return report


def _recompile_warning() -> None:
    """Dynamo runs a frame eagerly (without heddle) once it was compiled recompile_limit times; say so
    before it happens, not only in dynamo's log."""
    try:
        cid = compat.current_compile_id()
        limit = compat.recompile_limit()
    except Exception:
        return
    if cid is None:
        return
    frame_id, frame_compile_id, compiled_autograd_id = cid
    if frame_compile_id is None or compiled_autograd_id is not None:
        return
    n = frame_compile_id + 1
    if n >= limit:
        warnings.warn(
            f"heddle: frame {frame_id} is being compiled for the {n}th time, which reaches "
            f"torch._dynamo.config.recompile_limit={limit}: on the next guard failure dynamo runs this frame "
            "in eager mode, without heddle. Mark varying sizes dynamic (torch._dynamo.mark_dynamic, or "
            "torch.compile(dynamic=True)), or raise the limit.", RuntimeWarning, stacklevel=2)


# --------------------------------------------------------------------------------------------------
# the backend
# --------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _decompositions():
    """inductor's decomposition table minus the ops heddle matches whole (see dynamo_fuse.WITHHELD)."""
    full = compat.inductor_pieces().select_decomp_table()
    return full, {k: v for k, v in full.items() if k not in WITHHELD}


def heddle_backend(gm: torch.fx.GraphModule, example_inputs, *, mode: Optional[str] = None,
                   options: Optional[dict] = None, **kwargs):
    """The torch.compile backend (backend="heddle"). See the module docstring for options."""
    opts = Options.parse(options, kwargs)
    with _lock:
        stats["graphs"] += 1
    _recompile_warning()
    if opts.fallback == "eager":
        return _compile_eager(gm, example_inputs, opts, mode)
    return _compile_inductor(gm, example_inputs, opts, mode)


def _compile_eager(gm, example_inputs, opts: Options, mode):
    aot = compat.aot_pieces()
    if mode not in (None, "default"):
        warnings.warn(f"heddle backend: mode={mode!r} is ignored with fallback='eager' (CUDA graphs and "
                      "autotuning come from inductor; use the default fallback)", RuntimeWarning, stacklevel=3)
    _, table = _decompositions()

    def compiler(kind):
        def compile_graph(g, inputs):
            _rewrite(g, kind, opts)
            return aot.make_boxed_func(g.forward)
        return compile_graph

    with compat.functorch_config_patch(unlift_effect_tokens=True):
        return aot.aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                                inference_compiler=compiler("inference"), decompositions=table,
                                partition_fn=functools.partial(aot.min_cut_rematerialization_partition,
                                                               compiler="inductor"),
                                keep_inference_input_mutations=True)(gm, example_inputs)


def _compile_inductor(gm, example_inputs, opts: Options, mode):
    ind = compat.inductor_pieces()
    full, table = _decompositions()
    patches: Dict[str, Any] = {}
    if mode not in (None, "default"):
        patches.update(ind.list_mode_options(mode))
    patches.update(opts.inductor)
    key = dynamo_cache.graph_key(gm, example_inputs, opts, mode)
    done: List[GraphReport] = []

    def inner_compile(g, inputs, **kw):
        done.append(_rewrite(g, compat.inner_compile_kind(kw), opts))
        dynamo_cache.save_reports(key, done)   # what a later process replaying this compile reports
        decompose_leftovers(g, full)
        # From here on the graph is what inductor would have traced with its own table (torch_compat says
        # how each torch release passes it)
        return ind.compile_fx_inner(g, inputs, **compat.inner_compile_kwargs(kw, ind.select_decomp_table))

    def compile_(aot_cache: bool):
        # torch's AOTAutograd cache replays an earlier process's compile (the rewritten graphs, through
        # inductor's FX graph cache) without running the rewrite: its heddle ops register from their names
        # (heddle/pytorch/resolver.py). heddle's key goes into torch's cache key (cache_key_tag), so heddle's
        # entries and inductor's never mix (heddle/pytorch/dynamo_cache.py).
        # (torch._functorch.config.enable_autograd_cache stays as the user set it; off without the tag)
        tag = dynamo_cache.tag_patch(key) if aot_cache else None
        with (tag if tag is not None else compat.functorch_config_patch(enable_autograd_cache=False)):
            return ind.compile_fx(gm, example_inputs, inner_compile=inner_compile,
                                  config_patches=patches or None, decompositions=table)

    hits = dynamo_cache.aot_cache_hits()
    compiled = compile_(aot_cache=True)
    if dynamo_cache.aot_cache_hits() == hits:
        with _lock:
            stats["cache_misses"] += 1
        return compiled
    saved = dynamo_cache.load_reports(key)
    if saved is None:
        # replayed, but heddle's record of that compile is gone or corrupt: a miss. Compile again with the
        # AOTAutograd cache off, so the rewrite runs and its reports are recorded (and saved again).
        with _lock:
            stats["cache_misses"] += 1
        return compile_(aot_cache=False)
    with _lock:
        stats["cache_hits"] += 1
    for r in saved:
        _graph_counter[0] += 1
        r.graph = _graph_counter[0]   # the index of the graph in this process, as for a rewritten one
        _record(r)
    return compiled


# --------------------------------------------------------------------------------------------------
# explain
# --------------------------------------------------------------------------------------------------
class Explanation:
    """What heddle's backend did with a model: one GraphReport per aot graph (forward, backward,
    inference), each listing the heddle ops (groups) and why every other matmul / epilogue op was not
    fused. str() prints it."""

    def __init__(self, graphs: List[GraphReport], dynamo_graphs: int):
        self.graphs = graphs
        self.dynamo_graphs = dynamo_graphs

    @property
    def groups(self):
        return [g for r in self.graphs for g in r.groups]

    @property
    def heddle_ops(self) -> List[str]:
        return [g.op for g in self.groups]

    def graph(self, kind: str) -> GraphReport:
        found = [r for r in self.graphs if r.kind == kind]
        if not found:
            raise KeyError(f"no {kind} graph (have: {', '.join(r.kind for r in self.graphs) or 'none'})")
        return found[0]

    def __str__(self) -> str:
        head = (f"heddle: {self.dynamo_graphs} dynamo graph(s), {len(self.graphs)} aot graph(s), "
                f"{len(self.groups)} heddle op(s)\n")
        return head + "".join(str(r) for r in self.graphs)

    __repr__ = __str__


def explain(model, *inputs, backward: bool = False, verbose: bool = False, **options) -> Explanation:
    """Compile `model` with the heddle backend, run it on `inputs` and report what was fused.

    backward=True also runs the backward pass (sum of the floating outputs), so the backward graph is
    compiled and reported; the .grad fields of parameters and inputs are restored afterwards. Options
    are the backend's: fallback="eager" explains faster and traces with the same decompositions and
    partitioner, so it makes the same decisions unless one of inductor's own pre-grad / joint-graph
    pattern passes rewrites the graph first.
    Like torch._dynamo.explain, this resets dynamo's caches before and after.
    """
    collected: List[GraphReport] = []
    dyn = [0]

    def backend(gm, example_inputs, **kw):
        dyn[0] += 1
        return heddle_backend(gm, example_inputs, **kw, **options)

    compat.dynamo_reset()
    params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    params += [t for t in compat.tree_leaves(inputs) if isinstance(t, torch.Tensor) and t.is_leaf]
    saved = [p.grad for p in params]
    with _lock:
        _collectors.append(collected)
    try:
        compiled = torch.compile(model, backend=backend)
        if backward:
            out = compiled(*inputs)
            leaves = [t for t in compat.tree_leaves(out)
                      if isinstance(t, torch.Tensor) and t.requires_grad]
            if leaves:
                torch.autograd.backward([t.float().sum() for t in leaves])
        else:
            with torch.no_grad():
                compiled(*inputs)
    finally:
        with _lock:
            _collectors.remove(collected)
        for p, g in zip(params, saved):
            p.grad = g
        compat.dynamo_reset()
    result = Explanation(collected, dyn[0])
    if verbose:
        print(result, end="")
    return result
