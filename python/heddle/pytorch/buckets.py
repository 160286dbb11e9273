"""The M buckets of heddle.matmul and its matmul groups: one kernel per bucket of the run-time M, compiled on
first use (docs/hopper.md "M-aware choice"). A leaf module: the ops above it (matmul.py, group_op.py) share it."""

M_BUCKETS = (64, 128, 256)  # heddle.matmul compiles one kernel per bucket of M (and one for larger M)
DEFAULT_SMS = 132           # the SM count split-K fills without a GPU to ask (an H100 SXM)


def m_bucket(m: int) -> int:
    """The M bucket a run-time M falls in: 64, 128, 256, or -1 for larger (or unknown, m < 0) M."""
    for b in M_BUCKETS:
        if 0 <= m <= b:
            return b
    return -1
