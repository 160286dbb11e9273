// heddle/interp/rt/hrt_abi.h -- the C ABI between heddle (the _C module, python/heddle/core/interpret.py)
// and an interpreter library: a kernel's printed source compiled by the host C++ compiler together
// with the execution runtime (hrt_*.cpp). Plain C structs only: both sides are compiled separately.
//
//   hrt_describe()          the kernel's parameter list as the compiler saw it (kinds, sizes): the
//                           driver checks the launch arguments against it before running anything.
//   hrt_run(launch, &json)  runs the grid; json (malloc'ed, freed with hrt_free) is the report.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HRT_ABI_VERSION 4
#define HRT_SMEM_WINDOW_BYTES (256 * 1024)  // the shared window of one CTA (sm_90: 227 KB usable)
// A thread-block cluster runs as one unit: CTA rank r of the cluster owns the window's bytes
// [r * HRT_SMEM_WINDOW_BYTES, (r + 1) * HRT_SMEM_WINDOW_BYTES) (its shared::cta addresses are window offsets)
#define HRT_MAX_CLUSTER 2
#define HRT_SMEM_WINDOW_TOTAL (HRT_SMEM_WINDOW_BYTES * HRT_MAX_CLUSTER)

// kinds of kernel parameters (hrt_describe) and of launch arguments (hrt_launch.args)
enum hrt_kind { HRT_PTR = 0, HRT_I32 = 1, HRT_I64 = 2, HRT_F32 = 3, HRT_TENSORMAP = 4, HRT_OTHER = 5 };

typedef struct hrt_arg {
  int32_t kind;        // hrt_kind
  uint64_t bits;       // pointer value, integer (sign-extended) or float bits
  uint8_t map[128];    // HRT_TENSORMAP: the 128-byte map (heddle_rt::ptx::TensorMap encoding)
} hrt_arg;

// A global memory region the kernel may touch (inputs and outputs). Accesses outside every region,
// shared memory and the thread's own stack are reported; writes to read-only regions too.
typedef struct hrt_region {
  uint64_t base;
  uint64_t bytes;
  int32_t writable;
  int32_t elem_bytes;
  const char* name;
} hrt_region;

enum hrt_schedule { HRT_ADVERSARIAL = 0, HRT_RANDOM = 1 };

typedef struct hrt_launch {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t smem_bytes;
  int32_t nargs;
  const hrt_arg* args;
  int32_t nregions;
  const hrt_region* regions;
  int32_t schedule;        // hrt_schedule
  uint64_t seed;
  int64_t max_events;      // per CTA; 0 = default (deadlock report past it)
  int32_t max_findings;    // per kind; 0 = default
  int32_t ncta_subset;     // > 0: run only these CTAs (linear ids in cta_subset)
  const uint32_t* cta_subset;
  int32_t stop_at_first;   // stop after the first CTA with a finding
  int32_t workers;         // > 1: run that many CTAs at once (one OS thread each); else one after another
  uint32_t cluster;        // CTAs per thread-block cluster along x (0 or 1: none; at most HRT_MAX_CLUSTER);
                           // the CTAs of a cluster run together, their threads interleaved by one scheduler
  uint32_t regs_per_thread;  // setmaxnreg's pool: ptxas's registers per thread at entry (0: the __launch_bounds__
                             // cap, 65536 / threads rounded down to a multiple of 8; hrt_regs.cpp)
} hrt_launch;

typedef struct hrt_param {
  int32_t kind;  // hrt_kind
  int32_t bytes; // sizeof the parameter type
} hrt_param;

// Implemented by the interpreter library (the generated entry stub + the runtime).
int hrt_abi_version(void);
const char* hrt_kernel_name(void);
int hrt_describe(hrt_param* params, int max_params);  // returns the parameter count
int hrt_run(const hrt_launch* launch, char** json);    // 0: ran (findings in json), else json = error
void hrt_free(char* p);

#ifdef __cplusplus
}
#endif
