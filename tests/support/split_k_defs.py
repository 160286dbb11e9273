"""The split-K kernels (tests/lower/test_split_k.py), shared with the launch tests: split_k(S) on the cp.async
kernel (sm80) and on the sm_90a wgmma kernel (sm90)."""
from support.matmul_defs import matmul_fusion, schedule
from support.wgmma_defs import schedule_sm90


def sm80(S, n=200, k=32 * 15, dtype="bf16", layout="NN", bm=64, bn=64, bk=32, stages=3, epilogue="bias_gelu"):
    fd, a, b = matmul_fusion(n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue)
    schedule(fd, a, b, bm=bm, bn=bn, bk=bk, wm=2, wn=2, stages=stages).split_k(S)
    return fd


def sm90(S, n=72, k=16 * 16, dtype="bf16", layout="NN", bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=1):
    fd, a, b = matmul_fusion(n=n, k=k, dtype=dtype, layout=layout)
    schedule_sm90(fd, a, b, bm=bm, bn=bn, bk=bk, wgs=wgs, stages=stages, prefetch=prefetch).split_k(S)
    return fd
