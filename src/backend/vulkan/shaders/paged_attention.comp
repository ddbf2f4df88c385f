// Unified varlen paged attention (prefill chunks and decodes in one dispatch, as the CUDA kernel):
// one workgroup per (query row t, query head h). Row t belongs to sequence s (binary search of
// cu_seqlens); its context position is seq_lens[s] - q_len + i and it attends causally to keys
// [lo, pos] read through block_tables[s] (lo from the sliding window). Keys go in chunks of 128, one
// per invocation: scores, then an online-softmax update (fp32), then each invocation accumulates
// its output dims over the chunk's keys (rows of V read coalesced).
#version 450
#include "common.glsl"
layout(local_size_x = 128) in;
layout(push_constant) uniform P {
  uint64_t q, k_cache, v_cache, out_, cu_seqlens, seq_lens, block_tables;
  uint num_seqs, Hq, Hkv, D, Dv, block_size, max_blocks, q_stride, out_stride, k_dt, v_dt, window;
  float scale, softcap;
} p;
const uint WG = 128u;
const uint MAX_D = 512u;
shared float qs[MAX_D];
shared float scores[WG];
shared float red[WG];

float reduce_max(uint lid, float v) {
  red[lid] = v;
  barrier();
  for (uint k = WG / 2u; k > 0u; k >>= 1) {
    if (lid < k) red[lid] = max(red[lid], red[lid + k]);
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}

float reduce_sum(uint lid, float v) {
  red[lid] = v;
  barrier();
  for (uint k = WG / 2u; k > 0u; k >>= 1) {
    if (lid < k) red[lid] += red[lid + k];
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
  // The sequence of row t: the last s with cu_seqlens[s] <= t.
  uint lo_s = 0u, hi_s = p.num_seqs;
  while (hi_s - lo_s > 1u) {
    const uint mid = (lo_s + hi_s) / 2u;
    if (uint(ldi(p.cu_seqlens, mid)) <= t) lo_s = mid; else hi_s = mid;
  }
  const uint s = lo_s;
  const int start = ldi(p.cu_seqlens, s), q_len = ldi(p.cu_seqlens, s + 1u) - start;
  const int pos = ldi(p.seq_lens, s) - q_len + (int(t) - start);
  const int lo = p.window > 0u ? max(0, pos - int(p.window) + 1) : 0;
  const uint kvh = h / (p.Hq / p.Hkv);

  for (uint d = lid; d < p.D; d += WG) qs[d] = ldf(p.q, t * p.q_stride + h * p.D + d) * p.scale;
  barrier();

  float acc[MAX_D / WG];
  for (uint c = 0u; c < MAX_D / WG; ++c) acc[c] = 0.0;
  float m = -1.0 / 0.0, l = 0.0;
  for (int j0 = lo; j0 <= pos; j0 += int(WG)) {
    const int j = j0 + int(lid);
    float sc = -1.0 / 0.0;
    if (j <= pos) {
      const uint block = uint(ldi(p.block_tables, s * p.max_blocks + uint(j) / p.block_size));
      const uint slot = block * p.block_size + uint(j) % p.block_size;
      const uint base = (slot * p.Hkv + kvh) * p.D;
      float dot = 0.0;
      for (uint d = 0u; d < p.D; ++d) dot += qs[d] * ld(p.k_cache, p.k_dt, base + d);
      sc = p.softcap > 0.0 ? p.softcap * safe_tanh(dot / p.softcap) : dot;
    }
    const float m_new = max(m, reduce_max(lid, sc));
    const float e = j <= pos ? exp(sc - m_new) : 0.0;
    scores[lid] = e;
    const float corr = exp(m - m_new);  // 0 on the first chunk (m = -inf)
    l = l * corr + reduce_sum(lid, e);  // reduce_sum's barriers publish scores[]
    m = m_new;
    const uint n = uint(min(int(WG), pos - j0 + 1));
    for (uint c = 0u; c < MAX_D / WG; ++c) {
      const uint d = lid + c * WG;
      if (d >= p.Dv) break;
      float a = acc[c] * corr;
      for (uint jj = 0u; jj < n; ++jj) {
        const uint jk = uint(j0) + jj;
        const uint block = uint(ldi(p.block_tables, s * p.max_blocks + jk / p.block_size));
        const uint slot = block * p.block_size + jk % p.block_size;
        a += scores[jj] * ld(p.v_cache, p.v_dt, (slot * p.Hkv + kvh) * p.Dv + d);
      }
      acc[c] = a;
    }
    barrier();  // scores[] is rewritten by the next chunk
  }
  const float inv_l = 1.0 / l;
  for (uint c = 0u; c < MAX_D / WG; ++c) {
    const uint d = lid + c * WG;
    if (d < p.Dv) stf(p.out_, t * p.out_stride + h * p.Dv + d, acc[c] * inv_l);
  }
}
