// gemv.comp for 16-bit weights (bf16 or f16) whose rows are whole 16-byte vectors (K a multiple of
// 8, 16-byte aligned rows and x): each lane reads 8 weights at a time in one 16-byte load and the
// matching 8 activations as two vec4 per token, so a subgroup moves 512 bytes of a row per
// iteration instead of 64 — the row read is what a decode step waits for. One subgroup per output
// row (grid-stride), 8 tokens per pass over the row, then a subgroup sum; fp32 accumulation.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t x, w, out_;
  uint T, N, K, x_stride, out_stride, w_dt;
} p;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer U32x4Ref { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4Ref { vec4 v[]; };
const uint TB = 8u;

// Two 16-bit values packed in a word (the lower address in the low half) as fp32.
vec2 unpack2(uint u, bool bf16) {
  return bf16 ? vec2(uintBitsToFloat(u << 16), uintBitsToFloat(u & 0xffff0000u)) : unpackHalf2x16(u);
}

void main() {
  const uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
  const uint first = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  const uint step = gl_NumWorkGroups.x * gl_NumSubgroups;
  const uint K8 = p.K / 8u;
  const bool bf16 = p.w_dt == DT_BF16;
  for (uint n = first; n < p.N; n += step) {
    U32x4Ref wrow = U32x4Ref(p.w + uint64_t(n) * uint64_t(p.K) * 2ul);
    for (uint t0 = 0u; t0 < p.T; t0 += TB) {
      const uint nt = min(TB, p.T - t0);
      float acc[TB];
      [[unroll]] for (uint t = 0u; t < TB; ++t) acc[t] = 0.0;
      for (uint k8 = lane; k8 < K8; k8 += width) {
        const uvec4 wv = wrow.v[k8];
        const vec4 w0 = vec4(unpack2(wv.x, bf16), unpack2(wv.y, bf16));
        const vec4 w1 = vec4(unpack2(wv.z, bf16), unpack2(wv.w, bf16));
        [[unroll]] for (uint t = 0u; t < TB; ++t)
          if (t < nt) {
            Vec4Ref xr = Vec4Ref(p.x + uint64_t((t0 + t) * p.x_stride) * 4ul);
            acc[t] += dot(w0, xr.v[2u * k8]) + dot(w1, xr.v[2u * k8 + 1u]);
          }
      }
      [[unroll]] for (uint t = 0u; t < TB; ++t) {
        const float sum = subgroupAdd(acc[t]);
        if (t < nt && subgroupElect()) stf(p.out_, (t0 + t) * p.out_stride + n, sum);
      }
    }
  }
}
