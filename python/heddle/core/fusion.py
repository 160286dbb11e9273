"""Fusion definition and scheduling: a thin Python face over the C++ IR (heddle._C).

    fd = heddle.Fusion()
    a = fd.input("a", "bf16", ["M", 4096])
    b = fd.input("b", "bf16", [4096, 4096])
    bias = fd.input("bias", "bf16", [4096])
    acc = fd.matmul(a, b)                      # f32 accumulator, layouts via trans_a / trans_b
    fd.output(heddle.ops.gelu(acc + bias).to("bf16"))

Every rule (shapes, broadcast, schedule validity) is checked in C++ and raised as
heddle.ScheduleError naming the tensor, axis or option.
"""
from __future__ import annotations

import operator
from typing import Dict, Iterable, List, Optional, Sequence, Union

from .. import _C

Scalar = Union[int, float]


class Tensor:
    """A tensor of a Fusion. Arithmetic builds epilogue ops; the scheduling methods set attributes."""

    __slots__ = ("_tv", "_fusion")

    def __init__(self, tv: "_C.TensorView", fusion: "Fusion"):
        self._tv = tv
        self._fusion = fusion

    # --- description -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._tv.name

    @property
    def dtype(self) -> str:
        return self._tv.dtype

    @property
    def shape(self) -> list:
        return self._tv.shape

    @property
    def per_expert(self) -> bool:
        """An [E, N] input a grouped matmul's epilogue reads at each row's expert (Fusion.per_expert)."""
        return self._tv.per_expert

    @property
    def axes(self) -> List[str]:
        """Loop axes after split/reorder (the matmul tensor only)."""
        return self._tv.axes

    @property
    def domain(self) -> str:
        return self._tv.domain

    def __repr__(self) -> str:
        return repr(self._tv)

    # --- epilogue arithmetic -----------------------------------------------------------------
    def _bin(self, op: str, other, left: bool = False) -> "Tensor":
        f = self._fusion
        if isinstance(other, Tensor):
            a, b = (other, self) if left else (self, other)
            return f._wrap(f._f.binary(op, a._tv, b._tv))
        if isinstance(other, (int, float)):
            return f._wrap(f._f.binary_scalar(op, self._tv, float(other), left))
        raise TypeError(f"heddle: cannot {op} tensor {self.name} and {type(other).__name__}; "
                        "use a heddle tensor or a Python number")

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, left=True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, left=True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, left=True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, left=True)
    def __neg__(self): return self._fusion._wrap(self._fusion._f.unary("neg", self._tv))

    def to(self, dtype: str) -> "Tensor":
        """Cast (rounds through `dtype`)."""
        return self._fusion._wrap(self._fusion._f.cast(self._tv, _dtype_name(dtype)))

    # --- scheduling --------------------------------------------------------------------------
    def split(self, axis: str, factor: int) -> "Tensor":
        self._tv.split(_str(axis, "split: axis"), _int(factor, f"split({axis!r}): factor"))
        return self

    def reorder(self, order: Sequence[str]) -> "Tensor":
        if isinstance(order, str):
            raise _C.ScheduleError(f"reorder: order must be a list of axis names, got the string {order!r}")
        self._tv.reorder([_str(a, "reorder: axis") for a in order])
        return self

    def parallelize(self, axis: str, parallel: str) -> "Tensor":
        """Bind an axis: 'BIDx', 'BIDy', 'BIDz', 'warp', 'TIDx', 'serial', 'unroll'."""
        self._tv.parallelize(_str(axis, "parallelize: axis"), _str(parallel, f"parallelize({axis!r}): parallel"))
        return self

    def circular_buffer(self, stages: int, prefetch: int = -1, war: str = "mbarrier") -> "Tensor":
        """Buffer this shared-memory cache over `stages` slots with `prefetch` loads ahead
        (negative prefetch means stages + prefetch; -1 keeps stages-1 loads in flight). war: how a
        TMA ring without roles releases slots: 'mbarrier' (empty barriers) or 'block_sync'."""
        self._tv.circular_buffer(_int(stages, "circular_buffer: stages"), _int(prefetch, "circular_buffer: prefetch"),
                                 _str(war, "circular_buffer: war"))
        return self

    def warp_specialize(self, roles: Dict[str, Union[int, dict]]) -> "Tensor":
        """roles: {"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 2, "registers": 232}}."""
        self._tv.warp_specialize(_roles(roles))
        return self

    def split_k(self, splits: int) -> "Tensor":
        """Share each output tile's k loop among `splits` CTAs (blockIdx.z); their partial tiles are
        reduced in a fixed order through a global workspace, then the epilogue runs once (docs/hopper.md)."""
        self._tv.split_k(_int(splits, "split_k: splits"))
        return self

    def stream_k(self, ctas: int) -> "Tensor":
        """Stream-K: a persistent grid of at most `ctas` CTAs (the SM count) shares the tiles x k-tiles
        evenly; a tile split across CTAs is reduced in CTA order through a global workspace behind grid
        flags, the epilogue applied once by the CTA that finishes the tile (docs/hopper.md "Stream-K")."""
        self._tv.stream_k(_int(ctas, "stream_k: ctas"))
        return self

    def promotion(self, k: int = 128) -> "Tensor":
        """A block-scaled matmul: accumulate `k` elements of K (16, 32, 64 or 128, a divisor of the
        128-wide scale block and a multiple of the wgmma K) in the tensor core before each promotion into
        the f32 accumulators; 128 (one promotion per scale block) by default (docs/fp8.md)."""
        self._tv.promotion(_int(k, "promotion: k"))
        return self

    @property
    def promotion_k(self) -> int:
        """promotion(k)'s k (128 when unset)."""
        return self._tv.promotion_k

    def cluster(self, size: int, along: str = "m") -> "Tensor":
        """Thread-block clusters of `size` (2) CTAs computing neighbouring tiles along "m" (sharing the B
        tile) or "n" (sharing the A tile): each CTA loads half of the shared tile by TMA and multicasts it to
        both (sm_90a warp-specialized cooperative kernels; docs/hopper.md "Clusters of 2 with TMA multicast").
        size 1 turns it off."""
        self._tv.cluster(_int(size, "cluster: size"), _str(along, "cluster: along"))
        return self

    def epilogue_store(self, kind: str) -> "Tensor":
        """How an sm_90a warp-specialized kernel writes its output tile: "tma" (staged through shared
        memory with stmatrix, written by TMA stores) or "direct" (per-thread global stores); docs/hopper.md."""
        self._tv.epilogue_store(kind)
        return self

    @property
    def circular(self):
        """(stages, prefetch) after normalisation; (0, 0) when not circular-buffered."""
        return self._tv.circular


_I32 = (-2 ** 31, 2 ** 31 - 1)
_I64 = (-2 ** 63, 2 ** 63 - 1)


def _int(v, what: str, bounds=_I32) -> int:
    """A Python int (not a bool, float or None) that fits the C++ parameter; else a ScheduleError naming it."""
    try:
        if isinstance(v, bool):
            raise TypeError
        v = operator.index(v)  # ints and integer-likes (numpy ints); never floats, None or strings
    except TypeError:
        raise _C.ScheduleError(f"{what} must be an int, got {v!r} ({type(v).__name__})") from None
    if not bounds[0] <= v <= bounds[1]:
        raise _C.ScheduleError(f"{what} = {v} is out of range (it must lie in [{bounds[0]}, {bounds[1]}])")
    return v


def _str(v, what: str) -> str:
    if not isinstance(v, str):
        raise _C.ScheduleError(f"{what} must be a str, got {v!r} ({type(v).__name__})")
    return v


def _bool(v, what: str) -> bool:
    if v not in (True, False) or isinstance(v, (str, float)):
        raise _C.ScheduleError(f"{what} must be True or False, got {v!r} ({type(v).__name__})")
    return bool(v)


def _tensor(fusion: "Fusion", t, what: str) -> "_C.TensorView":
    if not isinstance(t, Tensor):
        raise _C.ScheduleError(f"{what} must be a tensor of this fusion (from fd.input or an op on one), got "
                               f"{type(t).__name__}")
    return t._tv


def _roles(roles) -> dict:
    """warp_specialize's roles with every value checked: {name: warps} or {name: {option: int}}."""
    if not isinstance(roles, dict):
        raise _C.ScheduleError(f"warp_specialize: roles must be a dict {{name: warps or options}}, got "
                               f"{type(roles).__name__}")
    out = {}
    for name, v in roles.items():
        _str(name, "warp_specialize: a role name")
        if isinstance(v, dict):
            out[name] = {_str(k, f"warp_specialize: an option of role '{name}'"):
                         _int(x, f"warp_specialize: role '{name}' option '{k}'") for k, x in v.items()}
        else:
            out[name] = _int(v, f"warp_specialize: role '{name}' (a warp count or a dict of options)")
    return out


def _shape(name: str, shape) -> list:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise _C.ScheduleError(f"input '{name}': shape must be a list of sizes, got {shape!r}")
    out = []
    for ax, d in enumerate(shape):
        out.append(d if isinstance(d, str) else
                   _int(d, f"input '{name}' axis {ax}: size (an int or a symbol name such as 'M')", _I64))
    return out


def _dtype_name(dt) -> str:
    s = str(dt)
    return s.replace("torch.", "")


class Fusion:
    """A computation to fuse: one matmul with its pointwise epilogue."""

    def __init__(self):
        self._f = _C.Fusion()
        self._tensors: Dict[str, Tensor] = {}

    def _wrap(self, tv) -> Tensor:
        t = self._tensors.get(tv.name)
        if t is None:
            t = Tensor(tv, self)
            self._tensors[tv.name] = t
        return t

    def input(self, name: str, dtype, shape: Iterable[Union[int, str]]) -> Tensor:
        """An input: dtype 'f16' | 'bf16' | 'f32' (or torch dtypes); sizes are ints or symbols ('M')."""
        _str(name, "input: name")
        return self._wrap(self._f.add_input(name, _dtype_name(dtype), _shape(name, shape)))

    def matmul(self, a: Tensor, b: Tensor, trans_a: bool = False, trans_b: bool = False,
               scale_a: Optional[Tensor] = None, scale_b: Optional[Tensor] = None,
               scales: str = "block128") -> Tensor:
        """a @ b with f32 accumulation. trans_a: `a` is stored [K, M]; trans_b: `b` is stored [N, K].
        scale_a / scale_b (together): DeepGEMM-style block scales, f32 inputs scale_a [M, ceil(K/128)] and
        scale_b [ceil(N/128), ceil(K/128)]: D = sum over k-blocks kb of (A_kb @ B_kb) * scale_a[m, kb] *
        scale_b[n // 128, kb] (docs/fp8.md "Block scales and promotion"). scales="mx32": MXFP8, e4m3 / e5m2
        operands with e8m0 inputs (torch.float8_e8m0fnu) one per row and 32 of K, in torch's blocked layout:
        scale_a [round_up(M, 128), round_up(K/32, 4)], scale_b [round_up(N, 128), round_up(K/32, 4)] (docs/fp8.md
        "MX formats")."""
        if (scale_a is None) != (scale_b is None):
            raise _C.ScheduleError(f"matmul({a.name}, {b.name}): block scales come in pairs; pass both scale_a "
                                   f"and scale_b (block128: [M, ceil(K/128)] and [ceil(N/128), ceil(K/128)]), "
                                   f"or neither")
        mm = self._wrap(self._f.matmul(_tensor(self, a, "matmul: a"), _tensor(self, b, "matmul: b"),
                                       _bool(trans_a, "matmul: trans_a"), _bool(trans_b, "matmul: trans_b")))
        if scale_a is not None:
            self._f.block_scales(mm._tv, _tensor(self, scale_a, "matmul: scale_a"),
                                 _tensor(self, scale_b, "matmul: scale_b"), _str(scales, "matmul: scales"))
        return mm

    def grouped_matmul(self, x: Tensor, w: Tensor, trans_b: bool = False, offsets: str = "offs") -> Tensor:
        """A grouped matmul (mixture of experts; torch._grouped_mm's convention): x [T, K] holds the tokens
        sorted by expert, w [E, K, N] (trans_b: [E, N, K]) one matrix per expert, and the int32 [E] group
        ends, named `offsets`, are a launch argument after the fusion's inputs: rows offs[e-1] .. offs[e] of
        x (offs[-1] = 0) use w[e]. The result is [T, N]; the fusion's only matmul (docs/grouped.md)."""
        return self._wrap(self._f.grouped_matmul(_tensor(self, x, "grouped_matmul: x"),
                                                 _tensor(self, w, "grouped_matmul: w"),
                                                 _bool(trans_b, "grouped_matmul: trans_b"),
                                                 _str(offsets, "grouped_matmul: offsets")))

    def masked_grouped_matmul(self, x: Tensor, w: Tensor, trans_b: bool = False, counts: str = "counts") -> Tensor:
        """A grouped matmul in the masked layout (DeepGEMM's decode layout): x [E, max_tokens, K], w [E, K, N]
        (trans_b: [E, N, K]), and the int32 [E] row counts, named `counts`, a launch argument after the fusion's
        inputs: rows r < counts[e] of x[e] are expert e's tokens, the rest padding. The result is
        [E, max_tokens, N]; padding rows are not stored. The fusion's only matmul (docs/grouped.md)."""
        return self._wrap(self._f.masked_grouped_matmul(_tensor(self, x, "masked_grouped_matmul: x"),
                                                        _tensor(self, w, "masked_grouped_matmul: w"),
                                                        _bool(trans_b, "masked_grouped_matmul: trans_b"),
                                                        _str(counts, "masked_grouped_matmul: counts")))

    def per_expert(self, t: Tensor) -> Tensor:
        """Marks input `t` [E, N] as per expert for the fusion's grouped matmul (a bias per expert): output row
        r reads t[e] for r's expert e; it broadcasts over the rows as [1, N] (docs/grouped.md)."""
        return self._wrap(self._f.per_expert(_tensor(self, t, "per_expert")))

    def output(self, t: Tensor) -> Tensor:
        self._f.add_output(_tensor(self, t, "output"))
        return t

    def cache_after(self, t: Tensor, kind: str = "cp_async") -> Tensor:
        """A shared-memory copy of input `t`, filled with kind 'plain' | 'cp_async' | 'tma_load'. On a
        matmul operand it feeds the MMA; on a bias row [N] of a warp-specialized sm_90a or sm_100a kernel,
        'tma_load' gives it a producer role loading one [bn] slice per tile into a ring
        (circular_buffer(stages), default 2) that the epilogue reads; a residual [M, N] likewise, one
        [bm, bn] tile per output tile (docs/hopper.md, "A TMA-loaded bias or residual"; docs/blackwell.md)."""
        return self._wrap(self._f.cache_after(_tensor(self, t, "cache_after"), _str(kind, "cache_after: kind")))

    def schedule(self) -> Tensor:
        """Start a manual schedule: returns the matmul tensor with root axes [b,] m, n, k."""
        mm = self.matmul_tensor
        self._f.init_schedule(mm._tv)
        return mm

    def auto_schedule(self, target: str = "sm_80", m: int = -1, n: int = -1, k: int = -1,
                      tma: bool = True, sms: int = 0, k_share: str = "auto",
                      epilogue_layout: str = "auto", epilogue_pairs: bool = False) -> "Fusion":
        """The schedule heddle.matmul would pick for `target` (and problem size, when known). tma=False:
        the operands do not meet TMA's rules (docs/hopper.md), so a Hopper target gets cp.async. sms > 0
        (the SM count) with m, n, k known: output tiles filling less than half the SMs get split-K; on the
        cp.async kernels, tiles that do not fill the SMs get split-K or stream-K by a cost model
        (schedule/k_share.cpp) that k_share ("split_k", "stream_k", "none") overrides. epilogue_layout
        (sm_90a roles, docs/scheduling.md): "auto" (ping-pong MMA warpgroups for a fused epilogue,
        cooperative for a plain store), "cooperative", "pingpong" or "epilogue_role". epilogue_pairs: whether
        the kernel will read the bias / residual in pairs (lower / compile with vec_e=2); the default False
        matches compile()'s vec_e=1, with which "auto" keeps a residual on the cooperative layout (the
        ping-pong kernel would spill). Either way "auto" keeps the epilogue's operand registers within the
        MMA warpgroups' budget (schedule/epilogue_layout.h epilogueFits)."""
        self._f.auto_schedule(_str(target, "auto_schedule: target"), _int(m, "auto_schedule: m", _I64),
                              _int(n, "auto_schedule: n", _I64), _int(k, "auto_schedule: k", _I64),
                              _bool(tma, "auto_schedule: tma"), _int(sms, "auto_schedule: sms"),
                              _str(k_share, "auto_schedule: k_share"),
                              _str(epilogue_layout, "auto_schedule: epilogue_layout"),
                              _bool(epilogue_pairs, "auto_schedule: epilogue_pairs"))
        return self

    @property
    def matmul_tensor(self) -> Tensor:
        mm = self._f.find_matmul()
        if mm is None:
            raise _C.ScheduleError("this fusion has no matmul")
        return self._wrap(mm)

    @property
    def inputs(self) -> List[Tensor]:
        return [self._wrap(t) for t in self._f.inputs]

    @property
    def outputs(self) -> List[Tensor]:
        return [self._wrap(t) for t in self._f.outputs]

    def caches_of(self, t: Tensor) -> List[Tensor]:
        return [self._wrap(c) for c in self._f.caches_of(_tensor(self, t, "caches_of"))]

    def exprs(self):
        """The expressions in topological order, as plain tuples (used by the torch reference)."""
        return self._f.exprs()

    def validate(self, target: str = "sm_80", vec_a: int = 8, vec_b: int = 8) -> str:
        """Check the whole schedule against `target` (the first pass of lower): a one-line summary of the
        tiling, or heddle.ScheduleError naming the broken rule."""
        return self._f.validate(_str(target, "validate: target"), _int(vec_a, "validate: vec_a"),
                                _int(vec_b, "validate: vec_b"))

    def lower(self, target: str = "sm_80", vec_a: int = 8, vec_b: int = 8, dump_passes: bool = False,
              vec_e: int = 1):
        """Run the pass list: returns the C++ LoweredKernel (kernel IR, sync plan, CUDA source). vec_a, vec_b:
        elements per copy of A and B; vec_e: elements per read of an epilogue operand (2: a staged sm_90a
        epilogue reads a bias or residual in aligned column pairs, passes/vectorize_epilogue_reads.cpp). Its
        `passes` lists each pass as (name, ms, changed, ir_after, ran, when): ran False when its `when` did not
        hold; dump_passes keeps ir_after, and `pass_dump` prints them (HEDDLE_DUMP=passes)."""
        return _C.lower(self._f, _str(target, "lower: target"), _int(vec_a, "lower: vec_a"),
                        _int(vec_b, "lower: vec_b"), bool(dump_passes), _int(vec_e, "lower: vec_e"))

    def compile(self, target: Optional[str] = None, vec_a: int = 8, vec_b: int = 8, vec_e: int = 1, **rtc):
        """Lower and compile with NVRTC (no GPU needed). Returns a heddle.Kernel. target None: the current
        device's target when a CUDA (ROCm) device is present, else sm_80 (heddle.runtime.default_target); the
        kernel runs only on devices that target loads on (Kernel.build)."""
        from .kernel import Kernel
        return Kernel.build(self, target, vec_a=vec_a, vec_b=vec_b, vec_e=vec_e, **rtc)

    def __str__(self) -> str:
        return str(self._f)


def ops_unary(name: str, x: Tensor) -> Tensor:
    return x._fusion._wrap(x._fusion._f.unary(name, x._tv))


def ops_quantize(x: Tensor, dtype, group: int) -> tuple:
    f = x._fusion
    q, s = f._f.quantize(_tensor(f, x, "quantize: y"), _dtype_name(dtype), group)
    return f._wrap(q), f._wrap(s)
