"""torch.ops.heddle resolves heddle ops by name: torch.export.load, or unpickling a graph, in a process that never
built them, registers each op from its name on first lookup -- a heddle.matmul op (matmul.py), a gated pair
(dynamo_gated.py) or a merged group (dynamo_merge.py). It sits above the three, so none of them imports another
to resolve names; `import heddle` installs it (heddle/pytorch/__init__.py)."""
from __future__ import annotations

from ..core import torch_compat as compat
from ..core.errors import InputError
from .custom_ops import fusion_op_error, registering
from .matmul import MatmulSpec, fused_matmul_op
from . import op_names


def resolve_op(name: str) -> bool:
    """Register torch.ops.heddle.<name> from its name when it names a heddle matmul op; False if not."""
    if name.startswith("gated_"):   # a gated pair (heddle/pytorch/dynamo_gated.py; loaded on first use)
        from .dynamo_gated import resolve
        return resolve(name)
    if name.startswith("merged_"):   # matmuls sharing their input, q / k / v (heddle/pytorch/dynamo_merge.py)
        from .dynamo_merge import resolve as resolve_merged
        return resolve_merged(name)
    if name.startswith("smm_"):   # heddle.scaled_mm's ops (heddle/pytorch/scaled_mm.py)
        from .scaled_mm import resolve as resolve_scaled
        return name not in registering and resolve_scaled(name)
    if name.startswith("gmm_"):   # heddle.grouped_mm's ops (heddle/pytorch/grouped.py)
        from .grouped import resolve as resolve_grouped
        return name not in registering and resolve_grouped(name)
    fields = op_names.decode(name)
    if fields is None:
        return False
    spec = MatmulSpec(**fields)
    if spec.op_name() != name or name in registering:   # not canonical, or torch looking it up mid-registration
        return False
    fused_matmul_op(spec).op  # FusedMatmul registers its op on first use: now
    return True


class _HeddleNamespace(compat.op_namespace_base()):
    """torch.ops.heddle: an op not registered yet in this process is registered from its name on first
    lookup, e.g. by torch.export.load's deserializer or by unpickling a graph."""

    __module__ = "torch.ops"   # what torch's own namespace says: serialised targets read torch.ops.heddle.<op>

    def __getattr__(self, op_name: str):
        try:
            return super().__getattr__(op_name)
        except AttributeError:
            if op_name.startswith("fusion_") and op_name not in registering:
                # a Kernel.op op this process has not built: loud (torch.export.load would only say "failed
                # to resolve"), with what to do instead
                raise InputError(fusion_op_error(op_name)) from None
            if op_name.startswith("__") or not resolve_op(op_name):
                raise
            return super().__getattr__(op_name)


def install_resolver() -> None:
    ns = compat.ops_namespace("heddle")
    if isinstance(ns, _HeddleNamespace):
        return
    new = _HeddleNamespace("heddle")
    if ns is not None:    # keep the packets already resolved
        for k, v in ns.__dict__.items():
            new.__dict__.setdefault(k, v)
    compat.install_ops_namespace("heddle", new)


install_resolver()
