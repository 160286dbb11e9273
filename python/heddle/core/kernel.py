"""A compiled fusion: lowering result + NVRTC binary, with input checks and the launch.

The kernel is compiled at construction (no GPU needed); it is loaded into the CUDA context and
launched on torch's current stream the first time it is called with CUDA tensors.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, Dict, List, NamedTuple, Optional

from .. import _C
from . import aten, inputs, torch_compat
from .dump import dump
from .errors import InputError, RuntimeUnavailable, ScheduleError
from .inputs import DTYPES as _DTYPES, MatmulGeometry, matmul_expr, matmul_geometry  # noqa: F401 (re-exported)


class Kernel:
    def __init__(self, fusion, lowered, binary, target: str, vec_a: int, vec_b: int, vec_e: int = 1):
        self.fusion = fusion
        self.lowered = lowered
        self.binary = binary
        self.target = target
        self.vec = (vec_a, vec_b)
        self.vec_e = vec_e
        self._pairs = lowered.pair_operands if vec_e > 1 else []  # inputs the epilogue reads in column pairs
        self._loaded = None
        self._inputs = inputs.launch_decls(fusion)  # the fusion's inputs (then a grouped matmul's group ends)
        self._params = lowered.params
        self._out = fusion.outputs[0]
        self._outs = fusion.outputs  # further outputs: params D1, D2, ... (D's index and layout)
        # a computed output scale (heddle.ops.quantize): [..., groups], its own layout (docs/fp8.md)
        self._scale_outs = {e["output"] for e in fusion.exprs() if e["op"] == "amax_scale"}
        # an MX-format output's e8m0 scale (group "mx32"): [round_up(M, 128), round_up(N/32, 4)] blocked
        self._mx_outs = {e["output"] for e in fusion.exprs() if e["op"] == "amax_scale" and e["group"] == "mx32"}
        self._op = None
        self._rtc_options = []
        self._matmul_expr = matmul_expr(fusion)
        self._plans = plan_table()  # call signature -> its LaunchPlan (in C++: _C.runtime.PlanTable)
        self._workspaces: Dict[tuple, tuple] = {}  # (device, stream) -> (ws, flags); their addresses in _ws_table
        self._ws_table = _C.runtime.WorkspaceTable()  # what the plans read (runtime/launch_plan.h)
        self._retired: List[tuple] = []  # workspaces replaced by larger ones: a planned launch may hold them
        self._ws_lock = threading.Lock()
        self._map_encoder = None  # the tensor-map encoder of launches (None: the driver's; tests: the interpreter's)
        self.full_path_calls = 0  # launches that took the full path (checks, prepare, a new plan): the rest planned

    @property
    def _plans(self):
        return self._plan_table

    @_plans.setter
    def _plans(self, table):  # the table, and its call() as a builtin bound to it (no pybind11 dispatch per call)
        self._plan_table, self._plans_call = table, table.fast_call

    @classmethod
    def build(cls, fusion, target: Optional[str] = None, vec_a: int = 8, vec_b: int = 8, isolate=None,
              use_cache: bool = True, options: Optional[List[str]] = None, rtc: bool = True,
              allow_spills: bool = False, vec_e: int = 1) -> "Kernel":
        """Lower `fusion` and compile it (NVRTC / hiprtc). target None: the current device's target when a CUDA
        (ROCm) device is present, else sm_80 (heddle.runtime.default_target). A kernel runs only on devices its
        target loads on (an sm_80 binary on 8.x, sm_90a on 9.0, sm_100a on 10.0): a launch elsewhere is an
        InputError naming the target to compile for. rtc=False stops after lowering: the kernel can be
        interpreted (heddle.interpret) and inspected, not launched on a GPU. A schedule whose kernel spills
        registers (ptxas report), or that ptxas advises is slow or wrong (a serialised wgmma pipeline, C7510 /
        C7514 / C7515 / C7519, or an ignored instruction such as setmaxnreg, C7508: stats.advisories), is a
        ScheduleError saying what to change, unless allow_spills=True; so are role
        register budgets beyond the compiled kernel's setmaxnreg pool (ptxas's registers x threads: a hang).
        vec_e=2: an epilogue in column pairs (the staged or direct sm_90a one, the mma.sync one) reads its bias /
        residual in aligned column pairs (the launch checks their layout: _pair_ok, an even column count
        included)."""
        if target is None:
            from .runtime import default_target
            target = default_target()
        dump("fusion", lambda: str(fusion))
        lowered = fusion.lower(target, vec_a, vec_b, dump_passes=_wants("passes"), vec_e=vec_e)
        dump("schedule", lambda: lowered.schedule + "\n" + fusion.matmul_tensor.domain + "\n")
        dump("passes", lambda: lowered.pass_dump)
        dump("kernel_ir", lambda: lowered.kernel_ir)
        dump("sync", lowered.explain)
        dump("cuda", lambda: lowered.source)
        if not rtc:
            return cls(fusion, lowered, None, target, vec_a, vec_b, vec_e)
        from .runtime import ensure_search_dirs
        ensure_search_dirs()
        # the target's backend (NVRTC / hiprtc) through the kernel cache: runtime/build.h
        # the cubin and launch facts, shared with the memory cache; the PTX is left on disk (Kernel.ptx)
        binary = _C.runtime.compile_lowered(lowered, options=list(options or []), isolate=isolate, want_ptx=True,
                                            use_cache=use_cache, keep_ptx=False)
        kernel = cls(fusion, lowered, binary, target, vec_a, vec_b, vec_e)
        kernel._rtc_options = list(options or [])  # Kernel.ptx compiles again with the same options
        dump("ptx", lambda: kernel.ptx)  # a memory hit's PTX: from disk, else compiled again (Kernel.ptx)
        dump("ptxas", lambda: binary.ptxas)
        if not allow_spills and lowered.compiler_report:
            _refuse_spills(kernel)
            _refuse_advisories(kernel)
        if lowered.compiler_report:  # role budgets against the compiled kernel's setmaxnreg pool
            lowered.check_register_pool(kernel.stats.registers)
        return kernel

    # --- what was produced ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.lowered.name

    @property
    def source(self) -> str:
        return self.lowered.source

    @property
    def kernel_ir(self) -> str:
        return self.lowered.kernel_ir

    @property
    def ptx(self) -> str:
        """The PTX. A kernel holds none (it shares the memory cache's cubin and launch facts) unless
        HEDDLE_KEEP_PTX=1 or HEDDLE_DUMP names ptx: it is read back from the disk entry, else compiled again,
        uncached, the way Kernel.build compiled it (the target's backend, the build's options)."""
        return self._compiler_text("ptx")

    @property
    def ptxas(self) -> str:
        """The ptxas -v report's text. A kernel holds its parsed facts (Kernel.stats), not the text, unless
        HEDDLE_DUMP names ptxas or it has no disk entry: read back from the disk entry, else compiled again,
        uncached, as Kernel.ptx is (its timing lines then differ)."""
        return self._compiler_text("ptxas")

    def _compiler_text(self, what: str) -> str:
        """binary.<what> (ptx, ptxas), or, when neither memory nor disk holds it, the same compile again."""
        try:
            return getattr(self.binary, what)
        except RuntimeUnavailable:
            again = _C.runtime.compile_lowered(self.lowered, options=self._rtc_options, want_ptx=True,
                                               use_cache=False)
            return getattr(again, what)

    @property
    def stats(self):
        return self.binary.stats

    def explain(self, format: str = "text") -> str:
        """Every sync op of the kernel with the hazard it orders and why this mechanism; format="mermaid":
        a Mermaid flowchart of the roles, the buffers between them and their mbarriers."""
        return self.lowered.explain(format)

    @property
    def op(self):
        """This compiled fusion as a torch custom op, torch.ops.heddle.fusion_<hash>: CUDA tensors run
        the kernel, CPU tensors compute the fusion with torch (float32); a fake implementation lets
        it trace under torch.compile. Made by the torch integration (heddle.pytorch.custom_ops.kernel_op),
        which `import heddle` installs here (core never imports the layer above it)."""
        if self._op is None:
            if _op_factory is None:
                raise RuntimeUnavailable(f"{self.name}: Kernel.op needs heddle's torch integration; "
                                         "`import heddle` (or heddle.pytorch) installs it")
            self._op = _op_factory(self)
        return self._op

    # --- run -----------------------------------------------------------------------------------
    def bind(self, tensors) -> Dict[str, int]:
        """Check inputs against the fusion and bind its symbolic sizes. Raises heddle.InputError."""
        return inputs.bind(self.name, self._inputs, tensors)

    def __call__(self, *tensors):
        # a call like an earlier one: its launch plan, no checks redone, in one C++ call (PlanTable.call:
        # signature, lookup, stream, output, pack, launch); run_planned when the tensors' device is not current
        out = self._plans_call(tensors)
        if out is None:
            out = self.run_planned(tensors)
        if out is not None:
            return out
        tensors = inputs.materialize(tensors)  # a negative view's memory holds its negation: resolve it
        g = inputs.check(self.name, self._inputs, self._matmul_expr, tensors)
        if tensors[0].device.type != "cuda":
            raise InputError(f"{self.name}: kernels run on CUDA tensors; got {tensors[0].device}. "
                             "Use heddle.reference.evaluate(...) or the torch op for CPU tensors")
        empty = inputs.zero_size_result(self.fusion, g, tensors)  # M, N or K = 0: torch's answer, no launch
        return empty if empty is not None else self._launch(tensors, g)

    def prepare(self, tensors, *, tensor_map_encoder=None, sms=None, geometry=None):
        """Check layout/alignment and build (output, grid, kernel args) for `tensors`; pure host work,
        usable (and tested) without a GPU. The interpreter (heddle.interpret) passes its own tensor-map
        encoder (same arguments as cuTensorMapEncodeTiled) and the SM count its persistent grid stands for.
        geometry: the MatmulGeometry inputs.check already made of these tensors (the launch path)."""
        out, grid, args, _ = self._prepare(tensors, tensor_map_encoder, sms, geometry)
        return out, grid, args

    def _out_shape(self, o, g):
        """Output o's shape: D's [(batch,) M, N], a computed output scale's [M, groups], or an MX-format output's
        e8m0 scale [round_up(M, 128), round_up(N/32, 4)] (the derived row count of a symbolic M)."""
        if o.name in self._mx_outs:
            return (-(-g.out_shape[0] // 128) * 128, o.shape[-1])
        return (*g.out_shape[:-1], o.shape[-1]) if o.name in self._scale_outs else g.out_shape

    def _prepare(self, tensors, tensor_map_encoder=None, sms=None, geometry=None):
        """prepare, plus what a launch plan needs beyond the arguments (PlanParts, runtime/launch_plan.h): a
        slot (argument index, tensor index, alignment in bytes) for every argument that is a tensor's address
        (output i is tensor len(tensors) + i), a map (argument index, tensor index, its description) for every
        tensor map, and a split-K / stream-K kernel's workspace arguments."""
        import torch
        inputs.check_memory(self.name, self._inputs, tensors)  # every address below holds its tensor's value
        by_name = {n: t for (n, _, _), t in zip(self._inputs, tensors)}
        hopper = bool(self.lowered.tensor_maps)
        if hopper:  # TMA's own rules first, with a message naming them (heddle/core/tma.py)
            from . import tma
            tma.check_operands(self, _Operands(self._matmul_expr, by_name))
        g = geometry or MatmulGeometry(self._matmul_expr, by_name)
        a, b, M, N = g.a, g.b, g.M, g.N
        # a matmul group's further B operands (params B1, B2, ...: loaded like B, with ldb1, ldb2, ...)
        group_b = {name: tensor for name, kind, _, tensor in self._params
                   if kind == "ptr" and name[:1] == "B" and name[1:].isdigit()}
        for tname in group_b.values():
            if by_name[tname].stride(-1) != 1 and by_name[tname].shape[-1] > 1:
                raise InputError(f"input '{tname}': its last axis has stride {by_name[tname].stride(-1)}; heddle "
                                 "reads rows contiguously — call .contiguous()")
        operands = [(g.a_name, a, self.vec[0]), (g.b_name, b, self.vec[1])]
        operands += [(tname, by_name[tname], self.vec[1]) for tname in group_b.values()]
        for nm, t, vec in () if hopper else operands:
            ld = t.stride(-2)
            if ld % vec or t.data_ptr() % (vec * t.element_size()):
                raise InputError(f"input '{nm}': row stride {ld} elements / address {t.data_ptr():#x} is not aligned "
                                 f"to the kernel's {vec}-element copies; recompile with vec={_vec_for(t)} "
                                 "(heddle.matmul does this for you)")
            if t.dim() == 3 and t.shape[0] > 1 and t.stride(0) % vec:  # every batch's rows start aligned
                raise InputError(f"input '{nm}': batch stride {t.stride(0)} elements is not a multiple of the "
                                 f"kernel's {vec}-element copies, so batches >= 1 would be read misaligned; call "
                                 f".contiguous() on a padded layout or recompile with vec={_vec_for(t)} "
                                 "(heddle.matmul does this for you)")
        pairs = self._pairs
        for nm in pairs:  # read two columns per load (passes/vectorize_epilogue_reads.cpp)
            t = by_name[nm]
            if not _pair_ok(t):
                raise InputError(f"input '{nm}': the kernel reads it two columns per load (vec_e=2), which needs "
                                 f"an even number of contiguous columns ({t.shape[-1]}, stride {t.stride(-1)}), even strides "
                                 f"{tuple(t.stride())} and "
                                 f"a {2 * t.element_size()}-byte aligned address ({t.data_ptr():#x}); call "
                                 ".contiguous() or recompile with vec_e=1 (heddle.matmul does this for you)")
        for axis in ("M", "N", "K"):  # the kernel takes them as 32-bit ints
            if g.env[axis] >= 2 ** 31:
                raise InputError(f"{self.name}: {axis}={g.env[axis]} does not fit the kernel's 32-bit size "
                                 f"parameters (at most {2 ** 31 - 1}); split the problem along {axis}")
        self.lowered.check_launch(g.env)
        grid = None if hopper else self.lowered.grid(g.env)  # Hopper: its persistent grid needs the maps first
        if grid is not None:
            check_grid(self.name, grid)  # before allocating the output
        outs = [torch.empty(self._out_shape(o, g), dtype=getattr(torch, _DTYPES[o.dtype]), device=a.device)
                for o in self._outs]
        out = outs[0]
        scalar = {"M": ("i32", M), "N": ("i32", N), "K": ("i32", g.K), "batch": ("i32", g.batch),
                  "tokens": ("i32", M), "E": ("i32", g.env.get("E", 0)),  # a grouped matmul's (grouped_walk.h)
                  "max_tokens": ("i32", M),  # the masked layout's slab rows (grouped_walk.h)
                  "lda": ("i64", a.stride(-2)),
                  "ldb": ("i64", b.stride(-2)), "ldd": ("i64", N), "batch_stride_d": ("i64", M * N),
                  "batch_stride_a": ("i64", a.stride(0) if a.dim() == 3 else 0),
                  "batch_stride_b": ("i64", b.stride(0) if b.dim() == 3 else 0)}
        map_specs = {}
        env, extra = tma.launch_args(self, g, outs, encoder=tensor_map_encoder, sms=sms, tensors=by_name,
                                     specs=map_specs) if hopper else ({}, {})
        index = {n: i for i, (n, _, _) in enumerate(self._inputs)}
        align = {g.a_name: 1 if hopper else self.vec[0] * a.element_size(),
                 g.b_name: 1 if hopper else self.vec[1] * b.element_size()}
        align.update({tname: self.vec[1] * b.element_size() for tname in group_b.values()})
        align.update({nm: 2 * by_name[nm].element_size() for nm in pairs})
        ws = self.workspace(a.device, g.env) if self.lowered.needs_workspace else None
        args, slots, maps, ws_args = [], [], [], {}

        def address(tname=None, i=0):  # the tensor's (else output i's) address as argument len(args), and its slot
            t = outs[i] if tname is None else by_name[tname]
            slots.append((len(args), len(tensors) + i if tname is None else index[tname], align.get(tname, 1)))
            args.append(("ptr", t.data_ptr()))

        for name, kind, _, tensor in self._params:
            if name in map_specs:  # a tensor map over an input (by name) or output i
                which, spec = map_specs[name]
                maps.append((len(args), len(tensors) + which if isinstance(which, int) else index[which], spec))
            if name in extra: args.append(extra[name])
            elif name in ("ws", "flags") and ws is not None:
                ws_args[name] = len(args)
                args.append(("ptr", ws[name == "flags"].data_ptr()))
            elif name in ("scale_a", "scale_b") and kind == "ptr": address(tensor)  # block scales (docs/fp8.md)
            elif name == "A": address(g.a_name)
            elif name == "B": address(g.b_name)
            elif name in group_b: address(group_b[name])
            elif name[:3] == "ldb" and "B" + name[3:] in group_b: args.append(("i64", by_name[group_b["B" + name[3:]]].stride(-2)))
            elif name[:14] == "batch_stride_b" and "B" + name[14:] in group_b:  # a gated grouped pair's w[e]
                args.append(("i64", by_name[group_b["B" + name[14:]]].stride(0)))
            elif name == "D": address()
            elif name[:1] == "D" and name[1:].isdigit() and kind == "ptr": address(i=int(name[1:]))
            elif name in scalar: args.append(scalar[name])
            elif name.startswith("E_") and kind == "ptr": address(tensor)
            elif name in ("offs", "counts") and kind == "ptr": address(tensor)  # group ends / masked row counts
            elif name.startswith("E_"):  # E_<tensor>_s<axis>: stride of an epilogue operand
                tname, ax = name[2:].rsplit("_s", 1)
                args.append(("i64", by_name[tname].stride(int(ax))))
            else:
                raise InputError(f"{self.name}: no value for kernel parameter '{name}'")
        if grid is None:
            grid = self.lowered.grid({**g.env, **env})
            check_grid(self.name, grid)
        workspace = None
        if ws is not None:  # a plan takes the workspace of its call's stream (this kernel's WorkspaceTable)
            workspace = (ws_args["ws"], ws_args["flags"], max(1, self.lowered.workspace(g.env)[0]), self._ws_table)
        return (out if len(outs) == 1 else tuple(outs)), grid, args, PlanParts(slots, maps, workspace)

    def workspace(self, device, env):
        """(ws, flags) of a split-K kernel for a launch with sizes `env`: float32 partial tiles and one int32
        flag per (tile, split < last). Kept per (device, stream) and grown as needed: the flags are zero
        between launches (the reducing CTA resets each flag it waited for), so launches on one stream
        reuse them. On the CPU (the interpreter) every call starts from zero flags and NaN partials. Each one
        is entered in the kernel's WorkspaceTable, where launch plans find their stream's; one that is grown
        (to twice its slots at least) is kept alive, since a planned launch in another thread may hold it."""
        import torch
        slots, per = self.lowered.workspace(env)
        slots = max(1, slots)
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
        key = (str(device), stream)
        with self._ws_lock:
            have = self._workspaces.get(key)
            if have is None or have[1].numel() < slots:
                if have is not None:
                    self._retired.append(have)
                    slots = max(slots, 2 * have[1].numel())
                have = (torch.empty(slots * per, dtype=torch.float32, device=device),
                        torch.zeros(slots, dtype=torch.int32, device=device))
                self._workspaces[key] = have
                index = device.index if device.type == "cuda" else -1
                self._ws_table.set(index if index is not None else torch.cuda.current_device(), stream, have[0],
                                   have[1], slots)
            if device.type != "cuda":
                have[0].fill_(float("nan"))
                have[1].zero_()
        return have

    def _launch(self, tensors, g, table=None):
        """The full path: prepare, launch through a new plan, and remember the plan for this call
        signature here (and in `table`, the caller's own eager table). Counted in full_path_calls."""
        self.full_path_calls += 1
        out, grid, args, parts = self._prepare(tensors, self._map_encoder, geometry=g)
        outs = out if isinstance(out, tuple) else (out,)
        if self._loaded is None:
            # the backend's launcher (Kernel: CUDA, HipKernel: HIP); loads once per context, lazily
            self._loaded = _C.runtime.load(self.binary, self.name, self.lowered.backend)
        device = outs[0].get_device()  # its primary context runs the launch (-1, CPU tensors: a test's fake driver)
        plan = self.plan(self._loaded, grid, args, parts, device)
        launched = _on_device(device, lambda stream: plan.launch(stream, (*tensors, *outs)))
        assert launched, "a plan made from these tensors (and their stream's workspace) takes them"
        for t in (self._plans, table):
            if t is not None:
                t.add(tensors, plan, outs)
        return out

    def plan(self, launcher, grid, args, parts: "PlanParts", device: int = -1):
        """The LaunchPlan of a prepared launch (_prepare's arguments and parts), launched by `launcher`."""
        return _C.runtime.LaunchPlan(launcher, grid, (self.lowered.threads, 1, 1), self.lowered.smem_bytes, args,
                                     parts.slots, cluster=(self.lowered.cluster, 1, 1), device=device, maps=parts.maps,
                                     workspace=parts.workspace, encoder=self._map_encoder)

    def run_planned(self, tensors):
        """The eager fast path: when an earlier call had this call signature (shapes, strides, dtypes,
        device, address modulo 16), launch through its plan and return the output; None otherwise (or
        when an address no longer fits the plan), and the caller takes the full path."""
        return run_table(self._plans, tensors)


class PlanParts(NamedTuple):
    """What a LaunchPlan takes beside the arguments (runtime/launch_plan.h): pointer slots (argument, tensor,
    alignment), tensor maps (argument, tensor, description), workspace (ws argument, flags argument, slots,
    WorkspaceTable) or None."""
    slots: list
    maps: list
    workspace: Optional[tuple]


MAX_PLANS = 64  # call signatures remembered per table (beyond: forgotten all at once, re-planned on use)


def plan_table(python_reads: bool = False):
    """An empty table of launch plans by call signature (_C.runtime.PlanTable: signature, lookup, output
    allocation, address checks, packing and launch in one C++ call; docs/runtime.md, "Eager calls"); its call()
    queries the current device and stream itself. It reads tensors and allocates outputs through ATen where
    heddle._C_aten serves the running torch (heddle.core.aten), else, or with python_reads, through torch's
    Python API (the same keys)."""
    import torch
    return _C.runtime.PlanTable(torch.empty, MAX_PLANS, current_device=torch_compat.cuda_current_device(),
                                raw_stream=torch_compat.cuda_raw_stream(),
                                aten=None if python_reads else aten.access())


def run_table(table, tensors, exact_type=None, no_grad: bool = False):
    """One eager launch through `table` on the tensors' device and its current stream: the output, or
    None when the table has no plan for this call (the caller takes the full path). exact_type, no_grad:
    None also when a tensor's type is not exactly exact_type, or (no_grad) a tensor requires grad."""
    try:
        index = tensors[0].get_device()
    except (AttributeError, TypeError, IndexError):  # not tensors: the full path says what is wrong
        return None
    return _on_device(index, lambda stream: table.run(stream, tensors, False, exact_type, no_grad))


def _on_device(index: int, launch):
    """launch(stream) on device `index`'s current stream, with that device current (its context gets the
    module and runs the launch). index < 0 (CPU tensors: only a test's fake driver launches them): stream 0."""
    if index < 0:
        return launch(0)
    import torch
    current = torch_compat.cuda_current_device()  # torch.cuda.current_device without its Python layers
    if index == (current() if current is not None else torch.cuda.current_device()):
        return launch(_raw_stream(index))
    with torch.cuda.device(index):
        return launch(_raw_stream(index))


def _raw_stream(index: int) -> int:
    """The current CUDA stream of device `index` as an integer (torch's C accessor where it has one)."""
    import torch
    raw = torch_compat.cuda_raw_stream()
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


# Kernel -> its torch custom op; set once by heddle.pytorch.custom_ops (see Kernel.op)
_op_factory: Optional[Callable[["Kernel"], object]] = None


def set_op_factory(factory: Callable[["Kernel"], object]) -> None:
    global _op_factory
    _op_factory = factory


class _Operands:
    """The matmul operands by role, before MatmulGeometry's layout checks (for TMA's own messages)."""

    def __init__(self, mexpr, by_name):
        self.a_name, self.b_name = mexpr["inputs"]
        self.a, self.b = by_name[self.a_name], by_name[self.b_name]


# The driver's limits on a grid (cuLaunchKernel: gridDimX < 2^31, gridDimY and gridDimZ <= 65535).
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)


def check_grid(name: str, grid) -> None:
    for axis, (n, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if n > limit:
            raise InputError(f"{name}: grid.{'xyz'[axis]} = {n} blocks exceeds the driver's limit of {limit} "
                             "(grid.x < 2^31, grid.y and grid.z <= 65535); split the problem into calls with fewer "
                             "rows, columns or batches, or use larger tiles")


def _vec_for(t) -> int:
    """The widest copy (in elements: at most 16 bytes and at most 8 elements, validate's rule, so an 8-bit
    operand's widest is 8) that the tensor's layout allows: row stride, batch stride (every batch's rows
    start aligned) and base address."""
    es = t.element_size()
    bs = t.stride(0) if t.dim() == 3 and t.shape[0] > 1 else 0
    for vec in (min(16 // es, 8), 8 // es, 4 // es, 1):
        if vec >= 1 and t.stride(-2) % vec == 0 and bs % vec == 0 and t.data_ptr() % (vec * es) == 0:
            return vec
    return 1


def _pair_ok(t) -> bool:
    """Whether an epilogue operand suits reads of two adjacent columns in one load (vec_e=2): its columns
    contiguous and even in number (every pair at an even column is whole: the mma.sync epilogue reads them
    without a bounds check, passes/vectorize_epilogue_reads.cpp), every other stride even (axes of size 1
    aside) and its base pair-aligned. A tensor with a single column is never read in pairs and suits any
    kernel."""
    if t.dim() == 0 or t.shape[-1] <= 1:
        return True
    if t.shape[-1] % 2 or t.stride(-1) != 1 or t.data_ptr() % (2 * t.element_size()):
        return False
    return all(s % 2 == 0 for n, s in zip(t.shape[:-1], t.stride()[:-1]) if n > 1)


def _vec_e_for(tensors) -> int:
    """vec_e for these epilogue operands: 2 when every one suits pair reads (_pair_ok), else 1."""
    return 2 if all(_pair_ok(t) for t in tensors) else 1


def _wants(stage: str) -> bool:
    return stage in [s.strip() for s in os.environ.get("HEDDLE_DUMP", "").split(",")]


def _refuse_spills(kernel: "Kernel") -> None:
    """A kernel that spills registers to local memory runs far below its schedule's promise: refuse the
    schedule with the numbers and what to change (issue 16: accepted schedules compile without spills)."""
    st = kernel.stats
    if not (st.spill_stores or st.spill_loads):
        return
    raise ScheduleError(
        f"{kernel.name}: ptxas spills {st.spill_stores} bytes of stores and {st.spill_loads} bytes of loads "
        f"at {st.registers} registers per thread: the schedule gives one thread more live values (accumulators, "
        f"copy chunks of each stage, fragments) than registers. Split the tile over more warps, use a smaller "
        f"k-tile or tile, or fewer stages; or build with allow_spills=True to accept the slower kernel")


def advisory_code(line: str) -> str:
    """The ptxas code of an advisory line ('C7514'), or 'ptxas' when it has none."""
    import re
    m = re.search(r"\((C\d{4})\)", line)
    return m.group(1) if m else "ptxas"


def advisory_remedy(line: str) -> str:
    """What to change for a ptxas advisory (stats.advisories) line."""
    low = line.lower()
    if "setmaxnreg" in low:
        return ("ptxas could not tell the kernel's register count at entry, so the roles' register budgets "
                "(warp_specialize registers=) never take effect: drop registers= from the roles, or report the "
                "schedule (heddle prints the launch bounds that let ptxas honour them)")
    if "function" in low and ("call" in low or "boundary" in low):
        return ("a function call inside the wgmma pipeline (a device function ptxas did not inline, an assert): "
                "every wgmma waits for the one before. Report the schedule; another tile or role layout avoids it")
    if "reading accumulator" in low or "defining accumulator" in low or "injected" in low:
        return ("non-wgmma instructions touch the accumulators while a wgmma is in flight (an epilogue or a zero "
                "fill between a wgmma and its wait), so every wgmma waits for the one before. Choose another "
                "schedule: another stage count, tile, or epilogue layout (heddle.autotune drops such candidates)")
    return ("ptxas ignored or serialised part of the kernel: choose another schedule (tile, stages, roles; "
            "heddle.autotune drops such candidates)")


def real_advisories(stats) -> list:
    """stats.advisories without the ones a debug build causes on purpose: HEDDLE_DEBUG=bounded_waits compiles a
    report call (heddle::debug::wait_timed_out) into every spin, and ptxas serialises the wgmma pipeline around
    any call (C7510, "crossing function boundary ... in the function '_ZN6heddle5debug...'"): expected in a
    debug build, never in a release one, where the refusal stands."""
    return [a for a in stats.advisories if "heddle5debug" not in a]


def _refuse_advisories(kernel: "Kernel") -> None:
    """A ptxas advisory that means slow or wrong code (a serialised wgmma pipeline, an ignored setmaxnreg; issue
    28 item 5) is a ScheduleError naming it and what to change; allow_spills=True accepts the kernel."""
    adv = real_advisories(kernel.stats)
    if not adv:
        return
    first = adv[0].split(":", 1)[-1].strip()
    raise ScheduleError(
        f"{kernel.name}: ptxas advisory {advisory_code(adv[0])}: {first}. {advisory_remedy(adv[0])}; or build with "
        f"allow_spills=True to accept the slower kernel"
        + (f" ({len(adv) - 1} more advisor{'ies' if len(adv) > 2 else 'y'}: "
           f"{', '.join(advisory_code(a) for a in adv[1:])})" if len(adv) > 1 else ""))
