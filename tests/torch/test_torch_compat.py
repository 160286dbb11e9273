"""heddle.core.torch_compat: every private torch API heddle uses, in one module (issue 27: the GPU machine has
torch 2.11, CI 2.13). Each call is run on the installed torch, and its fallback with the internal taken away
(what an older or newer release that moved it would do); no other heddle module names a private torch API."""
import io
import pathlib
import tokenize
import types

import torch

import heddle
from heddle.core import torch_compat as compat

PACKAGE = pathlib.Path(heddle.__file__).parent


def private_torch_names(path):
    """(line, dotted name) of every torch.<...>._private name in the code of `path` (not its strings/comments)."""
    toks = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    found = []
    for i, t in enumerate(toks):
        if t.type == tokenize.NAME and t.string == "torch" and (i == 0 or toks[i - 1].string != "."):
            chain, j = ["torch"], i + 1
            while j + 1 < len(toks) and toks[j].string == "." and toks[j + 1].type == tokenize.NAME:
                chain.append(toks[j + 1].string)
                j += 2
            if any(c.startswith("_") for c in chain[1:]):
                found.append((t.start[0], ".".join(chain)))
    return found


def test_no_other_heddle_module_names_a_private_torch_api(tmp_path):
    offenders = [f"{p.relative_to(PACKAGE)}:{line}: {name}" for p in sorted(PACKAGE.rglob("*.py"))
                 if p.name != "torch_compat.py" for line, name in private_torch_names(p)]
    assert offenders == [], "reach these through heddle.core.torch_compat (one function each, with the torch " \
                            "releases it was checked on and its fallback):\n" + "\n".join(offenders)
    probe = tmp_path / "probe.py"  # the scan sees each spelling
    probe.write_text("import torch._dynamo\nfrom torch.utils._pytree import tree_leaves\nx = torch._C._foo\n"
                     "# torch._in_a_comment\ny = 'torch._in_a_string'\nz = torch.ops.aten.mm\n")
    assert [n for _, n in private_torch_names(probe)] == ["torch._dynamo", "torch.utils._pytree", "torch._C._foo"]


def test_the_installed_torch_is_one_the_calls_were_checked_on():
    major, minor = compat.torch_version()
    assert f"{major}.{minor}" in compat.CHECKED, (
        f"torch {torch.__version__}: read heddle/core/torch_compat.py's calls against this release's sources, "
        "fix what moved, and add it to CHECKED")


# --- each call on the installed torch ---------------------------------------------------------------

def test_torch_c_accessors_and_mode_queries():
    assert compat.cuda_current_device() is getattr(torch._C, "_cuda_getDevice", None)
    assert compat.cuda_raw_stream() is getattr(torch._C, "_cuda_getCurrentRawStream", None)
    queries = compat.mode_queries()
    assert len(queries) == 3 and not any(q() for q in queries)
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Mode():
        assert queries[0]()
    with torch.overrides.TorchFunctionMode():
        assert queries[1]()
    assert torch.func.vmap(lambda x: torch.tensor(float(bool(queries[2]()))) + x)(torch.zeros(2)).tolist() == [1, 1]


def test_torch_c_fallbacks(monkeypatch):
    monkeypatch.delattr(torch._C, "_cuda_getDevice", raising=False)
    monkeypatch.delattr(torch._C, "_cuda_getCurrentRawStream", raising=False)
    assert compat.cuda_current_device() is None and compat.cuda_raw_stream() is None
    monkeypatch.delattr(torch._C, "_are_functorch_transforms_active")
    assert all(q() for q in compat.mode_queries())  # every heddle.matmul call then takes the custom op


def test_ops_namespace_calls(monkeypatch):
    assert isinstance(torch.ops.aten.mm.default, compat.op_overload_type())
    assert isinstance(torch.ops.heddle, compat.op_namespace_base()) and compat.ops_namespace("heddle") is torch.ops.heddle
    ns = compat.op_namespace_base()("heddle_compat_probe")
    monkeypatch.setattr(torch.ops, "_dir", list(torch.ops._dir))
    compat.install_ops_namespace("heddle_compat_probe", ns)
    try:
        assert torch.ops.heddle_compat_probe is ns and "heddle_compat_probe" in dir(torch.ops)
        monkeypatch.delattr(torch.ops, "_dir")
        compat.install_ops_namespace("heddle_compat_probe", ns)  # without the list: the attribute alone
        assert torch.ops.heddle_compat_probe is ns
    finally:
        delattr(torch.ops, "heddle_compat_probe")


def test_pytree_modes_shapes_and_tracing():
    tree = {"a": [torch.ones(1), 2], "b": (torch.zeros(2),)}
    leaves, spec = compat.tree_flatten(tree)
    assert len(compat.tree_leaves(tree)) == 3 and compat.tree_unflatten(leaves, spec)["a"][1] == 2
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = torch.ones(3)
        with compat.disable_current_modes():
            real = torch.ones(3) * 2
    assert compat.detect_fake_mode([fake]) is mode and float(real.sum()) == 6.0
    assert compat.statically_known_true(torch.tensor(2).shape == ()) and compat.is_concrete_int(3)
    gm = compat.make_fx(lambda x: torch.nn.functional.gelu(x) + 1)(torch.ones(2))
    assert any(n.op == "call_function" for n in gm.graph.nodes)


def test_dynamo_calls():
    compat.dynamo_reset()
    import torch._dynamo
    assert compat.recompile_limit() == torch._dynamo.config.recompile_limit
    assert compat.current_compile_id() is None  # outside a compile
    seen = []

    def backend(gm, inputs):
        seen.append(compat.current_compile_id())
        return gm.forward
    torch.compile(lambda x: x * 2 + 1, backend=backend)(torch.ones(2))
    compat.dynamo_reset()
    assert len(seen) == 1 and seen[0][1:] == (0, None)  # the frame's first compile, not compiled autograd


def test_dynamo_fallbacks(monkeypatch):
    assert compat.recompile_limit(types.SimpleNamespace(recompile_limit=3, cache_size_limit=5)) == 3
    assert compat.recompile_limit(types.SimpleNamespace(cache_size_limit=5)) == 5  # the older name
    assert compat.recompile_limit(types.SimpleNamespace()) == 8                    # dynamo's default
    assert compat.current_compile_id(types.SimpleNamespace()) is None
    assert compat.current_compile_id(types.SimpleNamespace(current_compile_id=lambda: object())) is None
    cid = types.SimpleNamespace(frame_id=4, frame_compile_id=1, compiled_autograd_id=None)
    assert compat.current_compile_id(types.SimpleNamespace(current_compile_id=lambda: cid)) == (4, 1, None)
    import torch._dynamo
    calls = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: calls.append(1))
    monkeypatch.delattr(torch.compiler, "reset")
    compat.dynamo_reset()
    assert calls == [1]


def test_aot_functorch_and_inductor_calls():
    aot = compat.aot_pieces()
    assert all(callable(getattr(aot, n)) for n in ("aot_autograd", "make_boxed_func",
                                                   "min_cut_rematerialization_partition"))
    ind = compat.inductor_pieces()
    assert all(callable(getattr(ind, n)) for n in ("compile_fx", "compile_fx_inner", "list_mode_options",
                                                   "select_decomp_table"))
    assert torch.ops.aten.gelu.default in ind.select_decomp_table()
    from torch._functorch import config as fconfig
    before = fconfig.unlift_effect_tokens
    with compat.functorch_config_patch(unlift_effect_tokens=not before, an_option_no_torch_has=1):
        assert fconfig.unlift_effect_tokens == (not before)
    assert fconfig.unlift_effect_tokens == before
    assert compat.inductor_config_has("max_autotune") and not compat.inductor_config_has("an_option_no_torch_has")


def test_functorch_patch_and_inner_compile_fallbacks():
    got = []
    stand_in = types.SimpleNamespace(enable_autograd_cache=True, patch=lambda **kw: got.append(kw))
    compat.functorch_config_patch(stand_in, enable_autograd_cache=False, unlift_effect_tokens=True)
    assert got == [{"enable_autograd_cache": False}]  # an option this torch lacks is dropped
    assert compat.inner_compile_kind({"is_backward": True}) == "backward"
    assert compat.inner_compile_kind({"is_inference": True}) == "inference"
    assert compat.inner_compile_kind({}) == "forward"

    def full():
        return {}
    kw_2_11 = {"is_inference": True}
    assert compat.inner_compile_kwargs(kw_2_11, full) == {"is_inference": True}  # 2.11: nothing to replace
    kw_2_13 = {"is_inference": True, "get_decomp_fn": lambda: {"withheld": 1}}
    out = compat.inner_compile_kwargs(kw_2_13, full)
    assert out["get_decomp_fn"] is full and kw_2_13["get_decomp_fn"] is not full
