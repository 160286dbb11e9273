"""heddle.matmul's op variants (tests/torch/test_dynamo_ops.py), shared with test_dynamo_export.py: every
epilogue / layout / batching kind of MatmulSpec."""
from heddle.api import MatmulSpec


def spec(dtype="bf16", batched=False, batched_b=False, k=32, n=24, trans_a=False, trans_b=False, bias=None,
         residual=None, activation=None, alpha=None, out_dtype=None, row_bias=None, saved=None):
    return MatmulSpec(dtype=dtype, batched=batched, batched_b=batched_b, k=k, n=n, trans_a=trans_a,
                      trans_b=trans_b, bias=bias, residual=residual, activation=activation, alpha=alpha,
                      out_dtype=out_dtype or dtype, row_bias=row_bias, saved=saved)


VARIANTS = {
    "plain": spec(),
    "f16_bias_gelu_tB": spec(dtype="f16", trans_b=True, bias=("f16", 1), activation="gelu"),
    "tA_alpha": spec(trans_a=True, alpha=0.25),
    "tAtB_rowbias_f32_silu_out_f32": spec(trans_a=True, trans_b=True, bias=("f32", 2), activation="silu",
                                          out_dtype="f32"),
    "batched_shared_b_bias_relu_residual": spec(batched=True, bias=("bf16", 1), activation="relu",
                                                residual=("bf16", 3)),
    "bmm_sigmoid_alpha": spec(batched=True, batched_b=True, activation="sigmoid", alpha=2.0),
    "gelu_tanh_residual_f32_out_f16": spec(activation="gelu_tanh", residual=("f32", 2), out_dtype="f16"),
    "tB_bias_tanh": spec(trans_b=True, bias=("bf16", 1), activation="tanh"),
    "per_row_bias_batched_silu": spec(batched=True, trans_b=True, row_bias=("bf16", 3), activation="silu"),
}
