// out[t, :] = Σ_j weights[t, j] · y[slot_rows[t·k + j], :] (j in order, fp32) + sigmoid(gate[t]) ·
// shared[t, :] when a shared expert is given (gate 0 address: a gate of 1).
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t y, weights, slot_rows, shared_, gate, out_;
  uint T, H, k, y_stride, shared_stride, gate_stride, out_stride;
} p;

void main() {
  const uint n = p.T * p.H;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint t = i / p.H, c = i % p.H;
    float acc = 0.0;
    for (uint j = 0u; j < p.k; ++j) {
      const int r = ldi(p.slot_rows, t * p.k + j);
      if (r >= 0) acc += ldf(p.weights, t * p.k + j) * ldf(p.y, uint(r) * p.y_stride + c);
    }
    if (p.shared_ != 0ul) {
      float g = 1.0;
      if (p.gate != 0ul) g = sigmoid(ldf(p.gate, t * p.gate_stride));
      acc += g * ldf(p.shared_, t * p.shared_stride + c);
    }
    stf(p.out_, t * p.out_stride + c, acc);
  }
}
