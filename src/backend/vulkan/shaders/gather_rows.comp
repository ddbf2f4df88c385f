// out[i, :] = x[rows[i] / row_div, :] for i < R, or for i < *limit when a limit address is given
// (moe_permute: the routed rows only).
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t x, rows, out_, limit;
  uint R, N, x_stride, out_stride, row_div;
} p;

void main() {
  const uint R = p.limit != 0ul ? min(p.R, uint(max(ldi(p.limit, 0u), 0))) : p.R;
  const uint n = R * p.N;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint r = i / p.N, c = i % p.N;
    stf(p.out_, r * p.out_stride + c, ldf(p.x, (uint(ldi(p.rows, r)) / p.row_div) * p.x_stride + c));
  }
}
