"""The eager path heddle.grouped_mm, grouped_mm_gated and grouped_mm_masked share (docs/grouped.md "Eager calls",
docs/runtime.md "Eager calls"): each function has a front of its own (a CallTable keyed by the whole call, as
heddle.matmul's and heddle.scaled_mm's), which launches a repeated plain eager call of a planned signature in one
C++ call through the plan the grouped kernel's first launch left. A call the front misses runs every check, then
`eager` below: a plain eager call (eager_call_ok) runs the kernel without the op layer and is keyed for the next.

What the key holds: the tensors' signatures (shape, strides, dtype, device, address modulo 16) and the other
arguments by value. The group ends / row counts are values the kernel reads on the device: a new offs (counts)
tensor of the same signature takes the same plan with its own address, never keyed by what it holds."""
from __future__ import annotations

from .matmul import call_table, eager_call_ok

__all__ = ["call_table", "eager"]


def eager(table, call: tuple, tensors, pick, run, kernel):
    """A plain eager call's output without the op layer, or None: the caller goes through the op (traced,
    compiled, in a mode, a gradient to record, not plain tensors). call: the function's arguments as the front
    keys them; tensors: the kernel's (views of the call's tensors at their addresses: a transposed w, a
    per-expert bias unsqueezed); pick: each kernel tensor's argument position in `call`; run(): the op's
    implementation on `tensors`; kernel(): the compiled kernel they launch, None off CUDA (the interpreter or
    torch: no plan to key). A call launched through the kernel's plan is keyed in `table`."""
    if not eager_call_ok(tensors, tensors[0].device.type):
        return None
    k = kernel()
    if k is None:
        return run()
    out = k(*tensors)  # its plan, else the kernel's full path (checks, a new plan)
    table.adopt(call, k._plans, tensors, pick)  # False (not keyed): no plan (an empty problem)
    return out
