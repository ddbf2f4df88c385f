// The gated delta rule's per-token gates, before the recurrence: for every (t, h),
// gb[t, h] = (g, beta) with beta = sigmoid(b[t, h]) and g = -exp(A_log[h]) * softplus(a[t, h] +
// dt_bias[h]) (softplus(x) = x above 20), in fp32.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t b, a, A_log, dt_bias, gb;
  uint T, Hv, b_stride, a_stride, A_dt, dt_dt;
} p;

void main() {
  const uint n = p.T * p.Hv;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint t = i / p.Hv, h = i % p.Hv;
    const float x = ldf(p.a, t * p.a_stride + h) + ld(p.dt_bias, p.dt_dt, h);
    const float sp = x > 20.0 ? x : log(1.0 + exp(x));
    stf(p.gb, 2u * i, -exp(ld(p.A_log, p.A_dt, h)) * sp);
    stf(p.gb, 2u * i + 1u, sigmoid(ldf(p.b, t * p.b_stride + h)));
  }
}
