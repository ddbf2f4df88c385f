// RoPE in place on x [T, H, D] (rows strided): pair j of every head rotates by positions[t] *
// inv_freq[j] (inv_freq from rope_inv_freq on the host), cos/sin times the attention factor; NeoX
// pairs (j, j + half) or interleaved ones (2j, 2j + 1). One invocation per (t, h, j).
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t x, positions, inv_freq;
  uint T, H, D, stride, half_, interleaved;
  float attention_factor;
} p;

// The angle reduced to about [-pi, pi] in two steps (Cody-Waite), so that cos and sin of a long
// context's angles keep fp32 accuracy on drivers whose cos/sin are exact only near zero. `precise`:
// without it a compiler may refold the two steps into one product by 2 pi (NVIDIA's does), which
// loses the reduction's accuracy (1.7e-4 at position 3000).
float reduce_angle(float a) {
  precise float k = round(a * 0.15915494309189535);
  precise float r = a - k * 6.28125;
  precise float reduced = r - k * 0.0019353071795864769;
  return reduced;
}

void main() {
  const uint n = p.T * p.H * p.half_;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint j = i % p.half_, th = i / p.half_;
    const uint h = th % p.H, t = th / p.H;
    precise float product = float(ldi(p.positions, t)) * ldf(p.inv_freq, j);  // fp32, as the CPU's
    const float angle = reduce_angle(product);
    const float c = cos(angle) * p.attention_factor, s = sin(angle) * p.attention_factor;
    const uint base = t * p.stride + h * p.D;
    const uint i0 = p.interleaved != 0u ? base + 2u * j : base + j;
    const uint i1 = p.interleaved != 0u ? i0 + 1u : i0 + p.half_;
    const float a = ldf(p.x, i0), b = ldf(p.x, i1);
    stf(p.x, i0, a * c - b * s);
    stf(p.x, i1, b * c + a * s);
  }
}
