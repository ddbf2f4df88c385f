// out[t, :] = table[ids[t], :] (table of any float dtype); an id outside [0, V) gives zeros.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t table, ids, out_;
  uint T, H, V, table_dt, out_stride;
} p;

void main() {
  const uint n = p.T * p.H;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint t = i / p.H, h = i % p.H;
    const int id = ldi(p.ids, t);
    const float v = (id < 0 || uint(id) >= p.V) ? 0.0 : ld(p.table, p.table_dt, uint(id) * p.H + h);
    stf(p.out_, t * p.out_stride + h, v);
  }
}
