"""Hopper launch support: the inputs TMA can take, the tensor maps a kernel needs, the persistent grid.

A kernel lowered for sm_90a with tma_load caches reads its operands through tensor maps
(`lowered.tensor_maps`: box and swizzle per operand, see heddle_sm90.cuh TmaTile) encoded on the host
with cuTensorMapEncodeTiled and passed by value. TMA puts rules on the global tensors it copies:

  * the base address is 16-byte aligned
  * the last axis has stride 1 (the box's rows are contiguous)
  * every other stride is a multiple of 16 bytes (and below 2^40), and not 0: an `expand()`ed tensor's
    zero stride passes the 16-byte rule but the driver's encoder refuses it
  * at most 5 dimensions

The lowering also chooses each map's L2 promotion (`l2_promotion` bytes: 256 for the operand tiles every
CTA of a tile row or column re-reads, 128 for a per-tile bias or residual, none for the stored output).

A tensor that breaks one raises heddle.InputError naming the tensor and the rule; heddle.matmul checks
the same rules first and gives such operands the cp.async schedule instead (never a silent wrong
result). Warp-specialized kernels are persistent: `num_ctas` CTAs (at most one per SM) walk the tiles.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from .. import _C
from .errors import InputError

# CU_TENSOR_MAP_DATA_TYPE_*: UINT8 0 for every byte format (e2m1x2: two e2m1 a byte, copied as bytes)
_DATA_TYPE = {1: {"e4m3": 0, "e5m2": 0, "e8m0": 0, "e2m1x2": 0}, 2: {"f16": 6, "bf16": 9}, 4: {"f32": 7}}
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_L2_PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}  # bytes -> CUtensorMapL2promotion (NONE, L2_64B, L2_128B, L2_256B)
_TORCH_NAME = {"torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32", "torch.float8_e4m3fn": "e4m3",
               "torch.float8_e5m2": "e5m2", "torch.float8_e8m0fnu": "e8m0", "torch.float4_e2m1fn_x2": "e2m1x2"}


def tma_problem(t, what: str = "tensor") -> Optional[str]:
    """Why TMA cannot read (or write) `t`, or None when it can."""
    es = t.element_size()
    if t.dim() > 5:
        return f"it has {t.dim()} dimensions; TMA tensors have at most 5"
    if t.dim() and t.stride(-1) != 1:
        return (f"its last axis has stride {t.stride(-1)}; TMA copies rows of contiguous elements (last stride 1) -- "
                "call .contiguous() or declare the operand transposed")
    if t.data_ptr() % 16:
        return f"its base address {t.data_ptr():#x} is not 16-byte aligned (TMA needs 16)"
    for ax in range(t.dim() - 1):
        if t.shape[ax] > 1 and t.stride(ax) == 0:
            return (f"its stride along axis {ax} is 0 (an expand()ed or broadcast tensor: every index reads the same "
                    "memory), which the driver's tensor-map encoder refuses -- call .contiguous()")
        if t.shape[ax] > 1 and (t.stride(ax) * es) % 16:
            return (f"its stride along axis {ax} is {t.stride(ax)} elements = {t.stride(ax) * es} bytes, not a "
                    f"multiple of 16 (TMA needs 16-byte strides: pad the row length to a multiple of {16 // es})")
        if t.stride(ax) * es >= (1 << 40):
            return f"its stride along axis {ax} is {t.stride(ax) * es} bytes; TMA strides stay below 2^40"
    return None


def mx_scales_problem(t) -> Optional[str]:
    """Why an mx32 / nv16 scale tensor (torch's blocked bytes [round_up(rows, 128), Kp]) cannot be the 3-D map
    {128 bytes, Kp rows, row blocks} of the kernel's chunk copies (lower/passes/mx_scale_ring.cpp), or None."""
    if t.dim() != 2 or t.shape[0] % 128:
        return f"its shape is {tuple(t.shape)}, not the blocked [round_up(rows, 128), round_up(K/block, 4)]"
    if t.stride(1) != 1 or t.stride(0) != t.shape[1]:
        return f"it is not contiguous (strides {tuple(t.stride())})"
    if t.data_ptr() % 16:
        return f"its base address {t.data_ptr():#x} is not 16-byte aligned (TMA needs 16)"
    return None


def scale_a_layout_problem(t) -> Optional[str]:
    """Why a block-scaled matmul's scale_a [M, ceil(K/128)] cannot be its TMA map's M-major storage, or None:
    element (m, kb) at m + kb * ld (stride(0) == 1) with ld * 4 bytes a multiple of 16 (CUDA driver API
    cuTensorMapEncodeTiled, globalStrides) -- torch's BlockWise1x128 layout, and DeepGEMM's with M padded to a
    multiple of 4."""
    import torch
    if t.dtype != torch.float32:
        return f"it is {t.dtype}, not float32"
    if t.dim() != 2:
        return f"it has {t.dim()} dimensions, not 2"
    if t.shape[0] > 1 and t.stride(0) != 1:
        return f"it is not M-major (strides {tuple(t.stride())}: stride(0) must be 1)"
    if t.shape[1] > 1 and (t.stride(1) % 4 or t.stride(1) < t.shape[0]):
        return (f"its k-block stride is {t.stride(1)} elements (strides {tuple(t.stride())}); TMA needs a multiple of "
                f"4 (16 bytes) of at least M = {t.shape[0]}")
    if t.data_ptr() % 16:
        return "its address is not 16-byte aligned"
    return None


def m_major_scales(sa):
    """scale_a [M, kb] as the block-scaled kernel's TMA map reads it: M-major, M padded to a multiple of 4 (the
    same tensor when it already is; DeepGEMM's get_col_major_tma_aligned_tensor makes the same layout)."""
    import torch
    if scale_a_layout_problem(sa) is None:
        return sa
    m, kb = sa.shape
    out = torch.zeros((kb, -(-m // 4) * 4), dtype=torch.float32, device=sa.device)
    out[:, :m] = sa.t()
    return out.t()[:m]


def tma_ok(t) -> bool:
    return tma_problem(t) is None


def check_operands(kernel, geometry) -> None:
    """InputError for an operand TMA cannot take (called before the launch geometry's own checks)."""
    if not kernel.lowered.tensor_maps:
        return
    a = geometry.a
    K = a.shape[-2] if kernel._matmul_expr["trans_a"] else a.shape[-1]
    if K == 0:
        raise InputError(f"input '{geometry.a_name}': K = 0, but {kernel.name} runs at least one k-tile (the first "
                         "wgmma of a tile overwrites the accumulators); compute an empty product outside heddle")
    fp4 = str(a.dtype) == "torch.float4_e2m1fn_x2"  # NVFP4 / MXFP4: K / 2 bytes a row (schedule/mx_scales.cpp)
    if fp4 and K % 16:
        fmt = "NVFP4" if kernel._matmul_expr.get("scales") == "nv16" else "MXFP4"
        raise InputError(f"input '{geometry.a_name}': K = {2 * K} (e2m1x2, {K} bytes a row), but {kernel.name} loads "
                         f"its {fmt} operands with TMA, whose row strides are multiples of 16 bytes: K must be a "
                         f"multiple of 32 (pad K with zeros to {(2 * K + 31) // 32 * 32} in both operands and their "
                         "scales)")
    if a.element_size() == 1 and K % 16:  # 8-bit operands (docs/fp8.md): no cp.async kernel to fall back on
        raise InputError(f"input '{geometry.a_name}': K = {K}, but {kernel.name} loads its 8-bit operands with TMA, "
                         f"which reads 16-byte rows: K must be a multiple of 16 (pad K with zeros to "
                         f"{(K + 15) // 16 * 16} in both operands)")
    for name, t in ((geometry.a_name, geometry.a), (geometry.b_name, geometry.b)):
        why = None if broadcast_batch(t) else tma_problem(t)  # a broadcast batch: its own message below
        if why:
            raise InputError(f"input '{name}': {kernel.name} loads it with TMA (cp.async.bulk.tensor), but {why}. "
                             "heddle.matmul picks a cp.async kernel for such inputs by itself")
        if broadcast_batch(t):
            raise InputError(f"input '{name}': its batch stride is 0 (one matrix broadcast over {t.shape[0]} "
                             f"batches); {kernel.name} steps a batched operand's 3-D tensor map by its batch "
                             "stride, which the tensor-map encoder is not promised to take as 0. For a weight "
                             f"shared by every batch pass {name}[0] to a fusion declaring it rank 2 (one 2-D map), "
                             "or .contiguous(); heddle.matmul picks a cp.async kernel for such inputs by itself")


def zero_stride(t) -> bool:
    """A tensor with a zero stride along an axis of extent > 1 (expand(), a broadcast): TMA cannot map it."""
    st = t.stride()  # a kernel lookup's check: the common answer (no zero stride) without a generator
    return 0 in st and any(s == 0 and n > 1 for n, s in zip(t.shape, st))


def broadcast_batch(t) -> bool:
    """A batched operand whose batches are one matrix (batch stride 0, e.g. expand())."""
    return t.dim() == 3 and t.shape[0] > 1 and t.stride(0) == 0


def _tiles(lowered, env) -> int:
    """Output tiles; a clustered kernel's CTAs walk pairs of neighbouring tiles: 2 x its pairs."""
    t = lowered.tile
    nm, nn = -(-env["M"] // t["bm"]), -(-env["N"] // t["bn"])
    c = lowered.cluster
    if c > 1:  # a pair (cluster) per c tiles along its axis, the partner of an odd count's last tile absent
        along = lowered.cluster_along
        nm, nn = (-(-nm // c) * c, nn) if along == "m" else (nm, -(-nn // c) * c)
    return max(1, nm * nn * (env["batch"] if t.get("batch_walk") else 1))  # a batch walk covers every matrix


def _whole_clusters(lowered, ctas: int) -> int:
    """ctas rounded down to whole clusters (at least one cluster)."""
    c = lowered.cluster
    return max(c, ctas // c * c)


def simulated_ctas(lowered, env) -> int:
    """num_ctas for the CPU simulator: at least three tiles per CTA where there are, so the persistent
    walk (ring phases that continue across tiles, slot reuse of the accumulator ring, ping-pong turns)
    is exercised."""
    return _whole_clusters(lowered, max(1, _tiles(lowered, env) // 3))


def num_ctas(lowered, env, device, sms: Optional[int] = None) -> int:
    """One CTA per SM, never more than there are tiles (sms: the SM count to assume; default the device's,
    132 without a driver), rounded down to whole clusters (an odd SM count leaves one SM idle)."""
    if sms is None:
        sms = 132
        try:
            sms = int(_C.runtime.device_info(device.index or 0)["sms"])
        except Exception:  # no driver: the H100/H200 count
            pass
    return _whole_clusters(lowered, max(1, min(_tiles(lowered, env), int(sms))))


def _describe(t2d, esize: int, dtype: str, rows: int, cols: int, ld: int, box_cols: int, box_rows: int,
              swizzle: int, batch: int = 0, batch_stride: int = 0, l2_promotion: int = 0, box_depth: int = 1) -> tuple:
    """cuTensorMapEncodeTiled's arguments for this map: (data_type, address, dims, strides, box,
    element_strides, interleave, swizzle, l2_promotion, oob_fill), what a launch plan keeps to give the
    map another address (runtime/launch_plan.h)."""
    dims = [cols, rows] + ([batch] if batch else [])
    strides = [ld * esize] + ([batch_stride * esize] if batch else [])
    box = [box_cols, box_rows] + ([box_depth] if batch else [])
    return (_DATA_TYPE[esize][dtype], t2d.data_ptr(), dims, strides, box, [1] * len(dims), 0, _SWIZZLE[swizzle],
            _L2_PROMOTION[l2_promotion], 0)


def _encode(*args, encoder=None, what: str = "", **kw) -> bytes:
    """The map _describe(*args, **kw) describes, encoded (by the driver, else `encoder`). what: the tensor
    and its role, named by the driver's DriverError when it rejects the map."""
    dt, address, dims, strides, box, elem, _, swizzle, l2, _ = _describe(*args, **kw)
    extra = {} if encoder else {"what": what}
    encode = encoder or _C.runtime.encode_tensor_map_tiled
    return encode(dt, address, dims, strides, box, elem, swizzle=swizzle, l2_promotion=l2, **extra)


def _named_input(kernel, tensors, op: str, what: str, problem, advice: str):
    """The input `op` a tensor map covers, or an InputError: none given, or `problem(t)` (advice: what the
    kernel does with it, '{}' where the problem goes)."""
    t = (tensors or {}).get(op)
    if t is None:
        raise InputError(f"{kernel.name}: no tensor for {what} '{op}'")
    why = problem(t)
    if why:
        raise InputError(f"input '{op}': {kernel.name} " + advice.format(why))
    return t


def launch_args(kernel, geometry, out, encoder=None, sms=None, tensors=None,
                specs=None) -> Tuple[Dict[str, int], Dict[str, tuple]]:
    """(extra launch-env entries, kernel arguments by parameter name) for a Hopper kernel. encoder: the
    tensor-map encoder (default the CUDA driver's; the interpreter passes its own); sms: see num_ctas;
    tensors: the inputs by name (an epilogue operand loaded by TMA, e.g. a bias row, has a map too). out: the
    output, or the outputs (D, D1, ...) of a fusion with several (the TMA-store epilogue maps each). specs: a
    dict that receives, per map parameter, (the input's name or the output's index, its _describe tuple)."""
    lowered = kernel.lowered
    maps = lowered.tensor_maps
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)  # D, then D1, ... (a map per staged output)
    if not maps:
        return {}, {}
    g = geometry
    mexpr = kernel._matmul_expr
    env, args = {}, {}
    for m in maps:
        op = m["operand"]
        batch = role = None  # set by a branch whose map's third axis or role is its own (the MX scales)
        if op == "D" or (op[:1] == "D" and op[1:].isdigit()):  # output D, or a further output D1, D2, ...
            i = 0 if op == "D" else int(op[1:])
            t, which = outs[i], i
            es = t.element_size()
            if (g.N * es) % 16:
                raise InputError(f"output {i} of {kernel.name}: the epilogue stores it with TMA, which needs rows of a "
                                 f"multiple of 16 bytes, but N={g.N} gives {g.N * es}; use N a multiple of "
                                 f"{16 // es}, or store it directly (epilogue_store('direct'), no epilogue "
                                 "role)")
            rows, cols, ld = g.M, g.N, g.N
        elif m["param"] == "tmSA":  # block scales' scale_a [M, ceil(K/128)], M-major (lower/passes/block_scale_ring.cpp)
            t, which = _named_input(kernel, tensors, op, "the block scales' scale_a", scale_a_layout_problem,
                                    f"loads it by TMA from its M-major layout (scale_a), but {{}}; pass "
                                    f"heddle.tma.m_major_scales({op})"), op
            rows, cols = t.shape[1], g.M
            ld = t.stride(1) if t.shape[1] > 1 else -(-g.M // 4) * 4  # one k-block: its stride is never stepped
        elif m["param"] in ("tmSFA", "tmSFB"):  # mx32 / nv16 scale chunks (lower/passes/mx_scale_ring.cpp): the blocked
            # [round_up(rows, 128), Kp] bytes as a 3-D map {128 bytes, Kp rows of a 128-row block, row blocks}
            t, which = _named_input(kernel, tensors, op, "the MX scales", mx_scales_problem,
                                    "loads its 512-byte scale chunks by TMA from torch's blocked layout, but {}; "
                                    "pass to_blocked(scales), contiguous and 16-byte aligned"), op
            kp = t.shape[1]
            rows, cols, ld = kp, 128, 128
            batch, bstride, role = t.shape[0] // 128, 128 * kp, "MX scales"  # the row blocks: the map's third axis
        elif op not in ("A", "B"):  # a bias row [N] ([1, N] map, [1, bn] boxes) or a residual [M, N] loaded by TMA
            t, which = _named_input(kernel, tensors, op, "the TMA-loaded epilogue operand", tma_problem,
                                    f"loads it with TMA (cache_after({op}, 'tma_load')), but {{}}. Drop that cache to "
                                    "read it per element"), op
            es = t.element_size()
            if m["box_rows"] == 1:  # one row: its stride is never stepped
                rows, cols, ld = 1, g.N, -(-g.N * es // 16) * 16 // es
            else:
                rows, cols, ld = g.M, g.N, t.stride(0)
        else:
            t, which = (g.a, g.a_name) if op == "A" else (g.b, g.b_name)
            trans = mexpr["trans_a"] if op == "A" else mexpr["trans_b"]
            if op == "A":
                rows, cols = (g.K, g.M) if trans else (g.M, g.K)
            else:
                rows, cols = (g.N, g.K) if trans else (g.K, g.N)
            ld = t.stride(-2)
        dt = _TORCH_NAME[str(t.dtype)]
        if batch is None:
            batch = t.shape[0] if (m["batched"] and t.dim() == 3) else 0
            bstride = t.stride(0) if batch else 0
        if role is None:
            role = f"output {op[1:] or 0}" if op[:1] == "D" else f"operand {op}" if op in ("A", "B") else \
                "epilogue operand"
        name = next((n for n, x in (tensors or {}).items() if x is t), None)
        what = f"{role}{f' (input {name!r})' if name else ''} of kernel {kernel.name} (tensor map {m['param']})"
        shape = (t, t.element_size(), dt, rows, cols, ld, m["box_cols"], m["box_rows"], m["swizzle"], batch, bstride)
        kw = {"l2_promotion": m["l2_promotion"], "box_depth": m.get("box_depth", 1)}
        args[m["param"]] = ("bytes", _encode(*shape, what=what, **kw, **({"encoder": encoder} if encoder else {})))
        if specs is not None:
            specs[m["param"]] = (which, _describe(*shape, **kw))
    if any(p[0] == "num_ctas" for p in lowered.params):
        env["num_ctas"] = num_ctas(lowered, g.env, g.a.device, sms)
        args["num_ctas"] = ("i32", env["num_ctas"])
    return env, args
