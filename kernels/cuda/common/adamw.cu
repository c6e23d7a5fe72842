// One fused AdamW step over a flat f32 parameter tensor, with ggml_opt_step_adamw's 7-float
// parameter block: alpha, beta1, beta2, eps, wd, beta1h = 1/(1-beta1^t), beta2h = 1/(1-beta2^t).
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#if defined(__clang__) && !defined(__NVCC__)
#define toy_sqrtf __nvvm_sqrt_rn_f
#else
#define toy_sqrtf sqrtf
#endif

extern "C" __global__ void adamw_f32(float *x, const float *g, float *m, float *v, const float *p, long long n) {
#if defined(__clang__) && !defined(__NVCC__)
  long long i = (long long)__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
#else
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#endif
  if (i >= n) return;
  const float alpha = p[0], beta1 = p[1], beta2 = p[2], eps = p[3], wd = p[4], beta1h = p[5], beta2h = p[6];
  const float gi = g[i];
  const float mi = m[i] * beta1 + gi * (1.0f - beta1);
  const float vi = v[i] * beta2 + gi * gi * (1.0f - beta2);
  m[i] = mi;
  v[i] = vi;
  const float mh = mi * beta1h;
  const float vh = toy_sqrtf(vi * beta2h) + eps;
  x[i] = x[i] * (1.0f - alpha * wd) - alpha * mh / vh;
}
