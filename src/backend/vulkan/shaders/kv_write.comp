// reshape_and_cache: k, v [T, Hkv, D / Dv] (rows strided) into the paged caches [blocks, block_size,
// Hkv, D] at slot_mapping[t] (-1: skipped), converted to the caches' dtype.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t k, v, slots, k_cache, v_cache;
  uint T, Hkv, D, Dv, k_stride, v_stride, k_dt, v_dt;
} p;

void main() {
  const uint wk = p.Hkv * p.D, wv = p.Hkv * p.Dv, w = max(wk, wv);
  const uint n = p.T * w;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint t = i / w, c = i % w;
    const int slot = ldi(p.slots, t);
    if (slot < 0) continue;
    if (c < wk) st(p.k_cache, p.k_dt, uint(slot) * wk + c, ldf(p.k, t * p.k_stride + c));
    if (c < wv) st(p.v_cache, p.v_dt, uint(slot) * wv + c, ldf(p.v, t * p.v_stride + c));
  }
}
