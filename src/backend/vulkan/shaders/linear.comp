// out[T, N] = x[T, K] · w[N, K]^T, w of any float dtype, fp32 accumulation. Tiles of 16 × 16
// outputs per workgroup through shared memory (the portable scalar path; subgroup and
// cooperative-matrix variants come later).
#version 450
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(push_constant) uniform P {
  uint64_t x, w, out_;
  uint T, N, K, x_stride, out_stride, w_dt;
} p;
shared float xs[16][17];
shared float ws[16][17];

void main() {
  const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
  const uint n0 = gl_WorkGroupID.x * 16u, t0 = gl_WorkGroupID.y * 16u;
  const uint n = n0 + lx, t = t0 + ly;
  float acc = 0.0;
  for (uint k0 = 0u; k0 < p.K; k0 += 16u) {
    // Thread (lx, ly) loads x[t0 + ly, k0 + lx] and w[n0 + ly, k0 + lx].
    const uint kk = k0 + lx;
    xs[ly][lx] = (t0 + ly < p.T && kk < p.K) ? ldf(p.x, (t0 + ly) * p.x_stride + kk) : 0.0;
    ws[ly][lx] = (n0 + ly < p.N && kk < p.K) ? ld(p.w, p.w_dt, (n0 + ly) * p.K + kk) : 0.0;
    barrier();
    for (uint j = 0u; j < 16u; ++j) acc += xs[ly][j] * ws[lx][j];
    barrier();
  }
  if (t < p.T && n < p.N) stf(p.out_, t * p.out_stride + n, acc);
}
