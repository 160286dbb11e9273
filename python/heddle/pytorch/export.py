"""heddle ops in saved programs: what a fresh process needs before it loads one (docs/torch.md, "Export").

torch.export.load needs nothing: it resolves every op through torch.ops.heddle, which registers a
heddle.matmul op from its name on first lookup (heddle/pytorch/matmul.py). An AOTInductor package
(torch._inductor.aoti_compile_and_package) is different: its compiled wrapper looks the ops up in
torch's C++ dispatcher by schema, never through Python, so they must be registered before
aoti_load_package. load_ops(package) reads the op names the package holds and registers them.

Kernel.op's ops (torch.ops.heddle.fusion_<hash>) are named by a hash of the kernel's target and source:
the name cannot say which fusion and schedule to build, so no process can register one from its name.
Build the same Kernel and take its .op first (the name is the same in every process), or use
heddle.matmul, whose ops register themselves by name.
"""
from __future__ import annotations

import re
from typing import List

import torch

from ..core.errors import InputError
from . import resolver  # noqa: F401 (torch.ops.heddle registers heddle ops by name)

# every heddle op kind: heddle.matmul ops (mm_), gated pairs and merged groups of the torch.compile backend
# (gated_, merged_; all register from their names), Kernel.op ops (fusion_; they cannot)
_NAME = re.compile(rb"heddle(?:::|\.)((?:mm|gated|merged|fusion)_[A-Za-z0-9_]+)")


def op_names_in(path) -> List[str]:
    """The heddle op names a saved program (an AOTInductor package or a torch.export archive: a zip file,
    by path or file object) refers to, sorted."""
    import zipfile
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise InputError(f"heddle.pytorch.load_ops: {path!r} is not a saved program (a .pt2 zip archive): {e}") from e
    names = set()
    with archive:
        for member in archive.namelist():
            if member.endswith((".json", ".cpp")):  # the extern-op table, the wrapper source, the exported graph
                names.update(m.decode() for m in _NAME.findall(archive.read(member)))
    return sorted(names)


def load_ops(path) -> List[str]:
    """Register every heddle op that the saved program at `path` (an AOTInductor package, or a torch.export
    archive) calls, so that torch._inductor.aoti_load_package finds them in torch's dispatcher; returns
    their names. Call it after `import heddle` and before loading:

        heddle.pytorch.load_ops("model.pt2")
        runner = torch._inductor.aoti_load_package("model.pt2")

    A Kernel.op op that this process has not built is an InputError saying what to do instead."""
    names = op_names_in(path)
    for name in names:
        try:
            getattr(torch.ops.heddle, name)  # registered already, or a heddle.matmul op registered now
            continue
        except InputError as e:  # a Kernel.op op this process has not built
            raise InputError(f"heddle.pytorch.load_ops({path!r}): {e}") from None
        except AttributeError:
            pass
        raise InputError(f"heddle.pytorch.load_ops({path!r}): torch.ops.heddle.{name} is not an op this heddle "
                         "version can build (not a heddle.matmul op name it knows); save the program again with "
                         "this version")
    return names
