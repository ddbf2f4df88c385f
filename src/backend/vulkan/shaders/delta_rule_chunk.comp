// The chunked gated delta rule, part 2 of 2 (part 1, delta_chunk_prep.comp, left T = (I + A)⁻¹,
// QK and the per-row scalars of every chunk in mats / rows). Workgroup = (dv tile of COLS columns,
// value head h, sequence s) over the sequences longer than rec_max; the sequence's chunks of 64 rows
// in order, carrying the state tile S [dk, COLS] in shared memory. Per chunk, with k, q the raw rows
// (the norms and decays are in the row scalars):
//   R    = β V − (β e^γ |k|⁻¹) ⊙ (K S)           Vnew = T R
//   O    = (e^γ |q|⁻¹/sqrt(dk)) ⊙ (Q S) + QK Vnew  (to out)
//   S    ← e^{γ_L} S + Kᵀ ((e^{γ_L−γ} |k|⁻¹) ⊙ Vnew)
// (the WY / UT form of fla's chunk_gated_delta_rule; docs/models.md's Vnew = U − W S with U, W folded).
// Shared memory: S (dk <= 128 rows of 32) + V / R / Vnew (64 x 32) + row scalars = 25.3 KiB, under
// lavapipe's and Apple's 32 KiB. No subgroup operations: any subgroup size.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t q, k, v, rows, mats, state, out_, cu_seqlens, state_slots, has_initial;
  uint Hk, Hv, dk, dv, q_stride, k_stride, v_stride, out_stride, rec_max;
} p;
const uint C = 64u;
const uint WG = 256u;
const uint COLS = 32u;
const uint MAX_DK = 128u;
const uint RG = WG / COLS;      // row groups: invocation (rg, jl) owns rows rg + RG m of column jl
const uint CR = C / RG;         // chunk rows per invocation
const uint SR = MAX_DK / RG;    // state rows per invocation
const uint NI = 5u;             // row scalars kept: β, β e^γ |k|⁻¹, e^γ |q|⁻¹, e^{γ_L−γ} |k|⁻¹, e^{γ_L}
shared float Ss[MAX_DK * COLS];
shared float Vs[C * COLS];
shared float info[C * NI];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint jl = lid % COLS, rg = lid / COLS;
  const uint h = gl_WorkGroupID.y, s = gl_WorkGroupID.z;
  const uint j = gl_WorkGroupID.x * COLS + jl;
  const bool mine = j < p.dv;
  const uint start = uint(ldi(p.cu_seqlens, s)), len = uint(ldi(p.cu_seqlens, s + 1u)) - start;
  if (len <= p.rec_max) return;  // workgroup-uniform: before any barrier
  const uint kh = h / (p.Hv / p.Hk);
  const uint slot = uint(ldi(p.state_slots, s));
  const bool init = ldi(p.has_initial, s) != 0;
  const uint so = (slot * p.Hv + h) * p.dk * p.dv;
  // Each invocation loads, updates and stores the same state elements: no barrier of their own.
  for (uint m = 0u; m < SR; ++m) {
    const uint i = rg + RG * m;
    if (i < p.dk) Ss[i * COLS + jl] = (init && mine) ? ldf(p.state, so + i * p.dv + j) : 0.0;
  }

  for (uint c0 = 0u; c0 < len; c0 += C) {
    const uint n = min(C, len - c0), row0 = start + c0;
    barrier();  // the previous chunk is done with Vs, info and S
    for (uint idx = lid; idx < C * NI; idx += WG) {
      const uint r = idx / NI, f = idx % NI;
      info[idx] = r < n ? ldf(p.rows, ((row0 + r) * p.Hv + h) * 8u + f) : 0.0;
    }
    for (uint m = 0u; m < CR; ++m) {
      const uint r = rg + RG * m;
      Vs[r * COLS + jl] = (r < n && mine) ? ldf(p.v, (row0 + r) * p.v_stride + h * p.dv + j) : 0.0;
    }
    barrier();

    // R = β V − (β e^γ |k|⁻¹) (K S), in place (each element read and written by its owner).
    for (uint m = 0u; m < CR; ++m) {
      const uint r = rg + RG * m;
      if (r >= n) continue;
      const uint kb = (row0 + r) * p.k_stride + kh * p.dk;
      float acc = 0.0;
      for (uint i = 0u; i < p.dk; ++i) acc += ldf(p.k, kb + i) * Ss[i * COLS + jl];
      Vs[r * COLS + jl] = info[r * NI] * Vs[r * COLS + jl] - info[r * NI + 1u] * acc;
    }
    barrier();

    // Vnew = T R (T unit lower triangular).
    float nv[CR];
    for (uint m = 0u; m < CR; ++m) {
      const uint r = rg + RG * m;
      nv[m] = 0.0;
      if (r >= n) continue;
      const uint tb = ((row0 + r) * p.Hv + h) * 2u * C;
      float acc = Vs[r * COLS + jl];
      for (uint s2 = 0u; s2 < r; ++s2) acc += ldf(p.mats, tb + s2) * Vs[s2 * COLS + jl];
      nv[m] = acc;
    }
    barrier();
    for (uint m = 0u; m < CR; ++m) Vs[(rg + RG * m) * COLS + jl] = nv[m];
    barrier();

    // O = (e^γ |q|⁻¹/sqrt(dk)) (Q S) + QK Vnew.
    for (uint m = 0u; m < CR; ++m) {
      const uint r = rg + RG * m;
      if (r >= n) continue;
      const uint qb = (row0 + r) * p.q_stride + kh * p.dk, tb = ((row0 + r) * p.Hv + h) * 2u * C + C;
      float qs = 0.0;
      for (uint i = 0u; i < p.dk; ++i) qs += ldf(p.q, qb + i) * Ss[i * COLS + jl];
      float o = info[r * NI + 2u] * qs;
      for (uint s2 = 0u; s2 <= r; ++s2) o += ldf(p.mats, tb + s2) * Vs[s2 * COLS + jl];
      if (mine) stf(p.out_, (row0 + r) * p.out_stride + h * p.dv + j, o);
    }
    barrier();  // O has read S; the update below overwrites it

    // S ← e^{γ_L} S + Kᵀ ((e^{γ_L−γ} |k|⁻¹) ⊙ Vnew); Vs rows past n are 0.
    const float el = info[4u];
    for (uint m = 0u; m < SR; ++m) {
      const uint i = rg + RG * m;
      if (i >= p.dk) continue;
      float acc = el * Ss[i * COLS + jl];
      for (uint r = 0u; r < n; ++r)
        acc += info[r * NI + 3u] * ldf(p.k, (row0 + r) * p.k_stride + kh * p.dk + i) * Vs[r * COLS + jl];
      Ss[i * COLS + jl] = acc;
    }
  }
  if (mine)
    for (uint m = 0u; m < SR; ++m) {
      const uint i = rg + RG * m;
      if (i < p.dk) stf(p.state, so + i * p.dv + j, Ss[i * COLS + jl]);
    }
}
