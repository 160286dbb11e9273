"""Warm restarts of heddle's torch.compile backend (docs/torch.md, "Caches").

A new process that compiles a graph an earlier process compiled replays that process's work instead of
redoing it: with the default fallback, torch's AOTAutograd cache (joint-graph tracing, partitioning) and
inductor's FX graph cache (code generation) both apply to heddle's graphs. What this module adds:

  graph_key(gm, inputs, opts, mode)   a stable hash of the dynamo graph (its code, every input's type, shape,
                                      stride, dtype, device, requires_grad), grad mode, the backend's options
                                      and mode, heddle's version and the source of its torch.compile rewrite
                                      (heddle/pytorch/*.py), torch's version, the target of each CUDA device,
                                      heddle's cache directory and every HEDDLE_* environment variable.
                                      It is passed to torch as torch.compiler.config.cache_key_tag, so heddle's
                                      AOTAutograd / FX graph entries are never served to inductor (or to
                                      heddle with other options, another version or a changed rewrite) and
                                      inductor's never to heddle.
  save_reports / load_reports         the GraphReports of the rewrite (what heddle.dynamo.reports, stats and
                                      explain() show), kept in heddle's cache directory under dynamo/<key>.
                                      A replayed compile runs no rewrite; its reports come from here.

Robustness (the kernel cache's rules, docs/runtime.md): an entry is written to a temporary file and
renamed into place; a missing, truncated, corrupt or mismatched entry reads as a miss (the backend then
compiles again with torch's AOTAutograd cache off, so the rewrite runs); a failed write is ignored (the
compile never blocks on the cache). Nothing is written without a cache directory.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from typing import List, Optional

import torch

_MAGIC = b"heddle-dynamo-reports-1\n"


@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """heddle's version, the source of heddle/pytorch/*.py (the rewrite and the op names it emits) and torch's
    version: anything that changes what the rewrite produces."""
    from ..core.version import __version__
    return source_fingerprint(__version__, os.path.dirname(os.path.abspath(__file__)))


def source_fingerprint(version: str, here: str) -> str:
    """The fingerprint of heddle `version` whose rewrite is the *.py files in directory `here`."""
    h = hashlib.sha256(f"heddle {version} torch {torch.__version__}\n".encode())
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def cache_dir() -> Optional[str]:
    """heddle's cache directory (HEDDLE_CACHE_DIR, else XDG_CACHE_HOME/heddle, else ~/.cache/heddle; the
    runtime's rule), or None when there is none."""
    try:
        from .. import _C
        d = _C.runtime.cache_dir()
    except Exception:
        return None
    return d or None


def _describe(v) -> str:
    if isinstance(v, torch.Tensor):
        target = ""
        if v.device.type == "cuda":
            target = _device_target(v.device)
        return (f"T({tuple(str(s) for s in v.shape)},{tuple(str(s) for s in v.stride())},{v.dtype},{v.device},"
                f"{v.requires_grad},{type(v).__name__},{target})")
    return f"{type(v).__name__}({v!s})"


def _device_target(device) -> str:
    try:
        from ..core.runtime import target_for_device
        return str(target_for_device(device))
    except Exception as e:   # no target: the rewrite forms no groups; keyed as such
        return f"none:{type(e).__name__}"


def graph_key(gm: torch.fx.GraphModule, example_inputs, opts, mode) -> str:
    """The stable key of one dynamo graph compiled by heddle's backend (see the module docstring)."""
    h = hashlib.sha256()
    parts = [fingerprint(), f"code\n{gm.code}", f"grad {torch.is_grad_enabled()}", f"mode {mode!r}",
             f"options {opts.fallback} {opts.fuse} {opts.groups} {sorted((k, repr(v)) for k, v in opts.inductor.items())}",
             f"cache_dir {cache_dir()}",
             "env " + repr(sorted((k, v) for k, v in os.environ.items() if k.startswith("HEDDLE_")))]
    parts += [_describe(v) for v in example_inputs]
    for p in parts:
        h.update(p.encode() + b"\0")
    return h.hexdigest()


def _path(key: str) -> Optional[str]:
    d = cache_dir()
    return os.path.join(d, "dynamo", key + ".reports") if d else None


def save_reports(key: str, reports: List) -> bool:
    """Write the reports of `key`'s compile (atomically); False when there is no cache directory or the write
    failed (ignored: the compile goes on)."""
    path = _path(key)
    if path is None:
        return False
    try:
        payload = pickle.dumps((key, list(reports)), protocol=pickle.HIGHEST_PROTOCOL)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True
    except Exception:
        return False


def load_reports(key: str) -> Optional[List]:
    """The reports saved for `key`, or None (no entry, or one that is truncated, corrupt or for another key)."""
    path = _path(key)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data.startswith(_MAGIC):
            return None
        digest, _, payload = data[len(_MAGIC):].partition(b"\n")
        if hashlib.sha256(payload).hexdigest().encode() != digest:
            return None
        stored_key, reports = pickle.loads(payload)
        if stored_key != key or not isinstance(reports, list):
            return None
        return reports
    except Exception:
        return None


def tag_patch(key: Optional[str]):
    """torch.compiler.config.patch(cache_key_tag=...) with heddle's key appended, where this torch has the
    option (2.5+); otherwise None (the caller then keeps torch's AOTAutograd cache off: without the tag heddle's
    entries would share keys with inductor's)."""
    try:
        import torch.compiler.config as cconfig
    except ImportError:
        return None
    if key is None or not hasattr(cconfig, "cache_key_tag"):
        return None
    return cconfig.patch(cache_key_tag=f"{cconfig.cache_key_tag}|heddle:{key}")


def aot_cache_hits() -> int:
    """torch's count of AOTAutograd cache hits in this process."""
    from ..core.torch_compat import aot_autograd_cache_hits
    return aot_autograd_cache_hits()
