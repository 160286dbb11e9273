"""The MatmulSpec of the bucket tests (tests/runtime/test_matmul_buckets.py), shared with the stream-K tests:
a bf16 x @ w.T + bias with an activation, as heddle.matmul builds it."""
from heddle.api import MatmulSpec


def spec(n=4096, k=4096, activation="gelu"):
    return MatmulSpec(dtype="bf16", batched=False, batched_b=False, k=k, n=n, trans_a=False, trans_b=True,
                      bias=("bf16", 1), residual=None, activation=activation, alpha=None, out_dtype="bf16")
