/* A stand-in libcuda for tests without a GPU (loaded through HEDDLE_LIBCUDA_PATH in a subprocess): small
 * constant handles, and launches that append what the driver was given to the file named by FAKE_CUDA_LOG
 * instead of running anything. Signatures follow cuda.h (driver API 12). Configured by the environment:
 *   FAKE_CUDA_DEVICES  number of devices (default 1)
 *   FAKE_CUDA_CC       compute capability per device, "9.0" or "9.0,8.6" (default 9.0 for every device)
 *   FAKE_CUDA_PARAMS   parameter sizes of every function, "8,8,4,4" (default: axpy's, the kernel under test)
 *   FAKE_CUDA_FAIL     "cuName:code": that entry point fails with that CUresult (cuStreamSynchronize: the
 *                      asynchronous error a faulting kernel leaves)
 *   FAKE_CUDA_LOG_ARGS 1: each launch line ends in args=..., every parameter by its FAKE_CUDA_PARAMS size
 *                      (8 bytes in hex, 4 as an int, a 128-byte tensor map as map:<its address>)
 * Tensor maps: cuTensorMapEncodeTiled writes a stand-in map (FakeMap: the global address, a tag, how often
 * cuTensorMapReplaceAddress patched it) that a test reads back from the launch's arguments; both log a line
 * and refuse a global address off the driver's alignment (16 bytes, 32 with CU_TENSOR_MAP_INTERLEAVE_32B).
 * -DFAKE_CUDA_NO_REPLACE: a driver without cuTensorMapReplaceAddress.
 * Contexts: device d's primary context is the handle 0x100 + d; each thread has its own current context
 * (none at first), as the driver keeps it. Every launch logs the device of the current context.
 * -DFAKE_CUDA_11: a driver older than CUDA 12 (no cuLaunchKernelEx, cuFuncGetParamInfo, cuTensorMapEncodeTiled);
 * -DFAKE_CUDA_12_0: CUDA 12.0..12.3 (no cuFuncGetParamInfo).
 * -DFAKE_CUDA_NO_PARAM_COUNT: cuFuncGetParamInfo without cuFuncGetParamCount (12.4 .. before the count). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int id;
  char pad[4];
  union {
    char pad[64];
    struct {
      unsigned x, y, z;
    } clusterDim;
  } value;
} Attr;
typedef struct {
  unsigned gx, gy, gz, bx, by, bz, smem;
  void* stream;
  Attr* attrs;
  unsigned numAttrs;
} Config;

#define PRIMARY_BASE 0x100
static __thread uintptr_t current; /* the calling thread's current context, 0: none */

static int devices(void) {
  const char* v = getenv("FAKE_CUDA_DEVICES");
  return v ? atoi(v) : 1;
}

/* FAKE_CUDA_FAIL="name:code" -> code for that entry point, else 0 */
static int failure(const char* name) {
  const char* v = getenv("FAKE_CUDA_FAIL");
  size_t n = strlen(name);
  if (!v || strncmp(v, name, n) != 0 || v[n] != ':') return 0;
  return atoi(v + n + 1);
}

static FILE* logfile(void) {
  const char* path = getenv("FAKE_CUDA_LOG");
  return path ? fopen(path, "a") : NULL;
}

/* The stand-in CUtensorMap: what a test reads back (128 bytes like the real one). */
typedef struct {
  uint64_t address;    /* the global address */
  uint64_t tag;        /* FAKE_MAP_TAG: made by cuTensorMapEncodeTiled */
  uint64_t replaced;   /* how often cuTensorMapReplaceAddress changed it */
  uint64_t interleave; /* as encoded: 2 (CU_TENSOR_MAP_INTERLEAVE_32B) needs 32-byte addresses */
  uint64_t rest[12];
} FakeMap;
#define FAKE_CUDA_ERROR_INVALID_VALUE 1
/* The driver's rule for a map's global address (cuTensorMapEncodeTiled; cuTensorMapReplaceAddress keeps it):
 * 16-byte aligned, 32 with CU_TENSOR_MAP_INTERLEAVE_32B (runtime/cuda/cuda_driver.h tensorMapAddressAlignment). */
static int fake_map_address_ok(uint64_t addr, uint64_t interleave) { return addr % (interleave == 2 ? 32 : 16) == 0; }
#define FAKE_MAP_TAG 0x50414d544b414546ull /* "FAKETMAP" */

/* The parameter sizes of every function (FAKE_CUDA_PARAMS, default axpy's) into sizes[64]; their count. */
static size_t param_sizes(size_t* sizes) {
  size_t n = 0;
  const char* p = getenv("FAKE_CUDA_PARAMS");
  if (!p) p = "8,8,4,4"; /* axpy(float*, const float*, float, int) */
  while (*p && n < 64) {
    sizes[n++] = (size_t)strtoul(p, (char**)&p, 10);
    if (*p == ',') ++p;
  }
  return n;
}

static void log_args(FILE* f, void** params) {
  size_t sizes[64], n = param_sizes(sizes);
  fprintf(f, " args=");
  for (size_t i = 0; i < n; ++i) {
    if (i) fputc(',', f);
    if (sizes[i] == 8) fprintf(f, "0x%llx", (unsigned long long)*(uint64_t*)params[i]);
    else if (sizes[i] == 4) fprintf(f, "%d", *(int*)params[i]);
    else if (sizes[i] == 128) fprintf(f, "map:0x%llx", (unsigned long long)((const FakeMap*)params[i])->address);
    else fprintf(f, "?%zu", sizes[i]);
  }
}

static void logline(const char* kind, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, void* stream,
                    void** params, const Config* cfg) {
  FILE* f = logfile();
  if (!f) return;
  /* the kernel under test is axpy(float* y, const float* x, float a, int n): show a and n */
  fprintf(f, "%s grid=%u,%u,%u block=%u smem=%u stream=%lu a=%g n=%d", kind, gx, gy, gz, bx, smem,
          (unsigned long)(uintptr_t)stream, (double)*(float*)params[2], *(int*)params[3]);
  if (cfg)
    for (unsigned i = 0; i < cfg->numAttrs; ++i)
      fprintf(f, " attr%u=%d:%u,%u,%u", i, cfg->attrs[i].id, cfg->attrs[i].value.clusterDim.x,
              cfg->attrs[i].value.clusterDim.y, cfg->attrs[i].value.clusterDim.z);
  fprintf(f, " ctx=%d", current ? (int)(current - PRIMARY_BASE) : -1);
  if (getenv("FAKE_CUDA_LOG_ARGS")) log_args(f, params);
  fputc('\n', f);
  fclose(f);
}

int cuInit(unsigned flags) {
  (void)flags;
  return 0;
}
int cuDeviceGetCount(int* n) {
  *n = devices();
  return 0;
}
int cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return ordinal < devices() ? 0 : 101; /* INVALID_DEVICE */
}
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  int major = 9, minor = 0;
  const char* cc = getenv("FAKE_CUDA_CC");
  for (int i = 0; cc && *cc; ++i) { /* the dev-th "M.m" of the list, else the last */
    sscanf(cc, "%d.%d", &major, &minor);
    const char* comma = strchr(cc, ',');
    if (i == dev || !comma) break;
    cc = comma + 1;
  }
  *v = attr == 75 ? major : attr == 76 ? minor : attr == 16 ? 132 : attr == 97 ? 232448 : 0;
  return 0;
}
int cuCtxGetCurrent(void** ctx) {
  *ctx = (void*)current;
  return 0;
}
int cuCtxSetCurrent(void* ctx) {
  FILE* f = logfile();
  if (f) {
    fprintf(f, "cuCtxSetCurrent ctx=%d\n", ctx ? (int)((uintptr_t)ctx - PRIMARY_BASE) : -1);
    fclose(f);
  }
  current = (uintptr_t)ctx;
  return 0;
}
int cuCtxGetDevice(int* d) {
  if (!current) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *d = (int)(current - PRIMARY_BASE);
  return 0;
}
int cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  *ctx = (void*)(uintptr_t)(PRIMARY_BASE + dev);
  return 0;
}
int cuModuleLoadData(void** m, const void* image) {
  (void)image;
  FILE* f = logfile();
  if (f) {
    fprintf(f, "cuModuleLoadData ctx=%d\n", current ? (int)(current - PRIMARY_BASE) : -1);
    fclose(f);
  }
  *m = (void*)0x20;
  return failure("cuModuleLoadData");
}
int cuModuleUnload(void* m) {
  (void)m;
  return 0;
}
int cuModuleGetFunction(void** f, void* m, const char* name) {
  (void)m;
  (void)name;
  *f = (void*)0x30;
  return 0;
}
int cuFuncSetAttribute(void* f, int attr, int v) {
  (void)f;
  (void)attr;
  (void)v;
  return failure("cuFuncSetAttribute");
}
int cuFuncGetAttribute(int* v, int attr, void* f) {
  (void)attr;
  (void)f;
  *v = 0;
  return 0;
}
#if !defined(FAKE_CUDA_11) && !defined(FAKE_CUDA_12_0)
int cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* size) {
  size_t sizes[64], n = param_sizes(sizes), at = 0;
  (void)f;
  if (index >= n) { /* CUDA_ERROR_INVALID_VALUE: past the last parameter (compute-sanitizer reports it) */
    FILE* lf = logfile();
    if (lf) {
      fprintf(lf, "cuFuncGetParamInfo index=%zu past the last parameter\n", index);
      fclose(lf);
    }
    return 1;
  }
  for (size_t i = 0; i < index; ++i) at += sizes[i];
  *offset = at;
  *size = sizes[index];
  return 0;
}
#endif
#if !defined(FAKE_CUDA_11) && !defined(FAKE_CUDA_12_0) && !defined(FAKE_CUDA_NO_PARAM_COUNT)
int cuFuncGetParamCount(void* f, size_t* count) {
  size_t sizes[64];
  (void)f;
  *count = param_sizes(sizes);
  return 0;
}
#endif
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                   void* stream, void** params, void** extra) {
  (void)f;
  (void)by;
  (void)bz;
  (void)extra;
  int r = failure("cuLaunchKernel");
  if (!r) logline("cuLaunchKernel", gx, gy, gz, bx, smem, stream, params, NULL);
  return r;
}
int cuStreamSynchronize(void* stream) {
  FILE* f = logfile();
  if (f) {
    fprintf(f, "cuStreamSynchronize stream=%lu\n", (unsigned long)(uintptr_t)stream);
    fclose(f);
  }
  return failure("cuStreamSynchronize");
}
#ifndef FAKE_CUDA_11
int cuLaunchKernelEx(const Config* c, void* f, void** params, void** extra) {
  (void)f;
  (void)extra;
  logline("cuLaunchKernelEx", c->gx, c->gy, c->gz, c->bx, c->smem, c->stream, params, c);
  return 0;
}
int cuTensorMapEncodeTiled(void* map, int type, unsigned rank, void* addr, const uint64_t* dims,
                           const uint64_t* strides, const unsigned* box, const unsigned* elementStrides, int interleave,
                           int swizzle, int l2, int oob) {
  (void)type;
  (void)rank;
  (void)dims;
  (void)strides;
  (void)box;
  (void)elementStrides;
  (void)swizzle;
  (void)l2;
  (void)oob;
  FakeMap* m = (FakeMap*)map;
  FILE* f = logfile();
  if (f) {
    fprintf(f, "cuTensorMapEncodeTiled address=0x%llx\n", (unsigned long long)(uintptr_t)addr);
    fclose(f);
  }
  if (!fake_map_address_ok((uint64_t)(uintptr_t)addr, (uint64_t)interleave)) return FAKE_CUDA_ERROR_INVALID_VALUE;
  memset(map, 0, 128);
  m->address = (uint64_t)(uintptr_t)addr;
  m->tag = FAKE_MAP_TAG;
  m->interleave = (uint64_t)interleave;
  return failure("cuTensorMapEncodeTiled");
}
#ifndef FAKE_CUDA_NO_REPLACE
int cuTensorMapReplaceAddress(void* map, void* addr) {
  FakeMap* m = (FakeMap*)map;
  FILE* f = logfile();
  if (f) {
    fprintf(f, "cuTensorMapReplaceAddress address=0x%llx\n", (unsigned long long)(uintptr_t)addr);
    fclose(f);
  }
  if (m->tag != FAKE_MAP_TAG || !fake_map_address_ok((uint64_t)(uintptr_t)addr, m->interleave))
    return FAKE_CUDA_ERROR_INVALID_VALUE;
  m->address = (uint64_t)(uintptr_t)addr;
  ++m->replaced;
  return failure("cuTensorMapReplaceAddress");
}
#endif
#endif
int cuGetErrorName(int r, const char** s) {
  *s = r == 1     ? "CUDA_ERROR_INVALID_VALUE"
       : r == 209 ? "CUDA_ERROR_NO_BINARY_FOR_GPU"
       : r == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
       : r == 701 ? "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
                  : "CUDA_ERROR_FAKE";
  return 0;
}
int cuGetErrorString(int r, const char** s) {
  *s = r == 700 ? "an illegal memory access was encountered" : "fake driver";
  return 0;
}
