"""Helpers shared by the Blackwell (sm_100a) tests: the tcgen05 kernel's schedule through the public API."""
from hopper_defs import schedule_sm90
from matmul_defs import matmul_fusion


def roles(acc_stages=0, regs=(0, 0)):
    load = {"warps": 1, "registers": regs[0]} if regs[0] else 1
    epi = {"warps": 4}
    if acc_stages:
        epi["stages"] = acc_stages
    if regs[1]:
        epi["registers"] = regs[1]
    return {"load": load, "mma": 1, "epilogue": epi}


def build(stages=4, acc_stages=2, bn=128, bk=64, layout="NN", dtype="bf16", regs=(0, 0), n=1024, k=4096,
          epilogue="bias_gelu", m="M"):
    """A matmul scheduled for the sm_100a tcgen05 kernel (tile 128 x bn x bk)."""
    fd, a, b = matmul_fusion(m=m, n=n, k=k, dtype=dtype, layout=layout, epilogue=epilogue)
    schedule_sm90(fd, a, b, bm=128, bn=bn, bk=bk, wgs=1, stages=stages, roles=roles(acc_stages, regs))
    return fd
