// The gated delta rule, recurrent form, over each sequence's new tokens (docs/models.md, Gated DeltaNet):
// workgroup (sequence s, value head h, 64 columns of the state); invocation j owns column j of the
// state S [dk, dv] (fp32, in registers for the whole sequence) and per token computes
//   S *= exp(g);  delta = (v_j - S[:, j]·k) * beta;  S[:, j] += k * delta;  out_j = S[:, j]·q
// with q, k l2-normalised (q also scaled by 1/sqrt(dk)) in shared memory. Only the sequences of
// at most rec_max new tokens (decodes); the longer ones take the chunked form (delta_rule_chunk.comp).
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
  uint64_t q, k, v, gb, state, out_, cu_seqlens, state_slots, has_initial;
  uint Hk, Hv, dk, dv, q_stride, k_stride, v_stride, out_stride, rec_max;
} p;
const uint WG = 64u;
const uint MAX_DK = 256u;
shared float qs[MAX_DK];
shared float ks[MAX_DK];
shared float red_q[WG];
shared float red_k[WG];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint s = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  const uint start = uint(ldi(p.cu_seqlens, s)), end = uint(ldi(p.cu_seqlens, s + 1u));
  if (end - start > p.rec_max) return;  // workgroup-uniform: before any barrier
  const uint j = gl_WorkGroupID.z * WG + lid;
  const bool mine = j < p.dv;
  const uint kh = h / (p.Hv / p.Hk);
  const uint slot = uint(ldi(p.state_slots, s));
  const bool init = ldi(p.has_initial, s) != 0;
  const uint so = (slot * p.Hv + h) * p.dk * p.dv;
  float S[MAX_DK];
  for (uint i = 0u; i < p.dk; ++i) S[i] = (init && mine) ? ldf(p.state, so + i * p.dv + j) : 0.0;
  const float q_scale = inversesqrt(float(p.dk));
  for (uint t = start; t < end; ++t) {
    float sq = 0.0, sk = 0.0;
    for (uint i = lid; i < p.dk; i += WG) {
      const float qv = ldf(p.q, t * p.q_stride + kh * p.dk + i), kv = ldf(p.k, t * p.k_stride + kh * p.dk + i);
      qs[i] = qv;
      ks[i] = kv;
      sq += qv * qv;
      sk += kv * kv;
    }
    red_q[lid] = sq;
    red_k[lid] = sk;
    barrier();
    for (uint r = WG / 2u; r > 0u; r >>= 1) {
      if (lid < r) {
        red_q[lid] += red_q[lid + r];
        red_k[lid] += red_k[lid + r];
      }
      barrier();
    }
    const float qn = inversesqrt(red_q[0] + 1e-6) * q_scale, kn = inversesqrt(red_k[0] + 1e-6);
    const float g = ldf(p.gb, 2u * (t * p.Hv + h)), beta = ldf(p.gb, 2u * (t * p.Hv + h) + 1u);
    if (mine) {
      const float decay = exp(g);
      float kv_mem = 0.0;
      for (uint i = 0u; i < p.dk; ++i) {
        S[i] *= decay;
        kv_mem += S[i] * ks[i] * kn;
      }
      const float delta = (ldf(p.v, t * p.v_stride + h * p.dv + j) - kv_mem) * beta;
      float o = 0.0;
      for (uint i = 0u; i < p.dk; ++i) {
        S[i] += ks[i] * kn * delta;
        o += S[i] * qs[i] * qn;
      }
      stf(p.out_, t * p.out_stride + h * p.dv + j, o);
    }
    barrier();  // qs, ks and the reductions are rewritten by the next token
  }
  if (mine)
    for (uint i = 0u; i < p.dk; ++i) stf(p.state, so + i * p.dv + j, S[i]);
}
