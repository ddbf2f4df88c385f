// out[T, N] = x[T, K] · w[N, K]^T for few tokens (decode, short chunks): one subgroup per output
// row n — its lanes stride over K (coalesced reads of w's row), 8 tokens at a time, then a subgroup
// sum — so w is read once per 8 tokens and no workgroup barrier is needed. Subgroup-size agnostic:
// rows are a grid-stride loop over every subgroup of the dispatch. fp32 accumulation.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t x, w, out_;
  uint T, N, K, x_stride, out_stride, w_dt;
} p;
const uint TB = 8u;

void main() {
  const uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
  const uint first = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  const uint step = gl_NumWorkGroups.x * gl_NumSubgroups;
  for (uint n = first; n < p.N; n += step) {
    const uint wo = n * p.K;
    for (uint t0 = 0u; t0 < p.T; t0 += TB) {
      const uint nt = min(TB, p.T - t0);
      float acc[TB];
      for (uint t = 0u; t < TB; ++t) acc[t] = 0.0;
      for (uint k = lane; k < p.K; k += width) {
        const float wk = ld(p.w, p.w_dt, wo + k);
        // A constant trip count, so that acc[] stays in registers (unrolled).
        [[unroll]] for (uint t = 0u; t < TB; ++t)
          if (t < nt) acc[t] += wk * ldf(p.x, (t0 + t) * p.x_stride + k);
      }
      [[unroll]] for (uint t = 0u; t < TB; ++t) {
        const float sum = subgroupAdd(acc[t]);
        if (t < nt && subgroupElect()) stf(p.out_, (t0 + t) * p.out_stride + n, sum);
      }
    }
  }
}
