// The elementwise ops over [rows, cols] fp32 activations (strided rows), one mode per op:
// 0 add: out = a + b                  1 silu_mul: out = silu(a[:, c]) * a[:, cols + c]
// 2 gelu_tanh_mul (same layout)       3 scale: out = a * f
// 4 softcap: out = f * tanh(a / f)    5 add_bias: out = a + b[c]      6 sigmoid_gate: a * sigmoid(b)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t a, b, out_;
  uint rows, cols, a_stride, b_stride, out_stride, mode;
  float f;
} p;

void main() {
  const uint n = p.rows * p.cols;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint r = i / p.cols, c = i % p.cols;
    const float a = ldf(p.a, r * p.a_stride + c);
    float y;
    if (p.mode == 0u) {
      y = a + ldf(p.b, r * p.b_stride + c);
    } else if (p.mode == 1u) {
      y = silu(a) * ldf(p.a, r * p.a_stride + p.cols + c);
    } else if (p.mode == 2u) {
      const float g = a;
      y = 0.5 * g * (1.0 + safe_tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) *
          ldf(p.a, r * p.a_stride + p.cols + c);
    } else if (p.mode == 3u) {
      y = a * p.f;
    } else if (p.mode == 4u) {
      y = p.f * safe_tanh(a / p.f);
    } else if (p.mode == 5u) {
      y = a + ldf(p.b, c);
    } else {
      y = a * sigmoid(ldf(p.b, r * p.b_stride + c));
    }
    stf(p.out_, r * p.out_stride + c, y);
  }
}
