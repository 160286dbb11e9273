"""Where heddle finds NVRTC and the CUDA driver at run time (nothing CUDA is needed to build).

NVRTC search order (first hit wins):
  1. HEDDLE_NVRTC_PATH (a library file or a directory)
  2. $CUDA_HOME / $CUDA_PATH lib64 and lib
  3. /usr/local/cuda/lib64
  4. the nvidia-* wheels CUDA builds of torch install (site-packages/nvidia/cu13/lib,
     nvidia/cuda_nvrtc/lib, nvidia/cu12/lib) — registered here
  5. the plain sonames through the dynamic loader (LD_LIBRARY_PATH, ldconfig)
"""
from .. import _C
from .wheel_dirs import wheel_dirs

_done = False


def ensure_search_dirs():
    global _done
    if not _done:
        _C.runtime.set_extra_search_dirs(wheel_dirs())
        _done = True


def nvrtc_available() -> bool:
    ensure_search_dirs()
    return _C.runtime.nvrtc_available()


def gpu_available() -> bool:
    """True when torch sees a CUDA (or ROCm) device and heddle's driver (or HIP runtime) loader works."""
    try:
        import torch
        if torch.cuda.is_available() and getattr(torch.version, "hip", None):
            return _C.runtime.hip_available()
        return torch.cuda.is_available() and _C.runtime.driver_available()
    except Exception:
        return False


def target_for_device(device=None) -> str:
    """The heddle target whose kernels load on a CUDA device (default: the current one): sm_80 on compute
    capability 8.x, sm_90a on 9.0, sm_100a on 10.0 (a cubin runs only within its own major version, an 'a'
    target only on its exact capability: heddle._C.cuda_target_for). Any other capability (10.3, 12.x, below
    8.0) is a ScheduleError naming heddle's targets. On ROCm torch: the device's gfx architecture when the target table
    (heddle._C.known_targets) has it (gfx90a, gfx942, gfx1200)."""
    import torch
    if getattr(torch.version, "hip", None):
        arch = torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
        # the C++ target table's HIP targets with a matmul path (gfx1250 is there for the barrier model only)
        infos = [_C.target_info(t) for t in _C.known_targets()]
        hip = sorted(i["name"] for i in infos if i["backend"] == "hip" and i["mma"])
        if arch in hip:
            return arch
        raise _C.ScheduleError(f"AMD device {arch}: heddle targets {', '.join(hip)}")
    major, minor = torch.cuda.get_device_capability(device)
    return _C.cuda_target_for(major, minor)


def default_target() -> str:
    """The target Fusion.compile() and Kernel.build() take when given none: the current device's
    (target_for_device) when a CUDA (ROCm) device is present, else sm_80 (compile checks on a CPU machine)."""
    return target_for_device() if gpu_available() else "sm_80"
