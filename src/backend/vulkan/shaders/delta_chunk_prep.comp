// The chunked gated delta rule, part 1 of 2 (part 2: delta_rule_chunk.comp): everything of a chunk
// that does not depend on the state, for every chunk at once. Workgroup = (chunk c, value head h,
// sequence s) over the sequences longer than rec_max (the others take delta_rule.comp). Per chunk
// of C = 64 rows (n of them real; γ = inclusive cumsum of g inside the chunk, k̂ / q̃ the l2-normed
// rows, q̃ also scaled by 1/sqrt(dk)):
//   A  = strictly lower β_r e^{γ_r−γ_s} k̂_r·k̂_s        T = (I + A)⁻¹   (column-wise substitution)
//   QK = lower e^{γ_r−γ_s} q̃_r·k̂_s
// written per real row r (global token t) to mats[(t Hv + h) 2C ..]: T row r, then QK row r; and
// the row's scalars to rows[(t Hv + h) 8 ..]: β, β e^γ |k|⁻¹, e^γ |q|⁻¹/sqrt(dk), e^{γ_L−γ} |k|⁻¹,
// e^{γ_L} (γ_L = γ of the last real row). Rows past n are padding (β = g = 0) and never stored.
// Part 2 then needs only raw q, k rows and these: its per-dv-tile work has no dk x C x C product.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t q, k, gb, cu_seqlens, mats, rows;
  uint Hk, Hv, dk, q_stride, k_stride, rec_max;
} p;
const uint C = 64u;
const uint WG = 256u;
const uint KT = 32u;       // dk columns per tile of the K̂K̂ᵀ / Q̃K̂ᵀ products
const uint KS = KT + 1u;   // row stride of a tile (a GPU reads rows aq + 16 m of one column)
const uint AS = C + 1u;    // row stride of A
shared float tile[2u * C * KS];  // K tile, Q tile; then A [C][AS]
shared float gam[C], bet[C], rq[C], rk[C];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint c = gl_WorkGroupID.x, h = gl_WorkGroupID.y, s = gl_WorkGroupID.z;
  const uint start = uint(ldi(p.cu_seqlens, s)), len = uint(ldi(p.cu_seqlens, s + 1u)) - start;
  if (len <= p.rec_max || c * C >= len) return;  // workgroup-uniform: before any barrier
  const uint n = min(C, len - c * C), row0 = start + c * C;
  const uint kh = h / (p.Hv / p.Hk);

  // Inverse norms: invocations 0..63 of k rows, 64..127 of q rows; 255 scans g.
  if (lid < 2u * C) {
    const uint r = lid % C;
    const bool isq = lid >= C;
    float ss = 0.0;
    if (r < n) {
      const uint base = isq ? (row0 + r) * p.q_stride + kh * p.dk : (row0 + r) * p.k_stride + kh * p.dk;
      for (uint i = 0u; i < p.dk; ++i) {
        const float x = ldf(isq ? p.q : p.k, base + i);
        ss += x * x;
      }
    }
    const float inv = r < n ? inversesqrt(ss + 1e-6) : 0.0;
    if (isq) rq[r] = inv * inversesqrt(float(p.dk));
    else rk[r] = inv;
  } else if (lid == WG - 1u) {
    float acc = 0.0;
    for (uint r = 0u; r < C; ++r) {
      float beta = 0.0;
      if (r < n) {
        acc += ldf(p.gb, 2u * ((row0 + r) * p.Hv + h));
        beta = ldf(p.gb, 2u * ((row0 + r) * p.Hv + h) + 1u);
      }
      gam[r] = acc;
      bet[r] = beta;
    }
  }

  // Raw K Kᵀ and Q Kᵀ: invocation (aq, ac) accumulates rows aq + 16 m, columns ac + 16 j.
  const uint aq = lid / 16u, ac = lid % 16u;
  float acc_a[16], acc_q[16];
  for (uint e = 0u; e < 16u; ++e) acc_a[e] = acc_q[e] = 0.0;
  for (uint i0 = 0u; i0 < p.dk; i0 += KT) {
    barrier();  // the previous tile's readers are done
    for (uint idx = lid; idx < C * KT; idx += WG) {
      const uint r = idx / KT, i = idx % KT;
      const bool ok = r < n && i0 + i < p.dk;
      tile[r * KS + i] = ok ? ldf(p.k, (row0 + r) * p.k_stride + kh * p.dk + i0 + i) : 0.0;
      tile[C * KS + r * KS + i] = ok ? ldf(p.q, (row0 + r) * p.q_stride + kh * p.dk + i0 + i) : 0.0;
    }
    barrier();
    for (uint i = 0u; i < KT; ++i) {
      float kc[4];
      for (uint j = 0u; j < 4u; ++j) kc[j] = tile[(ac + 16u * j) * KS + i];
      for (uint m = 0u; m < 4u; ++m) {
        const float kr = tile[(aq + 16u * m) * KS + i], qr = tile[C * KS + (aq + 16u * m) * KS + i];
        for (uint j = 0u; j < 4u; ++j) {
          acc_a[m * 4u + j] += kr * kc[j];
          acc_q[m * 4u + j] += qr * kc[j];
        }
      }
    }
  }
  barrier();  // the tiles become A

  for (uint m = 0u; m < 4u; ++m)
    for (uint j = 0u; j < 4u; ++j) {
      const uint r = aq + 16u * m, cc = ac + 16u * j;
      const float dec = cc <= r ? exp(gam[r] - gam[cc]) : 0.0;
      tile[r * AS + cc] = cc < r ? bet[r] * dec * acc_a[m * 4u + j] * rk[r] * rk[cc] : 0.0;
      if (r < n) stf(p.mats, ((row0 + r) * p.Hv + h) * 2u * C + C + cc, dec * acc_q[m * 4u + j] * rq[r] * rk[cc]);
    }
  if (lid < n) {
    const uint r = lid;
    const float gl = gam[n - 1u], eg = exp(gam[r]);
    const uint o = ((row0 + r) * p.Hv + h) * 8u;
    stf(p.rows, o, bet[r]);
    stf(p.rows, o + 1u, bet[r] * eg * rk[r]);
    stf(p.rows, o + 2u, eg * rq[r]);
    stf(p.rows, o + 3u, exp(gl - gam[r]) * rk[r]);
    stf(p.rows, o + 4u, exp(gl));
  }
  barrier();

  // Column `col` of T: T[r][col] = [r == col] − Σ_{col ≤ s < r} A[r][s] T[s][col].
  if (lid < n) {
    const uint col = lid;
    float tc[C];
    for (uint r = 0u; r < n; ++r) {
      float t = r == col ? 1.0 : 0.0;
      if (r > col) {
        for (uint s2 = col; s2 < r; ++s2) t -= tile[r * AS + s2] * tc[s2];
      }
      tc[r] = t;
      stf(p.mats, ((row0 + r) * p.Hv + h) * 2u * C + col, t);
    }
  }
}
