// Token sampling over one row of logits, one thread block per call (blockDim.x a power of two,
// at most 1024). Compiled to PTX by scripts/build-ptx.sh with nvcc or with clang's NVPTX back end
// (-nocudainc: no CUDA headers, so the few builtins used are spelled out below).
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif

#define TOY_MAX_THREADS 1024

#if defined(__clang__) && !defined(__NVCC__)
static __device__ __attribute__((always_inline)) unsigned toy_tid() { return __nvvm_read_ptx_sreg_tid_x(); }
static __device__ __attribute__((always_inline)) unsigned toy_ntid() { return __nvvm_read_ptx_sreg_ntid_x(); }
static __device__ __attribute__((always_inline)) float toy_exp(float x) { return __nvvm_ex2_approx_f(x * 1.4426950408889634f); }
#else
static __device__ __forceinline__ unsigned toy_tid() { return threadIdx.x; }
static __device__ __forceinline__ unsigned toy_ntid() { return blockDim.x; }
static __device__ __forceinline__ float toy_exp(float x) { return __expf(x); }
#endif

// Is (va, ia) better than (vb, ib): larger value, then lower index.
static __device__ __attribute__((always_inline)) bool toy_better(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

// argmax_f32 writes the index of the largest of x[0..n) to out[0] (the lowest index on ties;
// NaN never wins).
extern "C" __global__ void argmax_f32(const float *x, int n, int *out) {
  __shared__ float sv[TOY_MAX_THREADS];
  __shared__ int si[TOY_MAX_THREADS];
  unsigned t = toy_tid(), nt = toy_ntid();
  float best = -__builtin_inff();
  int bi = -1;
  for (int i = t; i < n; i += nt) {
    float v = x[i];
    if (bi < 0 || toy_better(v, i, best, bi)) { best = v; bi = i; }
  }
  sv[t] = best; si[t] = bi;
  __syncthreads();
  for (unsigned s = nt / 2; s > 0; s >>= 1) {
    if (t < s && si[t + s] >= 0 && (si[t] < 0 || toy_better(sv[t + s], si[t + s], sv[t], si[t]))) {
      sv[t] = sv[t + s]; si[t] = si[t + s];
    }
    __syncthreads();
  }
  if (t == 0) out[0] = si[0] < 0 ? 0 : si[0];
}

// Block-wide sum of v (every thread gets the result).
static __device__ float toy_block_sum(float v, float *scratch) {
  unsigned t = toy_tid(), nt = toy_ntid();
  scratch[t] = v;
  __syncthreads();
  for (unsigned s = nt / 2; s > 0; s >>= 1) {
    if (t < s) scratch[t] += scratch[t + s];
    __syncthreads();
  }
  float r = scratch[0];
  __syncthreads();
  return r;
}

static __device__ float toy_block_max(float v, float *scratch) {
  unsigned t = toy_tid(), nt = toy_ntid();
  scratch[t] = v;
  __syncthreads();
  for (unsigned s = nt / 2; s > 0; s >>= 1) {
    if (t < s && scratch[t + s] > scratch[t]) scratch[t] = scratch[t + s];
    __syncthreads();
  }
  float r = scratch[0];
  __syncthreads();
  return r;
}

// sample_f32 draws one token from softmax(x / temperature) restricted to the top_k largest
// logits (0: all) and to the smallest set of largest logits whose probability reaches top_p
// (1: all), using the uniform number u in [0, 1): the kept tokens are found as a threshold on the
// logit (by bisection, so ties at the threshold are all kept), and u is inverted through their
// probabilities in index order. temperature <= 0 is argmax. The result goes to out[0].
extern "C" __global__ void sample_f32(const float *x, int n, float temperature, int top_k, float top_p,
                                      float u, int *out) {
  __shared__ float scratch[TOY_MAX_THREADS];
  __shared__ float chunk[TOY_MAX_THREADS];
  unsigned t = toy_tid(), nt = toy_ntid();
  float mx = -__builtin_inff(), mn = __builtin_inff();
  for (int i = t; i < n; i += nt) {
    float v = x[i];
    if (v > mx) mx = v;
    if (v < mn) mn = v;
  }
  mx = toy_block_max(mx, scratch);
  mn = -toy_block_max(-mn, scratch);
  if (temperature <= 0.f) {
    // argmax: the lowest index holding the maximum.
    int bi = n;
    for (int i = t; i < n; i += nt)
      if (x[i] == mx && i < bi) bi = i;
    float b = -toy_block_max(-(float)bi, scratch);
    if (t == 0) out[0] = (int)b < n ? (int)b : 0;
    return;
  }
  float inv = 1.f / temperature;
  float z = 0.f;
  for (int i = t; i < n; i += nt) z += toy_exp((x[i] - mx) * inv);
  z = toy_block_sum(z, scratch);
  // Bisect the largest threshold th with count(x >= th) >= top_k and mass(x >= th) >= top_p.
  float lo = mn, hi = mx;
  bool kOn = top_k > 0 && top_k < n, pOn = top_p < 1.f;
  if (kOn || pOn) {
    for (int it = 0; it < 40; it++) {
      float mid = lo + (hi - lo) * 0.5f;
      if (mid <= lo || mid >= hi) break;
      float c = 0.f, m = 0.f;
      for (int i = t; i < n; i += nt)
        if (x[i] >= mid) { c += 1.f; m += toy_exp((x[i] - mx) * inv); }
      c = toy_block_sum(c, scratch);
      m = toy_block_sum(m, scratch);
      bool enough = (!kOn || c >= (float)top_k) && (!pOn || m >= top_p * z);
      if (enough) lo = mid; else hi = mid;
    }
    // lo keeps enough; hi may be the maximum itself, which always keeps at least one token.
    float c = 0.f, m = 0.f;
    for (int i = t; i < n; i += nt)
      if (x[i] >= hi) { c += 1.f; m += toy_exp((x[i] - mx) * inv); }
    c = toy_block_sum(c, scratch);
    m = toy_block_sum(m, scratch);
    if ((!kOn || c >= (float)top_k) && (!pOn || m >= top_p * z)) lo = hi;
  } else {
    lo = mn;
  }
  // Inverse CDF in index order over contiguous chunks, one per thread.
  int per = (n + nt - 1) / nt, beg = t * per, end = beg + per < n ? beg + per : n;
  float s = 0.f;
  for (int i = beg; i < end; i++)
    if (x[i] >= lo) s += toy_exp((x[i] - mx) * inv);
  chunk[t] = s;
  __syncthreads();
  if (t == 0) {
    float total = 0.f;
    for (unsigned c = 0; c < nt; c++) total += chunk[c];
    float target = u * total, acc = 0.f;
    int pick = -1, last = -1;
    for (unsigned c = 0; c < nt && pick < 0; c++) {
      if (acc + chunk[c] <= target && c + 1 < nt) { acc += chunk[c]; continue; }
      int b = c * per, e = b + per < n ? b + per : n;
      for (int i = b; i < e; i++) {
        if (!(x[i] >= lo)) continue;
        last = i;
        acc += toy_exp((x[i] - mx) * inv);
        if (acc > target) { pick = i; break; }
      }
    }
    out[0] = pick >= 0 ? pick : (last >= 0 ? last : 0);
  }
}
