// A fake CUDA driver for TestFakeDriver: the 22 entry points generated/cudadrv binds,
// implemented on the CPU, so that the dlopen loading, the out-parameters and the kernel
// argument marshaling of package cuda are exercised on machines without a GPU. Device memory is
// host memory; the three kernels of kernels/cuda/common run as plain C; sample_f32 with a
// positive temperature returns a checksum of its arguments instead of sampling.
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static int ctx_token;
static const char *last_error = "fake: no error";

CUresult cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuGetErrorString(CUresult r, const char **s) { *s = r == 0 ? "no error" : last_error; return 0; }
CUresult cuGetErrorName(CUresult r, const char **s) { *s = r == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE"; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *dev, int ordinal) { if (ordinal != 0) return 101; *dev = 0; return 0; }
CUresult cuDeviceGetName(char *name, int len, int dev) { strncpy(name, "Fake GPU", len); return dev == 0 ? 0 : 101; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  *v = attr == 75 ? 9 : attr == 76 ? 0 : 1;
  return dev == 0 ? 0 : 101;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) { *bytes = (size_t)1 << 30; return dev == 0 ? 0 : 101; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = &ctx_token; return dev == 0 ? 0 : 101; }
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { return dev == 0 ? 0 : 101; }
CUresult cuCtxSetCurrent(void *ctx) { return ctx == &ctx_token ? 0 : 201; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuStreamSynchronize(void *s) { return s == NULL ? 0 : 400; }

// A module is its PTX text; it must be NUL-terminated and declare entries.
CUresult cuModuleLoadData(void **mod, const void *image) {
  const char *ptx = image;
  if (strstr(ptx, ".entry") == NULL) { last_error = "fake: not PTX"; return 218; }
  *mod = strdup(ptx);
  return 0;
}
CUresult cuModuleUnload(void *mod) { free(mod); return 0; }

enum { K_ARGMAX = 1, K_SAMPLE, K_ADAMW };
static int kinds[3] = {K_ARGMAX, K_SAMPLE, K_ADAMW};

CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
  char want[128];
  snprintf(want, sizeof want, ".entry %s(", name);
  if (strstr((const char *)mod, want) == NULL) { last_error = "fake: no such entry"; return 500; }
  if (strcmp(name, "argmax_f32") == 0) *fn = &kinds[0];
  else if (strcmp(name, "sample_f32") == 0) *fn = &kinds[1];
  else if (strcmp(name, "adamw_f32") == 0) *fn = &kinds[2];
  else return 500;
  return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { void *m = malloc(n); if (!m) return 2; *p = (CUdeviceptr)m; return 0; }
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { memcpy((void *)dst, src, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { memcpy(dst, (void *)src, n); return 0; }

static int argmax(const float *x, int n) {
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || shared != 0 || stream != NULL || extra != NULL || bx == 0 || bx > 1024) {
    last_error = "fake: bad launch configuration";
    return 1;
  }
  switch (*(int *)fn) {
  case K_ARGMAX: {
    if (gx != 1 || (bx & (bx - 1)) != 0) return 1;
    const float *x = (const float *)*(CUdeviceptr *)params[0];
    int n = *(int *)params[1];
    int *out = (int *)*(CUdeviceptr *)params[2];
    out[0] = argmax(x, n);
    return 0;
  }
  case K_SAMPLE: {
    if (gx != 1 || (bx & (bx - 1)) != 0) return 1;
    const float *x = (const float *)*(CUdeviceptr *)params[0];
    int n = *(int *)params[1];
    float temperature = *(float *)params[2];
    int top_k = *(int *)params[3];
    float top_p = *(float *)params[4];
    float u = *(float *)params[5];
    int *out = (int *)*(CUdeviceptr *)params[6];
    if (temperature <= 0) out[0] = argmax(x, n);
    else out[0] = (int)(temperature * 100) * 10000000 + top_k * 100000 + (int)(top_p * 100) * 1000 + (int)(u * 1000);
    return 0;
  }
  case K_ADAMW: {
    float *x = (float *)*(CUdeviceptr *)params[0];
    const float *g = (const float *)*(CUdeviceptr *)params[1];
    float *m = (float *)*(CUdeviceptr *)params[2];
    float *v = (float *)*(CUdeviceptr *)params[3];
    const float *p = (const float *)*(CUdeviceptr *)params[4];
    long long n = *(long long *)params[5];
    if ((long long)gx * bx < n) { last_error = "fake: grid too small"; return 1; }
    for (long long i = 0; i < n; i++) {
      float mi = m[i] * p[1] + g[i] * (1.0f - p[1]);
      float vi = v[i] * p[2] + g[i] * g[i] * (1.0f - p[2]);
      m[i] = mi; v[i] = vi;
      x[i] = x[i] * (1.0f - p[0] * p[4]) - p[0] * (mi * p[5]) / (sqrtf(vi * p[6]) + p[3]);
    }
    return 0;
  }
  }
  return 400;
}
