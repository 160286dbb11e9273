// heddle/interp/rt/hrt_hip.h -- the HIP language surface for a printed heddle kernel compiled by the host
// C++ compiler (the interpreter, docs/verification.md). Force-included before the printed HIP source,
// which is compiled unchanged with HEDDLE_INTERPRET and the target's predefined macros (host_build.cpp:
// __gfx90a__ / __gfx942__ / __gfx1200__, __GFX9__ / __GFX12__, __AMDGCN_WAVEFRONT_SIZE), as hiprtc
// would define them: the heddle HIP headers then route every builtin and inline asm to heddle_rt
// (hrt_api.h, the AMD section) instead of the ISA.
//
//   everything of hrt_cuda.h (threadIdx, blockIdx, __shared__, the entry stub, the asm poison), with
//   __syncthreads -> s_barrier, the wavefront size of the target (64 on CDNA, 32 on GFX12) for the
//   runtime's wave collectives, and __forceinline__ as always_inline (findings name printed lines).
#pragma once

#ifndef __AMDGCN_WAVEFRONT_SIZE
#error "hrt_hip.h: compile with the target's __AMDGCN_WAVEFRONT_SIZE (heddle's host_build does)"
#endif
#define HRT_WAVE_SIZE __AMDGCN_WAVEFRONT_SIZE
#define HRT_AMD 1
// inlined into the printed kernel, so a finding inside a header helper (acc.step's LDS reads, the LDS DMA)
// resolves to the printed line that called it
#define __forceinline__ inline __attribute__((always_inline))
// the launch-bounds attribute heddle prints (clang refuses it on a host function; g++ ignores it)
#define amdgpu_flat_work_group_size(...)

#include "heddle/interp/rt/hrt_cuda.h"
