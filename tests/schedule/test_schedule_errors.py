"""Schedule validation: one test per rule (docs/sync-cases.md cases 1, 3, 4 and the scheduling rules).

CPU only. Each test asserts the exception type and that the message names the tensor and/or the axis or
option and says what would be valid. Whole-schedule rules run in validate(); the shared-memory limit
is checked by lower(); launch-time rules (K >= 1 for TMA + wgmma) by LoweredKernel.check_launch().
"""
import pytest

import heddle

ScheduleError = heddle.ScheduleError
InputError = heddle.InputError
C = heddle._C

ORDER = ["m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"]


def validate(fd, target="sm_80", vec_a=8, vec_b=8):
    """Fusion.validate when the Python API has it, else the C++ Fusion's."""
    v = getattr(fd, "validate", None)
    if v is not None:
        return v(target, vec_a, vec_b) if (vec_a, vec_b) != (8, 8) else v(target)
    return fd._f.validate(target, vec_a, vec_b)


def make(M=1024, N=1024, K=1024, batch=None, dt="bf16"):
    fd = heddle.Fusion()
    a = fd.input("a", dt, ([batch] if batch else []) + [M, K])
    b = fd.input("b", dt, [K, N])
    fd.output(fd.matmul(a, b).to(dt))
    return fd, a, b


def tile(fd, bm=128, bn=128, bk=32, wm=2, wn=2, order=True):
    """The loop part of autoScheduleMatmul's recipe, by hand."""
    mm = fd.schedule()
    mm.split("m", bm).split("n", bn).split("k", bk).split("m.i", bm // wm).split("n.i", bn // wn)
    if "b" in mm.axes:
        mm.parallelize("b", "BIDz")
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
    mm.parallelize("m.i.o", "warp").parallelize("n.i.o", "warp")
    if order:
        mm.reorder((["b"] if "b" in mm.axes else []) + ORDER)
    return mm


def caches(fd, a, b, kind="cp_async", stages=4, prefetch=-1):
    ca, cb = fd.cache_after(a, kind), fd.cache_after(b, kind)
    if stages:
        ca.circular_buffer(stages, prefetch)
        cb.circular_buffer(stages, prefetch)
    return ca, cb


def scheduled(kind="cp_async", stages=4, prefetch=-1, **tile_kw):
    fd, a, b = make()
    mm = tile(fd, **tile_kw)
    ca, cb = caches(fd, a, b, kind, stages, prefetch)
    return fd, mm, ca, cb


def test_baseline_schedule_is_valid():
    fd, mm, ca, cb = scheduled()
    assert validate(fd) == ("tile 128x128x32, warps 2x2 (128 threads), cp_async vec 8/8, "
                            "circular_buffer(stages=4, prefetch=3), layout NN")


# --- circular_buffer options (docs/sync-cases.md case 1) --------------------------------------------------------

CB_CASES = [(s, p) for s in (2, 3, 4, 5, 9) for p in range(-s, s)]


@pytest.mark.parametrize("s,p", CB_CASES, ids=[f"s{s}p{p}" for s, p in CB_CASES])
def test_circular_buffer_normalisation(s, p):
    fd, a, b = make()
    ca = fd.cache_after(a, "cp_async")
    ca.circular_buffer(s, p)
    assert ca.circular == (s, p + s if p < 0 else p)
    assert 0 <= ca.circular[1] < s


def test_circular_buffer_default_prefetch_is_stages_minus_one():
    fd, a, b = make()
    ca = fd.cache_after(a)
    ca.circular_buffer(5)
    assert ca.circular == (5, 4)
    assert fd.cache_after(b).circular == (0, 0)  # not buffered


@pytest.mark.parametrize("s,p", [(2, 2), (4, 4), (4, 7), (9, 9), (3, -4), (5, -6)])
def test_circular_buffer_prefetch_out_of_range(s, p):
    fd, a, b = make()
    ca = fd.cache_after(a)
    with pytest.raises(ScheduleError) as ei:
        ca.circular_buffer(s, p)
    msg = str(ei.value)
    assert f"circular_buffer(a_smem, stages={s}, prefetch={p})" in msg
    assert f"prefetch must be in [{-s}, {s - 1}]" in msg
    assert "negative means stages+prefetch" in msg
    assert ca.circular == (0, 0)  # unchanged


@pytest.mark.parametrize("s", [1, 0, -2])
def test_circular_buffer_stages_at_least_two(s):
    fd, a, b = make()
    ca = fd.cache_after(a)
    with pytest.raises(ScheduleError) as ei:
        ca.circular_buffer(s, 0)
    msg = str(ei.value)
    assert f"circular_buffer(a_smem, stages={s})" in msg and "stages must be >= 2" in msg
    assert "use stages=2 or more" in msg


@pytest.mark.parametrize("which", ["input", "matmul", "epilogue"])
def test_circular_buffer_on_non_cache_tensor(which):
    """docs/sync-cases.md case 4: a producer computed inside the buffered loop cannot be circular-buffered."""
    fd, a, b = make()
    t = {"input": a, "matmul": fd.matmul_tensor, "epilogue": fd.outputs[0]}[which]
    with pytest.raises(ScheduleError) as ei:
        t.circular_buffer(3, 1)
    msg = str(ei.value)
    assert f"circular_buffer({t.name}, stages=3, prefetch=1)" in msg
    assert "computed inside the loop it would be buffered across" in msg
    assert "cache_after(input, ...)" in msg


@pytest.mark.parametrize("opts_b", [(3, -1), (4, 1), None], ids=["stages", "prefetch", "unbuffered"])
def test_two_caches_different_buffer_options(opts_b):
    """docs/sync-cases.md case 4: two tensors on one loop with different buffer options."""
    fd, a, b = make()
    tile(fd)
    ca, cb = fd.cache_after(a), fd.cache_after(b)
    ca.circular_buffer(4, 3)
    if opts_b:
        cb.circular_buffer(*opts_b)
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "a_smem (stages=4, prefetch=3)" in msg
    assert f"b_smem (stages={cb.circular[0]}, prefetch={cb.circular[1]})" in msg
    assert "same k loop with different options" in msg and "same stages and prefetch" in msg


def test_cache_kinds_differ():
    fd, a, b = make()
    tile(fd)
    fd.cache_after(a, "cp_async")
    fd.cache_after(b, "plain")
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "a_smem (cp_async)" in msg and "b_smem (plain)" in msg and "use one kind for both" in msg


# --- load kinds and targets -----------------------------------------------------------------------

def test_tma_load_on_sm80_rejected_with_advice():
    fd, mm, ca, cb = scheduled(kind="tma_load")
    with pytest.raises(ScheduleError) as ei:
        validate(fd, "sm_80")
    msg = str(ei.value)
    assert "cache a_smem" in msg and "tma_load" in msg
    assert "sm_90a or newer" in msg and "sm_80 has none" in msg and "use 'cp_async'" in msg


def test_tma_load_on_sm90a_needs_warpgroup_tiles():
    """The Hopper path (docs/hopper.md) lowers tma_load; a 2x2 warp grid is not a wgmma split."""
    fd, mm, ca, cb = scheduled(kind="tma_load")
    with pytest.raises(ScheduleError) as ei:
        validate(fd, "sm_90a")
    msg = str(ei.value)
    assert "warps split n" in msg and "warpgroup MMA computes 64-row slabs" in msg


def test_cp_async_on_target_without_it():
    fd, mm, ca, cb = scheduled()
    with pytest.raises(ScheduleError, match=r"cache a_smem: load kind cp_async is not available on gfx90a; "
                                            r"use 'async_lds' or 'plain'"):
        validate(fd, "gfx90a")


def test_tma_cache_axes_cannot_be_bound_to_threads():
    """docs/sync-cases.md case 4 'TMA load with a thread-predicated issue': the rule lives in validate (a cache
    axis bound to TIDx/TIDy/warp), but a cache has no loop domain of its own, so the API cannot bind one: the attempt
    is refused before validation with an error that says caches follow their consumer."""
    fd, mm, ca, cb = scheduled(kind="tma_load")
    assert ca.axes == [] and ca.domain == "[]"
    for op in (lambda: ca.parallelize("m", "TIDx"), lambda: ca.split("m", 2)):
        with pytest.raises(ScheduleError) as ei:
            op()
        msg = str(ei.value)
        assert "a_smem has no loop domain" in msg and "caches follow their consumer" in msg
    with pytest.raises(ScheduleError, match=r"schedule\(a_smem\): only the matmul tensor carries a loop schedule"):
        fd._f.init_schedule(ca._tv)


def test_unknown_target_lists_known_ones():
    fd, mm, ca, cb = scheduled()
    with pytest.raises(ScheduleError) as ei:
        validate(fd, "sm_75")
    msg = str(ei.value)
    assert "unknown target 'sm_75'" in msg
    for t in ("sm_80", "sm_90a", "sm_100a", "gfx90a", "gfx942", "gfx1200"):
        assert t in msg


def test_cp_async_needs_four_byte_copies():
    fd, mm, ca, cb = scheduled()
    with pytest.raises(InputError) as ei:
        validate(fd, "sm_80", 1, 8)
    msg = str(ei.value)
    assert "cache a_smem" in msg and "only allows 2-byte accesses" in msg and "'plain'" in msg


# --- warp_specialize (docs/sync-cases.md case 3) -------------------------------------------------------------------

@pytest.mark.parametrize("prod,cons", [(40, 232), (64, 168), (64, 104)])
def test_register_budgets_accepted(prod, cons):
    C.validate_roles({"load": {"warps": 1, "registers": prod},
                      "mma": {"warpgroups": 2, "registers": cons}})


@pytest.mark.parametrize("regs,suggest", [(20, 24), (100, 104), (264, 256)])
def test_register_budget_out_of_range_or_not_multiple_of_8(regs, suggest):
    with pytest.raises(ScheduleError) as ei:
        C.validate_roles({"load": {"warps": 1, "registers": regs},
                          "mma": {"warpgroups": 2, "registers": 232}})
    msg = str(ei.value)
    assert f"warp_specialize(roles): role 'load' asks for {regs} registers" in msg
    assert "24..256 in multiples of 8" in msg and f"e.g. {suggest}" in msg


def test_register_budget_consumer_out_of_range():
    with pytest.raises(ScheduleError, match=r"role 'mma' asks for 264 registers; setmaxnreg takes 24\.\.256"):
        C.validate_roles({"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 2, "registers": 264}})


@pytest.mark.parametrize("producer", ["load", "producer"])
def test_producer_registers_above_consumer_rejected(producer):
    with pytest.raises(ScheduleError) as ei:
        C.validate_roles({producer: {"warps": 1, "registers": 232}, "mma": {"warpgroups": 2, "registers": 40}})
    msg = str(ei.value)
    assert "producer role asks for 232 registers, more than a consumer's 40" in msg
    assert "fewer registers than the consumers" in msg


def test_roles_need_two_roles():
    with pytest.raises(ScheduleError, match=r"needs at least two roles .* got 1"):
        C.validate_roles({"load": 1})


def test_role_needs_a_warp():
    with pytest.raises(ScheduleError, match=r"role 'load' has 0 warps; each role needs at least one warp"):
        C.validate_roles({"load": 0, "mma": 4})


def test_role_unknown_option():
    with pytest.raises(ScheduleError) as ei:
        C.validate_roles({"load": {"warps": 1, "regs": 40}, "mma": 4})
    msg = str(ei.value)
    assert "role 'load' has unknown option 'regs'" in msg and "warps=, warpgroups=, registers= and (the sm_100a epilogue) stages=" in msg


@pytest.mark.parametrize("roles,says", [
    ({"load": "one", "mma": 4}, "role 'load' is 'one'"),
    ({"load": {"warps": 1, "registers": "40"}, "mma": 4}, "role 'load' registers='40' is not an int"),
    ({"load": {"warps": 1.5}, "mma": 4}, "role 'load' warps=1.5 is not an int"),
    ({"load": True, "mma": 4}, "role 'load' warps=True is not an int"),
    ([("load", 1), ("mma", 4)], "roles must be a dict"),
    ({1: 1, "mma": 4}, "role names are strings"),
])
def test_roles_of_the_wrong_type_are_schedule_errors(roles, says):
    with pytest.raises(ScheduleError) as ei:  # heddle's error, not pybind's cast error or TypeError
        C.validate_roles(roles)
    assert says in str(ei.value)


ROLES = {"load": {"warps": 1, "registers": 40}, "mma": {"warpgroups": 2, "registers": 232}}


def test_warp_specialize_on_sm80_rejected_at_validate():
    fd, mm, ca, cb = scheduled()
    mm.warp_specialize(ROLES)  # the roles themselves are fine
    with pytest.raises(ScheduleError) as ei:
        validate(fd, "sm_80")
    msg = str(ei.value)
    assert f"warp_specialize({mm.name})" in msg and "sm_90a or newer" in msg and "drop warp_specialize" in msg


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_warp_specialize_needs_tma_caches(target):
    """Roles hand tiles over through mbarrier rings fed by TMA (the Hopper lowering, docs/hopper.md)."""
    fd, mm, ca, cb = scheduled()
    mm.warp_specialize(ROLES)
    with pytest.raises(ScheduleError) as ei:
        validate(fd, target)
    msg = str(ei.value)
    assert "fed by TMA" in msg and "cache_after(a, 'tma_load')" in msg and "drop warp_specialize" in msg


def test_warp_specialize_only_on_the_matmul():
    fd, a, b = make()
    with pytest.raises(ScheduleError, match=r"warp_specialize\(a\): roles are set on the matmul tensor"):
        a.warp_specialize(ROLES)


def test_warp_specialize_validates_roles_when_set():
    fd, a, b = make()
    mm = fd.matmul_tensor
    with pytest.raises(ScheduleError, match=rf"warp_specialize\({mm.name}\): role 'mma' asks for 100 registers"):
        mm.warp_specialize({"load": 1, "mma": {"warps": 4, "registers": 100}})


# --- split / reorder / parallelize ------------------------------------------------------------------

@pytest.mark.parametrize("factor", [0, -4])
def test_split_factor_must_be_positive(factor):
    fd, a, b = make()
    mm = fd.schedule()
    with pytest.raises(ScheduleError) as ei:
        mm.split("m", factor)
    msg = str(ei.value)
    assert f"split({mm.name}, 'm', {factor})" in msg and "factor must be positive" in msg


def test_split_of_bound_axis():
    fd, a, b = make()
    mm = fd.schedule()
    mm.split("m", 128).parallelize("m.o", "BIDy")
    with pytest.raises(ScheduleError) as ei:
        mm.split("m.o", 2)
    msg = str(ei.value)
    assert f"split({mm.name}, 'm.o')" in msg and "already bound to BIDy" in msg and "split before parallelize" in msg


def test_split_tile_axis_by_non_divisor():
    fd, a, b = make()
    mm = fd.schedule()
    mm.split("m", 128)
    with pytest.raises(ScheduleError) as ei:
        mm.split("m.i", 48)
    msg = str(ei.value)
    assert "'m.i', 48" in msg and "extent 128" in msg and "pick a divisor of 128" in msg


@pytest.mark.parametrize("op", ["split", "parallelize", "reorder"])
def test_unknown_axis_lists_the_axes(op):
    fd, a, b = make()
    mm = fd.schedule()
    mm.split("m", 128)
    with pytest.raises(ScheduleError) as ei:
        {"split": lambda: mm.split("x", 2), "parallelize": lambda: mm.parallelize("x", "BIDx"),
         "reorder": lambda: mm.reorder(["x", "m.o"])}[op]()
    msg = str(ei.value)
    assert f"{op}({mm.name}, 'x'): no such axis" in msg
    assert "[m.o{8}, m.i{128}, n{1024}, k(r){1024}]" in msg


def test_reorder_axis_named_twice():
    fd, a, b = make()
    mm = fd.schedule()
    with pytest.raises(ScheduleError, match=rf"reorder\({mm.name}\): axis 'm' is named twice"):
        mm.reorder(["m", "m"])


def test_schedule_ops_need_a_loop_domain():
    fd, a, b = make()
    mm = fd.matmul_tensor  # schedule() not called yet
    with pytest.raises(ScheduleError, match=rf"split\({mm.name}\): {mm.name} has no loop domain"):
        mm.split("m", 128)


def test_schedule_on_epilogue_tensor_rejected():
    fd, a, b = make()
    out = fd.outputs[0]
    with pytest.raises(ScheduleError) as ei:
        fd._f.init_schedule(out._tv)
    msg = str(ei.value)
    assert f"schedule({out.name})" in msg and "only the matmul tensor carries a loop schedule" in msg


@pytest.mark.parametrize("axis,par", [("k.o", "BIDx"), ("k.i", "warp"), ("k.o", "BIDz"), ("k.i", "TIDx")])
def test_parallelize_reduction_axis_is_split_k(axis, par):
    fd, a, b = make()
    mm = fd.schedule()
    mm.split("k", 32)
    with pytest.raises(ScheduleError) as ei:
        mm.parallelize(axis, par)
    msg = str(ei.value)
    assert f"parallelize({mm.name}, '{axis}', {par})" in msg
    assert "reduction (k) axis" in msg and "split_k(S)" in msg and "keep k axes serial" in msg
    assert "not supported" not in msg  # split-K is: split_k(S) (docs/scheduling.md)


def test_unrolling_the_k_tile_loop_is_refused():
    fd, a, b = make()
    mm = fd.schedule()
    mm.split("k", 32)
    with pytest.raises(ScheduleError) as ei:
        mm.parallelize("k.o", "unroll")
    msg = str(ei.value)
    assert f"parallelize({mm.name}, 'k.o', unroll)" in msg and "k-tile loop" in msg and "never unrolls" in msg
    assert "Keep 'k.o' serial" in msg
    mm.parallelize("k.i", "unroll")  # the k-steps inside a tile: unrolled already, accepted
    assert "k.i(r){32}(unroll)" in mm.domain


def test_block_index_on_inner_axis():
    fd, a, b = make()
    mm = fd.schedule()
    mm.split("m", 128)
    with pytest.raises(ScheduleError) as ei:
        mm.parallelize("m.i", "BIDy")
    msg = str(ei.value)
    assert f"parallelize({mm.name}, 'm.i', BIDy)" in msg and "outer part of a split" in msg
    assert "bind 'm.o'" in msg


@pytest.mark.parametrize("axis,par", [("m", "warp"), ("m.o", "warp"), ("m.o", "TIDx")])
def test_warp_or_thread_axis_with_symbolic_extent(axis, par):
    fd, a, b = make(M="M")
    mm = fd.schedule()
    if axis != "m":
        mm.split("m", 128)
    with pytest.raises(ScheduleError) as ei:
        mm.parallelize(axis, par)
    msg = str(ei.value)
    assert f"parallelize({mm.name}, '{axis}', {par})" in msg and "need a constant extent" in msg
    assert f"split '{axis}' by a constant first" in msg


def test_two_axes_to_one_block_index():
    fd, a, b = make()
    mm = fd.schedule()
    mm.split("m", 128).split("n", 128).parallelize("m.o", "BIDx")
    with pytest.raises(ScheduleError) as ei:
        mm.parallelize("n.o", "BIDx")
    msg = str(ei.value)
    assert f"parallelize({mm.name}, 'n.o', BIDx)" in msg and "axis 'm.o' is already bound to BIDx" in msg
    assert "each parallel type binds one axis" in msg


def test_unknown_parallel_type_lists_valid_ones():
    fd, a, b = make()
    mm = fd.schedule()
    with pytest.raises(ScheduleError) as ei:
        mm.parallelize("m", "blockIdx.w")
    msg = str(ei.value)
    assert "unknown parallel type 'blockIdx.w'" in msg
    for p in ("serial", "BIDx", "BIDy", "BIDz", "TIDx", "warp", "unroll", "vectorize"):
        assert p in msg


# --- whole-schedule rules (validate) ---------------------------------------------------------------

def test_unscheduled_matmul():
    fd, a, b = make()
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "is not scheduled" in msg and "auto_schedule()" in msg


@pytest.mark.parametrize("missing", ["m", "n"])
def test_m_and_n_must_bind_blocks(missing):
    fd, a, b = make()
    caches(fd, a, b)
    mm = fd.schedule()
    mm.split("m", 128).split("n", 128).split("k", 32)
    mm.parallelize("n.o" if missing == "m" else "m.o", "BIDx" if missing == "m" else "BIDy")
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert f"schedule of {mm.name}" in msg and f"bind no {missing} tile to a block index" in msg
    assert "bind the outer parts to BIDy and BIDx" in msg


def test_bidz_reserved_for_batch():
    fd, a, b = make()
    caches(fd, a, b)
    mm = fd.schedule()
    mm.split("m", 128).split("n", 128).split("k", 32).parallelize("m.o", "BIDz").parallelize("n.o", "BIDx")
    with pytest.raises(ScheduleError, match=r"BIDz is reserved for the batch axis 'b'; bind m and n tiles to BIDy/BIDx"):
        validate(fd)


def test_batch_axis_must_bind_bidz():
    fd, a, b = make(batch=4)
    caches(fd, a, b)
    mm = fd.schedule()
    assert mm.axes == ["b", "m", "n", "k"]
    mm.split("m", 128).split("n", 128).split("k", 32).parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "batch axis 'b' must be bound to BIDz" in msg and f"parallelize({mm.name}, 'b', 'BIDz')" in msg


def test_thread_binding_on_matmul_axis_rejected():
    fd, a, b = make()
    caches(fd, a, b)
    mm = fd.schedule()
    mm.split("m", 128).split("n", 128).split("k", 32).parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
    mm.parallelize("m.i", "TIDx")
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "axis 'm.i' is bound to TIDx" in msg and "with 'warp' instead" in msg


def test_k_not_split():
    fd, a, b = make()
    caches(fd, a, b)
    mm = fd.schedule()
    mm.split("m", 128).split("n", 128).parallelize("m.o", "BIDy").parallelize("n.o", "BIDx")
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert f"schedule of {mm.name}: 'k' is not split" in msg and "(16, 32 or 64)" in msg


def test_k_split_twice():
    fd, mm, ca, cb = scheduled()
    mm.split("k.o", 2)
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "k is split more than once" in msg and "k.o.o" in msg and "split 'k' once by the k-tile" in msg


@pytest.mark.parametrize("bk", [8, 48, 128])
def test_k_tile_must_be_16_32_or_64(bk):
    fd, mm, ca, cb = scheduled(bk=bk)
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert f"k-tile {bk} is not supported" in msg and "use 16, 32 or 64" in msg


def test_k_loop_outside_block_axes():
    fd, mm, ca, cb = scheduled(order=False)
    mm.reorder(["k.o", "m.o", "n.o"])
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "the k loop 'k.o' is outside a block axis" in msg and "block axes come first" in msg


def test_warp_axis_outside_k_loop():
    fd, mm, ca, cb = scheduled(order=False)
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "a warp axis is outside the k loop" in msg and "reorder the k-tile loop before the warp axes" in msg


def test_warp_axis_must_split_the_block_tile():
    fd, a, b = make()
    caches(fd, a, b)
    mm = fd.schedule()
    mm.split("m", 128).split("n", 128).split("k", 32).split("m.i", 64)
    mm.parallelize("m.o", "BIDy").parallelize("n.o", "BIDx").parallelize("m.i.i", "warp")
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "warp axis 'm.i.i' does not split the block tile" in msg and "bind its outer part to 'warp'" in msg


@pytest.mark.parametrize("side", ["m", "n"])
def test_warp_tile_multiple_of_16(side):
    kw = dict(bm=64, wm=8) if side == "m" else dict(bn=64, wn=8)
    fd, mm, ca, cb = scheduled(**kw)
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert f"{side} tile 64 over 8 warps" in msg and "not multiples of 16" in msg
    assert f"{side} tile divisible by 128" in msg


def test_too_many_threads():
    fd, mm, ca, cb = scheduled(bm=256, bn=256, wm=8, wn=8)
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert "2048 threads per block exceed sm_80's 1024" in msg and "use fewer warps" in msg


@pytest.mark.parametrize("missing", ["a", "b"])
def test_caches_missing(missing):
    fd, a, b = make()
    tile(fd)
    fd.cache_after(b if missing == "a" else a)
    with pytest.raises(ScheduleError) as ei:
        validate(fd)
    msg = str(ei.value)
    assert f"operand {missing} has no shared-memory cache" in msg
    assert f"call cache_after({missing}, 'cp_async')" in msg


def test_cache_after_non_input():
    fd, a, b = make()
    mm = fd.matmul_tensor
    with pytest.raises(ScheduleError) as ei:
        fd.cache_after(mm)
    msg = str(ei.value)
    assert f"cache_after({mm.name}): only fusion inputs can be cached" in msg and "matmul operand" in msg


def test_cache_after_twice():
    fd, a, b = make()
    fd.cache_after(a)
    with pytest.raises(ScheduleError) as ei:
        fd.cache_after(a, "plain")
    msg = str(ei.value)
    assert "cache_after(a): a already has cache a_smem" in msg and "schedule that tensor" in msg


def test_unknown_load_kind():
    fd, a, b = make()
    with pytest.raises(ScheduleError) as ei:
        fd.cache_after(a, "ldg")
    msg = str(ei.value)
    assert "unknown load kind 'ldg'" in msg and "'plain', 'cp_async' or 'tma_load'" in msg
    assert fd.caches_of(a) == []


# --- lowering and launch rules ---------------------------------------------------------------------

def test_smem_over_limit_lists_buffers():
    """docs/sync-cases.md case 4: the error lists the buffers with their bytes and the largest stage count that fits."""
    # 128x256 on 2x4 warps: 64x64 warp tiles (a 256x256 tile's 65,536 accumulators fill the register file)
    fd, mm, ca, cb = scheduled(bm=128, bn=256, bk=64, wm=2, wn=4, stages=9)
    validate(fd)  # a valid schedule: the limit is checked when shared memory is planned
    with pytest.raises(ScheduleError) as ei:
        fd.lower("sm_80")
    msg = str(ei.value)
    per_a, per_b = 9 * 128 * 64 * 2, 9 * 64 * 256 * 2
    assert f"needs {per_a + per_b} bytes but sm_80 allows 166912 per block" in msg
    assert f"sA: {per_a} bytes" in msg and f"sB: {per_b} bytes" in msg
    assert "use circular_buffer(stages=3) (147456 bytes; the largest stage count that fits)" in msg
    fd2, mm2, ca2, cb2 = scheduled(bm=128, bn=256, bk=64, wm=2, wn=4, stages=3)
    assert fd2.lower("sm_80").smem_bytes == 147456  # the advice is true


def test_smem_limit_depends_on_target():
    fd, mm, ca, cb = scheduled(bm=128, bn=256, bk=64, wm=2, wn=4, stages=4)
    # 4 * (128*64 + 64*256) * 2 = 196608 bytes: over sm_80's 163 KiB, under sm_90a's 227 KiB
    with pytest.raises(ScheduleError, match=r"needs 196608 bytes but sm_80 allows 166912"):
        fd.lower("sm_80")
    assert fd.lower("sm_90a").smem_bytes == 196608


def _lowered_symbolic():
    fd, a, b = make(M="M", N="N", K="K")
    fd.auto_schedule("sm_80")
    return fd.lower("sm_80")


@pytest.mark.parametrize("K", [32, 64, 96, 128, 160])
def test_pipelined_loop_of_any_trip_count_launches_and_computes(K):
    # 4 stages and 1, 2, 3 k-tiles: no launch refusal; the numbers match float64 torch (the simulator)
    import torch
    from heddle import verify
    low = _lowered_symbolic()
    assert "stages=4" in low.schedule
    low.check_launch({"M": 64, "N": 64, "K": K, "batch": 1})
    g = torch.Generator().manual_seed(K)
    ins = [torch.randn(64, K, generator=g).bfloat16(), torch.randn(K, 64, generator=g).bfloat16()]
    r = verify.simulate(low, ins, "random", 1)
    assert r.ok, r.report()


def test_tma_pipeline_still_needs_one_k_tile():
    fd, a, b = make(M="M", N="N", K="K")
    fd.auto_schedule("sm_90a")
    low = fd.lower("sm_90a")
    low.check_launch({"M": 64, "N": 64, "K": 1, "batch": 1})
    with pytest.raises(InputError) as ei:
        low.check_launch({"M": 64, "N": 64, "K": 0, "batch": 1})
    msg = str(ei.value)
    assert "K=0 gives 0 iteration(s) of the k loop" in msg and "needs at least 1" in msg and "K >= 1" in msg
