// out[r] = argmax_j logits[r, j] (fp32, rows strided): the lowest j on ties, NaN never wins (a row
// of NaNs gives 0). One workgroup per row.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t logits, out_;
  uint R, V, stride;
} p;
const uint NONE = 0xffffffffu;
shared float best_v[256];
shared uint best_i[256];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < p.R; r += gl_NumWorkGroups.x) {
    float bv = 0.0;
    uint bi = NONE;
    for (uint j = lid; j < p.V; j += 256u) {  // ascending j: a tie keeps the lower one
      const float v = ldf(p.logits, r * p.stride + j);
      if (!isnan(v) && (bi == NONE || v > bv)) {
        bv = v;
        bi = j;
      }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    barrier();
    for (uint k = 128u; k > 0u; k >>= 1) {
      if (lid < k) {
        const float ov = best_v[lid + k], mv = best_v[lid];
        const uint oi = best_i[lid + k], mi = best_i[lid];
        if (oi != NONE && (mi == NONE || ov > mv || (ov == mv && oi < mi))) {
          best_v[lid] = ov;
          best_i[lid] = oi;
        }
      }
      barrier();
    }
    if (lid == 0u) sti(p.out_, r, best_i[0] == NONE ? 0 : int(best_i[0]));
    barrier();
  }
}
