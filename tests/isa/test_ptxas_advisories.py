"""ptxas advisories that mean slow or wrong code (issue 28 item 5): a serialised wgmma pipeline (C7510,
C7514, C7515, an injected warpgroup.arrive C7519) or an ignored instruction (setmaxnreg, C7508) is a parsed
flag of the stats (`wgmma_serialized`, `advisories`), which Kernel.build refuses with a ScheduleError naming
the advisory and what to change, and which the autotuner drops. The reports below are ptxas's wording."""
import types

import pytest

import heddle
from support.env import requires_nvrtc
from heddle import autotune as at
from heddle.core.kernel import _refuse_advisories

parse = heddle._C.runtime.parse_ptxas

HEAD = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 0 bytes smem, 400 bytes cmem[0]
"""
ADVISORIES = {
    "C7514": "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
             "non wgmma instructions reading accumulator registers of a wgmma between start and end of the pipeline "
             "stage in the function 'k'",
    "C7515": "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
             "non wgmma instructions defining accumulator registers of a wgmma between start and end of the "
             "pipeline stage in the function 'k'",
    "C7510": "ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
             "wgmma pipeline crossing function boundary at a function call in the function 'k'",
    "C7519": "ptxas info    : (C7519) warpgroup.arrive is injected in between two wgmma instructions in the function "
             "'k' to allow use of registers in GMMA",
    "C7508": "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register "
             "count at entry.",
}
SERIAL = ("C7514", "C7515", "C7510", "C7519")


@pytest.mark.parametrize("code", sorted(ADVISORIES))
def test_advisory_is_a_parsed_flag(code):
    st = parse(HEAD + ADVISORIES[code] + "\n")
    assert st.registers == 168
    assert len(st.advisories) == 1 and f"({code})" in st.advisories[0]
    assert st.wgmma_serialized == (code in SERIAL)
    assert st.setmaxnreg_ignored == (code == "C7508")


def test_a_clean_report_has_no_advisory():
    st = parse(HEAD + "ptxas warning : For profile sm_80 adjusting per thread register count of 16 to lower "
                      "bound of 24\n")
    assert not st.advisories and not st.wgmma_serialized and len(st.warnings) == 1


@pytest.mark.parametrize("code", sorted(ADVISORIES))
def test_build_refuses_an_advisory(code):
    kernel = types.SimpleNamespace(name="k", stats=parse(HEAD + ADVISORIES[code] + "\n"))
    with pytest.raises(heddle.ScheduleError) as ei:
        _refuse_advisories(kernel)
    msg = str(ei.value)
    assert f"ptxas advisory {code}" in msg and "allow_spills=True" in msg
    assert ("register" in msg) if code == "C7508" else ("wgmma" in msg and "schedule" in msg)
    _refuse_advisories(types.SimpleNamespace(name="k", stats=parse(HEAD)))  # none: accepted


@requires_nvrtc
def test_autotune_drops_a_serialised_candidate(tmp_path, monkeypatch):
    bad, good = at.Config(64, 64, 32, 2, 2, 2), at.Config(64, 64, 32, 2, 2, 3)
    real = at._build_kernel

    class Serialised:  # the compiled kernel, with the report of a serialised pipeline
        def __init__(self, k):
            self.k, self.stats = k, parse(HEAD + ADVISORIES["C7514"] + "\n")

        def __getattr__(self, n):
            return getattr(self.k, n)

    def build(b, c, target, vec):
        k = real(b, c, target, vec)
        return Serialised(k) if c == bad else k

    monkeypatch.setattr(at, "_build_kernel", build)
    spec = heddle.api.MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=512, n=256, trans_a=False,
                                 trans_b=True, bias=None, residual=None, activation=None, alpha=None,
                                 out_dtype="bf16")
    timed = []

    class Timer:
        device_name = "fake-gpu"

        def __call__(self, kernel, config, problem):
            timed.append(config.key)
            return 1.0

    store = at.Store(str(tmp_path / "store.json"))
    res = at.tune(spec, "sm_80", 4096, 256, 512, space=[bad, good], timer=Timer(), store=store, progress=False)
    dropped, kept = res.candidates
    assert dropped.status == "spills" and "C7514" in dropped.reason and "serialized" in dropped.reason
    assert kept.status == "ok" and timed == [good.key] and res.best == good
