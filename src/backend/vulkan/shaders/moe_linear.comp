// moe_grouped_linear: out[r, :] = x[r, :] · w[e]^T for the rows r of expert e (offsets), w [E, N, K]
// of any float dtype, fp32 accumulation; rows outside [offsets[0], offsets[E]) are left unwritten. One invocation
// per output element (the portable path).
#version 450
#include "common.glsl"
layout(local_size_x = 64, local_size_y = 4) in;
layout(push_constant) uniform P {
  uint64_t x, w, offsets, out_;
  uint R, N, K, E, x_stride, out_stride, w_dt;
} p;

void main() {
  const uint n = gl_GlobalInvocationID.x, r = gl_GlobalInvocationID.y;
  if (n >= p.N || r >= p.R || int(r) < ldi(p.offsets, 0u) || int(r) >= ldi(p.offsets, p.E)) return;
  // The expert of row r: the last e with offsets[e] <= r.
  uint lo = 0u, hi = p.E;
  while (hi - lo > 1u) {
    const uint mid = (lo + hi) / 2u;
    if (uint(ldi(p.offsets, mid)) <= r) lo = mid; else hi = mid;
  }
  const uint wo = (lo * p.N + n) * p.K;
  float acc = 0.0;
  for (uint k = 0u; k < p.K; ++k) acc += ldf(p.x, r * p.x_stride + k) * ld(p.w, p.w_dt, wo + k);
  stf(p.out_, r * p.out_stride + n, acc);
}
