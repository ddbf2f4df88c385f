// RMSNorm of every row of D values: rows = T * heads, row r = (t, h) at x[t * x_stride + h * D].
// One workgroup per row (grid-stride over rows); statistics in fp32 through shared memory. With a
// gate z (gated_rms_norm, Qwen3.5's linear attention): out = norm(x) * w * silu(z), z's rows at
// z[t * z_stride + h * D].
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t x, w, out_, z;
  uint rows, heads, D, x_stride, out_stride, w_dt, zero_centered, z_stride;
  float eps;
} p;
shared float partial[256];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
    const uint t = r / p.heads, h = r % p.heads;
    const uint xo = t * p.x_stride + h * p.D, oo = t * p.out_stride + h * p.D;
    float s = 0.0;
    for (uint d = lid; d < p.D; d += 256u) {
      const float v = ldf(p.x, xo + d);
      s += v * v;
    }
    partial[lid] = s;
    barrier();
    for (uint k = 128u; k > 0u; k >>= 1) {
      if (lid < k) partial[lid] += partial[lid + k];
      barrier();
    }
    const float scale = inversesqrt(partial[0] / float(p.D) + p.eps);
    barrier();  // partial[0] read by all before the next row overwrites it
    for (uint d = lid; d < p.D; d += 256u) {
      float w = ld(p.w, p.w_dt, d);
      if (p.zero_centered != 0u) w += 1.0;
      float y = ldf(p.x, xo + d) * scale * w;
      if (p.z != 0ul) y *= silu(ldf(p.z, t * p.z_stride + h * p.D + d));
      stf(p.out_, oo + d, y);
    }
  }
}
