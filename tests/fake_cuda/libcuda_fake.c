/* A stand-in libcuda for tests without a GPU (loaded through HEDDLE_LIBCUDA_PATH in a subprocess): one
 * device, handles that are small constants, and launches that append what the driver was given to the
 * file named by FAKE_CUDA_LOG instead of running anything. Signatures follow cuda.h (driver API 12). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
  int id;
  char pad[4];
  union { char pad[64]; struct { unsigned x, y, z; } clusterDim; } value;
} Attr;
typedef struct {
  unsigned gx, gy, gz, bx, by, bz, smem;
  void* stream;
  Attr* attrs;
  unsigned numAttrs;
} Config;

static void logline(const char* kind, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned smem, void* stream,
                    void** params, const Config* cfg) {
  const char* path = getenv("FAKE_CUDA_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  /* the kernel under test is axpy(float* y, const float* x, float a, int n): show a and n */
  fprintf(f, "%s grid=%u,%u,%u block=%u smem=%u stream=%lu a=%g n=%d", kind, gx, gy, gz, bx, smem,
          (unsigned long)(uintptr_t)stream, (double)*(float*)params[2], *(int*)params[3]);
  if (cfg)
    for (unsigned i = 0; i < cfg->numAttrs; ++i)
      fprintf(f, " attr%u=%d:%u,%u,%u", i, cfg->attrs[i].id, cfg->attrs[i].value.clusterDim.x,
              cfg->attrs[i].value.clusterDim.y, cfg->attrs[i].value.clusterDim.z);
  fprintf(f, "\n");
  fclose(f);
}

int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int* n) { *n = 1; return 0; }
int cuDeviceGet(int* d, int ordinal) { *d = ordinal; return 0; }
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  (void)dev;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : attr == 97 ? 232448 : 0;
  return 0;
}
int cuCtxGetCurrent(void** ctx) { *ctx = (void*)0x10; return 0; }
int cuCtxSetCurrent(void* ctx) { (void)ctx; return 0; }
int cuDevicePrimaryCtxRetain(void** ctx, int dev) { (void)dev; *ctx = (void*)0x10; return 0; }
int cuModuleLoadData(void** m, const void* image) { (void)image; *m = (void*)0x20; return 0; }
int cuModuleUnload(void* m) { (void)m; return 0; }
int cuModuleGetFunction(void** f, void* m, const char* name) { (void)m; (void)name; *f = (void*)0x30; return 0; }
int cuFuncSetAttribute(void* f, int attr, int v) { (void)f; (void)attr; (void)v; return 0; }
int cuFuncGetAttribute(int* v, int attr, void* f) { (void)attr; (void)f; *v = 0; return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                   void* stream, void** params, void** extra) {
  (void)f; (void)by; (void)bz; (void)extra;
  logline("cuLaunchKernel", gx, gy, gz, bx, smem, stream, params, NULL);
  return 0;
}
#ifndef FAKE_CUDA_11 /* -DFAKE_CUDA_11: a driver older than CUDA 12, without cuLaunchKernelEx */
int cuLaunchKernelEx(const Config* c, void* f, void** params, void** extra) {
  (void)f; (void)extra;
  logline("cuLaunchKernelEx", c->gx, c->gy, c->gz, c->bx, c->smem, c->stream, params, c);
  return 0;
}
#endif
int cuGetErrorName(int r, const char** s) { (void)r; *s = "CUDA_ERROR_FAKE"; return 0; }
int cuGetErrorString(int r, const char** s) { (void)r; *s = "fake driver"; return 0; }
