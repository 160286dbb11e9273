"""The stream-K kernels (tests/lower/test_stream_k.py), shared with test_stream_k_roles.py and the launch tests:
stream_k(G) on the cp.async kernel (sm80) and on the sm_90a warp-specialized kernel (sm90), and the stream-K
walk of the docs in Python (ranges)."""
from support.matmul_defs import matmul_fusion, schedule
from support.wgmma_defs import build


N, K = 200, 32 * 15  # 4 n-tiles of 64, 15 k-tiles of 32


def sm80(G, n=N, k=K, dtype="bf16", layout="NN", bm=64, bn=64, bk=32, stages=3, epilogue="bias_gelu", wm=2, wn=2):
    fd, a, b = matmul_fusion(n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue)
    schedule(fd, a, b, bm=bm, bn=bn, bk=bk, wm=wm, wn=wn, stages=stages).stream_k(G)
    return fd


def sm90(G, store=None, prefetch=-1, bn=64, n=N, k=16 * 13, variant="coop", **kw):
    """The sm_90a warp-specialized kernel (roles load, mma; 128 x bn x 16 tiles, 4 stages) with stream_k(G):
    test_stream_k_roles.py."""
    fd = build(variant, stages=4, prefetch=prefetch, bn=bn, bk=16, n=n, k=k, store=store, **kw)
    fd.matmul_tensor.stream_k(G)
    return fd


def ranges(M, G, n=N, k=K, bm=64, bn=64, bk=32):
    """The stream-K walk of the docs, in Python: per CTA, its (tile, first k-tile, end k-tile) segments."""
    cdiv = lambda a, b: (a + b - 1) // b  # noqa: E731
    nk, tiles = cdiv(k, bk), cdiv(M, bm) * cdiv(n, bn)
    grid = max(tiles, min(G, tiles * nk))
    out = []
    for c in range(grid):
        q, r = divmod(tiles * nk, grid)  # the first r CTAs get q + 1 iterations, the others q
        b = c * q + min(c, r)
        e = b + q + (c < r)
        segs = [(t, max(b, t * nk) - t * nk, min(e, (t + 1) * nk) - t * nk) for t in range((e - 1) // nk, b // nk - 1, -1)]
        out.append(segs)
    return grid, out
