// Causal depthwise conv1d + SiLU over each sequence's new tokens (Gated DeltaNet): one invocation
// per (sequence, channel) walks the sequence's tokens in order with the last K-1 inputs in
// registers, starting from its state slot (zeros where has_initial_state is 0), and leaves the
// last K-1 inputs in the slot.
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t x, w, state, out_, cu_seqlens, state_slots, has_initial;
  uint num_seqs, C, K, x_stride, out_stride, w_dt;
} p;
const uint MAX_K = 8u;

void main() {
  const uint c = gl_GlobalInvocationID.x, s = gl_WorkGroupID.y;
  if (c >= p.C) return;
  const uint H = p.K - 1u;
  const uint slot = uint(ldi(p.state_slots, s));
  const bool init = ldi(p.has_initial, s) != 0;
  const uint so = (slot * p.C + c) * H;
  float win[MAX_K];  // win[j]: input j of the last H, oldest first
  for (uint j = 0u; j < H; ++j) win[j] = init ? ldf(p.state, so + j) : 0.0;
  float wc[MAX_K];
  for (uint j = 0u; j < p.K; ++j) wc[j] = ld(p.w, p.w_dt, c * p.K + j);
  const uint start = uint(ldi(p.cu_seqlens, s)), end = uint(ldi(p.cu_seqlens, s + 1u));
  for (uint t = start; t < end; ++t) {
    const float xt = ldf(p.x, t * p.x_stride + c);
    float acc = wc[H] * xt;
    for (uint j = 0u; j < H; ++j) acc += wc[j] * win[j];
    stf(p.out_, t * p.out_stride + c, silu(acc));
    for (uint j = 0u; j + 1u < H; ++j) win[j] = win[j + 1u];
    if (H > 0u) win[H - 1u] = xt;
  }
  for (uint j = 0u; j < H; ++j) stf(p.state, so + j, win[j]);
}
