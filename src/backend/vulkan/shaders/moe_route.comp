// Per token: softmax over E router logits (fp32; NaN never raises the max), then the top k in
// descending probability (the lower id on ties, NaN after every number), optionally renormalised.
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t logits, expert_ids, weights;
  uint T, E, k, stride, renormalize;
} p;
const uint MAX_E = 1024u;

bool ranks_before(float pa, uint a, float pb, uint b) {
  if (isnan(pa) != isnan(pb)) return isnan(pb);
  if (pa != pb && !isnan(pa)) return pa > pb;
  return a < b;
}

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= p.T) return;
  const uint row = t * p.stride;
  float mx = -1.0 / 0.0;
  for (uint e = 0u; e < p.E; ++e) {
    const float v = ldf(p.logits, row + e);
    if (!isnan(v)) mx = max(mx, v);
  }
  float sum = 0.0;
  for (uint e = 0u; e < p.E; ++e) sum += exp(ldf(p.logits, row + e) - mx);
  uint chosen[MAX_E / 32u];
  for (uint w = 0u; w < (p.E + 31u) / 32u; ++w) chosen[w] = 0u;
  float top = 0.0;
  for (uint j = 0u; j < p.k; ++j) {
    uint best = 0xffffffffu;
    float bp = 0.0;
    for (uint e = 0u; e < p.E; ++e) {
      if ((chosen[e / 32u] & (1u << (e % 32u))) != 0u) continue;
      const float pe = exp(ldf(p.logits, row + e) - mx) / sum;
      if (best == 0xffffffffu || ranks_before(pe, e, bp, best)) {
        best = e;
        bp = pe;
      }
    }
    chosen[best / 32u] |= 1u << (best % 32u);
    sti(p.expert_ids, t * p.k + j, int(best));
    stf(p.weights, t * p.k + j, bp);
    top += bp;
  }
  if (p.renormalize != 0u)
    for (uint j = 0u; j < p.k; ++j) stf(p.weights, t * p.k + j, ldf(p.weights, t * p.k + j) / top);
}
