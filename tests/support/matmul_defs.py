"""Helpers shared by the lowering, compile and GPU tests: a matmul + epilogue fusion with a
schedule built through the public scheduling API."""
import heddle

LAYOUTS = {"NN": (False, False), "NT": (False, True), "TN": (True, False), "TT": (True, True)}


def matmul_fusion(m="M", n=256, k=128, dtype="f16", layout="NN", epilogue="bias_gelu", batched=False):
    ta, tb = LAYOUTS[layout]
    fd = heddle.Fusion()
    bshape = ["B"] if batched else []
    a = fd.input("a", dtype, bshape + ([k, m] if ta else [m, k]))
    b = fd.input("b", dtype, bshape + ([n, k] if tb else [k, n]))
    y = fd.matmul(a, b, ta, tb)
    if epilogue == "bias_gelu":
        y = heddle.ops.gelu(y + fd.input("bias", dtype, [n]))
    elif epilogue == "silu_scale":
        y = heddle.ops.silu(y * 0.5)
    elif epilogue == "bias_tanh":   # BERT's pooler
        y = heddle.ops.tanh(y * 0.25 + fd.input("bias", dtype, [n]))
    elif epilogue == "bias_gelu_saved":  # training: the pre-activation is a second output (saved for the backward)
        pre = y + fd.input("bias", dtype, [n])
        fd.output(heddle.ops.gelu(pre).to(dtype))
        fd.output(pre.to(dtype))
        return fd, a, b
    fd.output(y.to(dtype))
    return fd, a, b


def schedule(fd, a, b, bm=128, bn=128, bk=32, wm=2, wn=2, stages=4, prefetch=-1, kind="cp_async"):
    mm = fd.schedule()
    mm.split("m", bm).split("n", bn).split("k", bk).split("m.i", bm // wm).split("n.i", bn // wn)
    if len(mm.shape) == 3:
        mm.parallelize("b", "BIDz")
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
    mm.parallelize("m.i.o", "warp").parallelize("n.i.o", "warp")
    mm.reorder((["b"] if len(mm.shape) == 3 else []) + ["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"])
    for t in (a, b):
        c = fd.cache_after(t, kind)
        if stages > 1:
            c.circular_buffer(stages, prefetch)
    return mm


def walk(structure):
    """Flatten the lowered kernel's structure (nested dicts) in program order."""
    for n in structure:
        yield n
        if n["kind"] == "for":
            yield from walk(n["body"])


def loops(lowered):
    return [n for n in walk(lowered.structure) if n["kind"] == "for"]


def syncs_in(nodes):
    return [(n["sync"], n["arg"]) for n in nodes if n["kind"] == "sync" and n["sync"] != "cp.async.commit_group"]
