"""The kernel families of the source-mutation campaign (tests/interp/test_interpret_mutation.py and
tools/mutation_table.py, which writes the kill table into docs/verification.md): one representative
kernel per family heddle generates, small and ragged, with the M (and SM count) it is interpreted at."""
from support import tcgen05_defs
from support.block_scale_defs import block_scaled
from support.wgmma_defs import build, schedule_sm90
from support.interp_defs import amd, inputs, kernel, sm80, sm90
from support.matmul_defs import matmul_fusion, schedule
from support import grouped_defs
from support.fp8_defs import fp8_fusion, fp8_schedule
from support import quant_defs
from support import mx_defs
from support import mx_out_defs


def _cluster(along="m"):
    fd = build("coop", stages=3, prefetch=1, n=72)
    fd.matmul_tensor.cluster(2, along)
    return fd


def _sm90_split_k(g=2):
    fd, a, b = matmul_fusion(n=72, k=16 * 16, dtype="bf16")
    schedule_sm90(fd, a, b, bm=64, bn=64, bk=16, wgs=1, stages=3, prefetch=1).split_k(g)
    return fd


def _sm90_stream_k(g=11):
    fd = build("coop", stages=4, prefetch=-1, bn=64, bk=16, n=200, k=16 * 13)
    fd.matmul_tensor.stream_k(g)
    return fd


def _sm90_fp8():
    fd, a, b = fp8_fusion(n=72, k=512, scale="row")
    fp8_schedule(fd, a, b, variant="pipeline", bm=64, stages=3, prefetch=1)
    return fd


def _sm80_grid(kind, g):
    fd, a, b = matmul_fusion(n=200, k=32 * 15, dtype="bf16", layout="NN", epilogue="bias_gelu")
    getattr(schedule(fd, a, b, bm=64, bn=64, bk=32, wm=2, wn=2, stages=3), kind)(g)
    return fd


# family -> (make fusion, target, M, sms, what)
FAMILIES = {
    "sm80_cp_async": (lambda: sm80(stages=3, prefetch=2, k=32 * 10), "sm_80", 104, None,
                      "sm_80 cp.async ring, 3 stages prefetch 2"),
    "sm80_split_k": (lambda: _sm80_grid("split_k", 3), "sm_80", 77, None, "sm_80 split-K S = 3"),
    "sm80_stream_k": (lambda: _sm80_grid("stream_k", 11), "sm_80", 70, None, "sm_80 stream-K, 11 CTAs over 4 tiles"),
    "sm90_pipeline": (lambda: sm90("pipeline", stages=3, prefetch=1), "sm_90a", 200, None,
                      "sm_90a TMA + mbarrier ring without roles"),
    "sm90_coop": (lambda: sm90("coop", stages=3, prefetch=1), "sm_90a", 200, 2,
                  "sm_90a load warp -> 2 cooperative MMA warpgroups, persistent"),
    "sm90_pingpong": (lambda: sm90("pingpong", stages=3, prefetch=1), "sm_90a", 200, 2,
                      "sm_90a ping-pong MMA warpgroups"),
    "sm90_3role": (lambda: sm90("3role", stages=3, prefetch=1), "sm_90a", 200, 2,
                   "sm_90a load -> MMA -> epilogue warpgroup (TMA store)"),
    "sm90_cluster": (_cluster, "sm_90a", 300, 2, "sm_90a cluster of 2 along M, B multicast"),
    "sm90_tma_store": (lambda: build("coop", stages=3, prefetch=1, n=200, bn=128, store="tma"), "sm_90a", 300, 2,
                       "sm_90a cooperative, stmatrix + TMA-store epilogue"),
    "sm90_split_k": (_sm90_split_k, "sm_90a", 130, None, "sm_90a pipeline, split-K S = 2"),
    "sm90_stream_k": (_sm90_stream_k, "sm_90a", 70, None, "sm_90a warp-specialized stream-K, 11 CTAs"),
    "sm90_block": (lambda: block_scaled(N=72, K=264), "sm_90a", 70, 2,
                   "sm_90a block128 scales, promotion every 128 of K (16-bit operands)"),
    "sm90_fp8": (_sm90_fp8, "sm_90a", 70, None, "sm_90a e4m3 wgmma (m64nNk32), per-row scales, TMA ring"),
    "sm90_fp8_amax": (lambda: quant_defs.scheduled(n=136, k=384, stages=2, prefetch=1), "sm_90a", 200, 2,
                      "sm_90a cooperative e4m3, output quantized with a computed scale per row and 128 columns"),
    "sm100_tcgen05": (lambda: tcgen05_defs.build(stages=3, acc_stages=2, bn=64, bk=16, n=72, k=104), "sm_100a",
                      260, 2, "sm_100a tcgen05, 2 tensor-memory accumulator stages"),
    # one CTA walks the 2 x 2 tiles (sms 1): both staging slots (2 chunks of 64 columns a tile) and both
    # accumulator stages wrap; M = 200, N = 200: the TMA store clips the last tile row and column
    "sm100_tma_store": (lambda: tcgen05_defs.build_tma_store(stages=2, acc_stages=2, bn=128, bk=16, n=200, k=40),
                        "sm_100a", 200, 1, "sm_100a tcgen05, staged TMA-store epilogue (st.shared rows, bar.sync 1)"),
    # the same walk (2 x 2 tiles, M = 150, N = 208) with q of a computed scale (e4m3, per row and 128 columns) staged
    # in chunks of 128 codes and s stored directly
    "sm100_tma_store_amax": (lambda: quant_defs.scheduled_sm100(n=208, k=80, bn=128, store="tma"), "sm_100a", 150, 1,
                             "sm_100a tcgen05, q of a computed scale through the staged TMA store, s stored directly"),
    # one CTA walks both n tiles (sms 1): the 2-stage ring and the one accumulator stage wrap; K = 384, 3 k tiles
    "sm100_mxfp8": (lambda: mx_defs.build_mx("e4m3", "e5m2", n=200, k=384, bn=128, stages=2, acc_stages=1), "sm_100a",
                    100, 1, "sm_100a MXFP8: scale chunks in the operand ring, tcgen05.cp + block-scaled tcgen05.mma"),
    # the same kernel with its output quantized (q e4m3, s per row and 128 columns): the tcgen05 amax epilogue
    "sm100_mxfp8_amax": (lambda: mx_defs.build_mx("e4m3", "e5m2", n=200, k=384, bn=128, stages=2, acc_stages=1,
                                                  quant=("e4m3", 128)), "sm_100a", 100, 1,
                         "sm_100a MXFP8, output quantized with a computed scale per row and 128 columns"),
    # the same walk with NVFP4 (two scale chunks a k tile); K = 320: 2.5 k tiles, the last one's second chunk past
    # the scale rows (TMA zero fill)
    "sm100_nvfp4": (lambda: mx_defs.build_nv(n=200, k=320, bn=128, stages=2, acc_stages=1), "sm_100a", 100, 1,
                    "sm_100a NVFP4: two scale chunks a k tile in the operand ring, tcgen05.cp + kind::mxf4nvf4"),
    # MXFP4 (one e8m0 chunk a k tile, two K = 64 kind::mxf4 MMAs reading its half words); K = 352: 2.75 k tiles, the
    # last one three 32-chunks (its fourth scale byte torch's zero padding)
    "sm100_mxfp4": (lambda: mx_defs.build_mxf4(n=200, k=352, bn=128, stages=2, acc_stages=1), "sm_100a", 100, 1,
                    "sm_100a MXFP4: one e8m0 chunk a k tile in the operand ring, tcgen05.cp + kind::mxf4"),
    # the same kernel with its output quantized (q e4m3, s per row and 128 columns): the tcgen05 amax epilogue
    "sm100_nvfp4_amax": (lambda: mx_defs.build_nv(n=200, k=320, bn=128, stages=2, acc_stages=1, quant=("e4m3", 128)),
                         "sm_100a", 100, 1,
                         "sm_100a NVFP4, output quantized with a computed scale per row and 128 columns"),
    # an MX-format output (quantize group="mx32") on the MXFP8 kernel, bias only (no GELU: a block's largest
    # magnitude is as often negative, which an amax without fabsf misses); M = 130, N = 160: padding rows and blocks
    "sm100_mx_out": (lambda: mx_out_defs.build("mx32", n=160, k=384, bn=128, stages=2, acc_stages=1, act=False),
                     "sm_100a", 130, 1, "sm_100a MXFP8 with an MX-format output (e8m0 per 32 columns, blocked)"),
    "sm80_grouped": (lambda: grouped_defs.scheduled(n=72, k=64, stages=2), "sm_80", 250, None,
                     "sm_80 grouped matmul: the device walk over 7 ragged expert groups"),
    "sm90_grouped": (lambda: grouped_defs.scheduled_sm90(n=72, k=64), "sm_90a", 250, None,
                     "sm_90a grouped matmul: warp-specialized TMA + wgmma, the walk over 7 ragged groups"),
    "sm80_masked": (lambda: grouped_defs.masked_scheduled(n=72, k=64, stages=2), "sm_80", 130, None,
                    "sm_80 masked layout: 4 experts' row counts (one past the slab, one empty)"),
    "sm100_grouped": (lambda: grouped_defs.scheduled_tcgen05(n=72, k=48), "sm_100a", 390, None,
                      "sm_100a TMA + tcgen05 grouped matmul: the device walk over 7 ragged expert groups"),
    "gfx90a_lds_dma": (lambda: amd(kind="async_lds", stages=3, prefetch=2, k=32 * 5), "gfx90a", 72, None,
                       "gfx90a LDS DMA ring, 3 stages prefetch 2"),
    "gfx942_lds_dma": (lambda: amd(kind="async_lds", stages=2, prefetch=1), "gfx942", 72, None,
                       "gfx942 LDS DMA ring, 2 stages prefetch 1"),
    "gfx1200_split_barrier": (lambda: amd(kind="plain", stages=2, prefetch=1, warps=(2, 2), k=32 * 5), "gfx1200", 72, None,
                              "gfx1200 WMMA, split barriers"),
}


def family_kernel(name):
    """(heddle.Kernel, inputs, sms) of a family's representative kernel (lowered only, no NVRTC)."""
    make, target, M, sms, _ = FAMILIES[name]
    fd = make()
    if name.endswith("_grouped"):  # M rows in ragged groups (support/grouped_defs.py "mixed": ends at 250 / 390)
        ends = (grouped_defs.RAGGED_128 if target == "sm_100a" else grouped_defs.RAGGED)["mixed"]
        return kernel(fd, target), grouped_defs.grouped_inputs(fd, ends, seed=1), sms
    if name.endswith("_masked"):  # row counts against max_tokens M = 130 (support/grouped_defs.py MASKED)
        return kernel(fd, target), grouped_defs.masked_inputs(fd, grouped_defs.MASKED["clamped"], seed=1), sms
    if name in ("sm90_fp8_amax", "sm100_tma_store_amax"):  # a last column whose clamped copies past N would dominate
        return kernel(fd, target), quant_defs.tensors(fd, M, seed=1), sms
    if name == "sm100_mxfp8_amax":  # likewise, through B's scales and the bias (mx_defs.mx_quant_tensors)
        return kernel(fd, target), mx_defs.mx_quant_tensors(fd, M, seed=1), sms
    if name == "sm100_nvfp4_amax":  # the same set-up with NVFP4 inputs (mx_defs.nv_quant_tensors)
        return kernel(fd, target), mx_defs.nv_quant_tensors(fd, M, seed=1), sms
    if name == "sm100_mxfp4":  # e2m1 codes and e8m0 scales (mx_defs.mxf4_tensors)
        return kernel(fd, target), mx_defs.mxf4_tensors(fd, M, seed=1), sms
    return kernel(fd, target), inputs(fd, M, seed=1), sms


# family -> [(kind, what)] of the full campaign's survivors, each classified in docs/verification.md
# ("The mutant catalogue"): equivalent mutants only


def _maps_equivalent(*params):
    """The host-only map survivors of a kernel whose K is a multiple of its k-tile: each map's NaN
    out-of-bounds fill and L2 promotion, and B's rows + 8 (never inside a loaded box)."""
    out = [("map_dims", "tmB: rows + 8 (the host says the tensor is longer)")]
    for p in params:
        out += [("map_oob_fill", f"{p}: out-of-bounds fill NaN instead of zero"), ("map_l2", f"{p}: L2 promotion changed")]
    return out


def _bulk_waits_elected(sites):
    """elect_mask on `sites` bulk_wait_read branches: a lane that committed no bulk group has none to wait for."""
    return [('elect_mask', 'elect_one_sync() -> every lane'), ('elect_mask', 'elect_one_sync() -> two lanes')] * sites


KNOWN_SURVIVORS = {
    'sm80_cp_async': [
        ('stage_modulo', 'ring index % 3 -> % 2 (col 55)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 55)'),
    ],
    'sm80_split_k': [
        ('stage_modulo', 'ring index % 3 -> % 2 (col 55)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 55)'),
    ],
    'sm80_grouped': [  # the prologue's one load (prefetch 1): stage 0 either way
        ('stage_modulo', 'ring index % 2 -> % 1 (col 55)'),
        ('stage_modulo', 'ring index % 2 -> % 1 (col 55)'),
    ],
    # K a multiple of the k-tile and offs[-1] = T: A's out-of-bounds rows (past T) only reach unstored rows
    'sm90_grouped': _maps_equivalent('tmA', 'tmB'),
    'sm80_masked': [  # the same prologue (21 mutants with every kind, these two survive)
        ('stage_modulo', 'ring index % 2 -> % 1 (col 55)'),
        ('stage_modulo', 'ring index % 2 -> % 1 (col 55)'),
    ],
    'sm80_stream_k': [
        ('stage_modulo', 'ring index % 3 -> % 2 (col 57)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 57)'),
    ],
    'sm90_pipeline': [
        ('stage_modulo', 'ring index % 3 -> % 2 (col 56)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 60)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 60)'),
        ('delete_fence', 'acc.fence();'),
    ] + _maps_equivalent('tmA', 'tmB'),
    'sm90_coop': [
    ] + _maps_equivalent('tmA', 'tmB'),
    'sm90_block': [  # tests/lower/test_block_scale_promotion.py EQUIVALENT (the wgmma waits the promotion's
        # wait<0> already covers: deleted or loosened); one tile per CTA (tile_stride); the 5 k tiles' one
        # weakened first-cycle wait (stage 3 never held data yet); docs/verification.md
        ('delete_sync', 'tmp.wait<2>();'),
        ('delete_sync', 'tmp.wait<0>();'),
        ('loosen_wait', 'wait<2> -> <3>'),
        ('loosen_wait', 'wait<0> -> <1>'),
        ('tile_stride', 'tile stride num_ctas -> num_ctas + 1'),
        ('tile_stride', 'tile stride num_ctas -> num_ctas + 1'),
        ('stage_modulo', 'ring index % 4 -> % 3 (col 79)'),
        ('map_l2', 'tmA: L2 promotion changed'),
        ('map_l2', 'tmB: L2 promotion changed'),
        # the scale ring (docs/fp8.md "The scales' path"): at 4 stages (keep = 2) the release moved before the
        # promotion frees item g - 2, whose scales were read two k-tiles earlier; tmSA's one-row box cannot be
        # halved (max 1); its rows + 8 are k-blocks no box reaches (kb < ceil(K/128)); its NaN fill lands in rows
        # >= M, which the promotion never reads; L2 promotion is a cache hint
        ('scale_ring', "the k-tile's release moved before the promotion that reads its scale_a slot"),
        ('map_box', 'tmSA: box rows halved'),
        ('map_dims', 'tmSA: rows + 8 (the host says the tensor is longer)'),
        ('map_oob_fill', 'tmSA: out-of-bounds fill NaN instead of zero'),
        ('map_l2', 'tmSA: L2 promotion changed'),
    ],
    'sm90_pingpong': [
        ('setmaxnreg_move', 'heddle::sm90::setmaxnreg_inc<232>(); moved into `if (warp < 8) {`'),
    ] + _maps_equivalent('tmA', 'tmB'),
    'sm90_3role': [
        ('tile_stride', 'tile stride num_ctas -> num_ctas + 1'),
        ('named_barrier_id', 'named_barrier id 1 -> 2'),
        ('named_barrier_id', 'named_barrier id 1 -> 2'),
    ] + _maps_equivalent('tmA', 'tmB', 'tmD'),
    'sm90_cluster': [
        ('remote_rank', 'multicast issuing rank crank -> 1u - crank'),
        ('remote_rank', 'mbar_arrive_cluster rank 1u - crank -> crank (itself)'),
    ] + _maps_equivalent('tmA', 'tmB'),
    'sm90_tma_store': [('named_barrier_id', 'named_barrier id 2 -> 3')] * 4 + _bulk_waits_elected(3)
    + _maps_equivalent('tmA', 'tmB', 'tmD'),
    'sm90_split_k': [
        ('stage_modulo', 'ring index % 3 -> % 2 (col 56)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 60)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 60)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 40)'),
        ('delete_fence', 'acc.fence();'),
    ] + _maps_equivalent('tmA', 'tmB'),
    'sm90_stream_k': [
        ('named_barrier_id', 'named_barrier id 2 -> 3'),
        ('named_barrier_id', 'named_barrier id 2 -> 3'),
    ] + _maps_equivalent('tmA', 'tmB'),
    'sm90_fp8': [  # the sm90_pipeline ring's equivalents (the same TMA ring without roles); K = 512 is a
        # multiple of the k tile and the 8-bit maps take no NaN fill (UINT8): only L2 promotion is equivalent
        ('stage_modulo', 'ring index % 3 -> % 2 (col 56)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 60)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 60)'),
        ('delete_fence', 'acc.fence();'),
        ('map_l2', 'tmA: L2 promotion changed'),
        ('map_l2', 'tmB: L2 promotion changed'),
    ],
    'sm90_fp8_amax': [  # the quantize epilogue's kinds all killed; L2 promotion is a cache hint
        ('map_l2', 'tmA: L2 promotion changed'),
        ('map_l2', 'tmB: L2 promotion changed'),
    ],
    'sm100_tcgen05': [
        # the two tcgen05 fences around synchronous alloc / dealloc (PTX ISA 9.7.16.6.1): equivalent
        # (tcgen05_defs.redundant_fence_mutants, docs/verification.md "tcgen05 ordering")
        ('delete_fence', 'heddle::sm100::fence_before();'),
        ('fence_kind', 'heddle::sm100::fence_before(); -> heddle::sm100::fence_after();'),
        ('delete_fence', 'heddle::sm100::fence_after();'),
        ('fence_kind', 'heddle::sm100::fence_after(); -> heddle::sm100::fence_before();'),
        ('map_l2', 'tmA: L2 promotion changed'),
        ('map_l2', 'tmB: L2 promotion changed'),
    ],
    'sm100_tma_store': [
        # sm100_tcgen05's two redundant fences around the synchronous alloc / dealloc
        ('delete_fence', 'heddle::sm100::fence_before();'),
        ('fence_kind', 'heddle::sm100::fence_before(); -> heddle::sm100::fence_after();'),
        ('delete_fence', 'heddle::sm100::fence_after();'),
        ('fence_kind', 'heddle::sm100::fence_after(); -> heddle::sm100::fence_before();'),
        # a store-only map's out-of-bounds fill (loads only), L2 promotion (a cache hint)
        ('map_oob_fill', 'tmD: out-of-bounds fill NaN instead of zero'),
        ('map_l2', 'tmA: L2 promotion changed'),
        ('map_l2', 'tmB: L2 promotion changed'),
        ('map_l2', 'tmD: L2 promotion changed'),
    # the bulk waits (the two chunks' and the drain); bar.sync 1 -> 2 at either site of a chunk: the same 128
    # threads, no other group on 2
    ] + _bulk_waits_elected(3) + [('named_barrier_id', 'named_barrier id 1 -> 2')] * 4,
    'sm100_mxfp8': [
        # sm100_tcgen05's two redundant fences around the synchronous alloc / dealloc
        ('delete_fence', 'heddle::sm100::fence_before();'),
        ('fence_kind', 'heddle::sm100::fence_before(); -> heddle::sm100::fence_after();'),
        ('delete_fence', 'heddle::sm100::fence_after();'),
        ('fence_kind', 'heddle::sm100::fence_after(); -> heddle::sm100::fence_before();'),
        # the MMA role's fence after its accEmpty wait: the per-k-tile fence after the full wait (the MX copies')
        # follows that wait in program order before any MMA of the tile, and orders them after it as well
        ('delete_fence', 'heddle::sm100::fence_after();'),
        ('fence_kind', 'heddle::sm100::fence_after(); -> heddle::sm100::fence_before();'),
        # the scale maps' rows (Kp per row block) + 8: the boxes at 4 kt .. 4 kt + 3 never reach row Kp
        ('map_dims', 'tmSFA: rows + 8 (the host says the tensor is longer)'),
        ('map_dims', 'tmSFB: rows + 8 (the host says the tensor is longer)'),
        ('map_l2', 'tmA: L2 promotion changed'),
        ('map_l2', 'tmB: L2 promotion changed'),
        ('map_l2', 'tmSFA: L2 promotion changed'),
        ('map_l2', 'tmSFB: L2 promotion changed'),
    ],
    'sm100_grouped': [
        # sm100_tcgen05's two redundant fences around the synchronous alloc / dealloc
        ('delete_fence', 'heddle::sm100::fence_before();'),
        ('fence_kind', 'heddle::sm100::fence_before(); -> heddle::sm100::fence_after();'),
        ('delete_fence', 'heddle::sm100::fence_after();'),
        ('fence_kind', 'heddle::sm100::fence_after(); -> heddle::sm100::fence_before();'),
        # one tile per CTA (docs/grouped.md "sm_100a"): tl is 0, so the accumulator ring's parities tl % 2 and
        # tl % 1 agree, and the epilogue's release of the accumulator after the CTA's only tile has no waiter
        ('stage_modulo', 'ring index % 2 -> % 1 (col 53)'),
        ('stage_modulo', 'ring index % 2 -> % 1 (col 50)'),
        ('delete_sync', 'heddle::sm90::mbar_arrive((accEmpty + (0)));'),
    ] + _maps_equivalent('tmA', 'tmB'),
    'gfx90a_lds_dma': [
        ('stage_modulo', 'ring index % 3 -> % 2 (col 53)'),
        ('stage_modulo', 'ring index % 3 -> % 2 (col 53)'),
    ],
    'gfx942_lds_dma': [
        ('stage_modulo', 'ring index % 2 -> % 1 (col 53)'),
        ('stage_modulo', 'ring index % 2 -> % 1 (col 53)'),
    ],
    'gfx1200_split_barrier': [
        ('stage_modulo', 'ring index % 2 -> % 1 (col 54)'),
        ('stage_modulo', 'ring index % 2 -> % 1 (col 54)'),
    ],
}
# the TMA-store kernel with q of a computed scale, one chunk of 128 codes a tile: sm100_tma_store's classes -- the
# tcgen05 kernel's (the two redundant fences, tmA / tmB L2) and tmD's L2, the bulk waits' elected lane at the chunk's
# and the drain's wait, bar.sync 1 -> 2 at the chunk's two sites; its e4m3 map's NaN fill is refused by the encoder
# (killed), and the quantize kinds are all killed
KNOWN_SURVIVORS["sm100_tma_store_amax"] = (KNOWN_SURVIVORS["sm100_tcgen05"] + [('map_l2', 'tmD: L2 promotion changed')] +
                                           _bulk_waits_elected(2) + [('named_barrier_id', 'named_barrier id 1 -> 2')] * 2)
# the MXFP8 kernel's equivalents, the same with its output quantized: the quantize epilogue's kinds are all killed
KNOWN_SURVIVORS["sm100_mxfp8_amax"] = list(KNOWN_SURVIVORS["sm100_mxfp8"])
# NVFP4: the MXFP8 kernel's survivors but the scale maps' rows + 8, killed there: its K = 320 reads rows 16 .. 23 of a
# row block with Kp = 20 (the last k tile's second chunk, TMA zero fill that eight more rows turn into real bytes)
KNOWN_SURVIVORS['sm100_nvfp4'] = [m for m in KNOWN_SURVIVORS['sm100_mxfp8'] if m[0] != 'map_dims']
# the NVFP4 kernel's equivalents, the same with its output quantized: the quantize epilogue's kinds are all killed
KNOWN_SURVIVORS["sm100_nvfp4_amax"] = list(KNOWN_SURVIVORS["sm100_nvfp4"])
# the MXFP8 kernel's equivalents, the same with an MX-format output: the mx_* kinds are all killed
KNOWN_SURVIVORS["sm100_mx_out"] = list(KNOWN_SURVIVORS["sm100_mxfp8"])
# MXFP4: the MXFP8 kernel's twelve equivalents -- the fences and maps of the same roles, and its scale maps' rows + 8:
# Kp = round_up(K/32, 4) = 4 x the k tiles, so no box reaches past Kp rows (docs/verification.md)
KNOWN_SURVIVORS["sm100_mxfp4"] = list(KNOWN_SURVIVORS["sm100_mxfp8"])
