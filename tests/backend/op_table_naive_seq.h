// The op table's references of the ops over a step's sequences: q/k norm + RoPE + cache write, RoPE
// alone, the cache write alone, paged attention, and Gated DeltaNet (docs/models.md), plain loops in double.
#pragma once

#include "op_table_naive.h"
#include "op_table_naive_moe.h"
#include "op_table_naive_vision.h"

namespace pagoda::naive {

// transformers' inv_freq (fp32: 1 / theta^(2i/rot)), with Llama 3 scaling
// (_compute_llama3_parameters: factor 8, low 1, high 4, original 8192) where asked, in fp32 as
// torch evaluates it on an fp32 tensor.
inline std::vector<float> inv_freq(int64_t rot, float theta, bool llama3) {
  std::vector<float> f;
  for (int64_t i = 0; i < rot / 2; ++i)
    f.push_back(1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rot)));
  if (!llama3) return f;
  const float factor = 8.0f, low = 1.0f, high = 4.0f, old = 8192.0f;
  const float low_wavelen = old / low, high_wavelen = old / high;
  for (float& x : f) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / x;
    const float scaled = wavelen > low_wavelen ? x / factor : x;
    const float smooth = (old / wavelen - low) / (high - low);
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    x = medium ? (1.0f - smooth) * scaled / factor + smooth * scaled : scaled;
  }
  return f;
}

// transformers' _compute_yarn_parameters (beta_fast 32, beta_slow 1, truncate), in double: the pair
// index where a wavelength turns r times within the original context is rot·ln(old / (2πr)) /
// (2 ln theta); pairs below the first bound keep theta^(-2j/rot), pairs past the second get it
// divided by the factor, a linear ramp between.
inline std::vector<float> yarn_inv_freq(int64_t rot, double theta, double factor, double old) {
  const auto bound = [&](double turns) {
    return static_cast<double>(rot) * std::log(old / (turns * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
  };
  const double lo = std::max(std::floor(bound(32.0)), 0.0);
  double hi = std::min(std::ceil(bound(1.0)), static_cast<double>(rot - 1));
  if (hi == lo) hi += 0.001;
  std::vector<float> f;
  for (int64_t j = 0; j < rot / 2; ++j) {
    const double plain = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(rot));
    const double interpolated = std::clamp((static_cast<double>(j) - lo) / (hi - lo), 0.0, 1.0);
    f.push_back(static_cast<float>(plain / factor * interpolated + plain * (1.0 - interpolated)));
  }
  return f;
}

// Rotation of the first `rot` dims of one head at position pos (angles in fp32, as transformers
// multiplies positions by inv_freq in fp32; cos and sin times `scale`): NeoX pairs (i, i + rot/2),
// interleaved ones (2i, 2i + 1).
inline void rope_head(double* x, int64_t rot, const std::vector<float>& freq, int32_t pos, bool interleaved = false,
                      double scale = 1.0) {
  const int64_t half = rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * freq[static_cast<size_t>(i)];
    const double c = std::cos(static_cast<double>(angle)) * scale, s = std::sin(static_cast<double>(angle)) * scale;
    const int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
    const double x1 = x[i0], x2 = x[i1];
    x[i0] = x1 * c - x2 * s;
    x[i1] = x2 * c + x1 * s;
  }
}

// RoPE alone on x [T, H, D]: token t at positions[t], every head; dims past rotary_dim untouched.
inline Outputs rope(const OpData& in) {
  const HostTensor& x = in.at("x");
  const int64_t t = x.shape[0], h = x.shape[1], d = x.shape[2];
  const int64_t rot = in.param("rotary_dim") > 0 ? static_cast<int64_t>(in.param("rotary_dim")) : d;
  const double theta = in.param("theta"), factor = in.param("factor");
  std::vector<float> freq;
  switch (static_cast<RopeScaling>(static_cast<int32_t>(in.param("scaling")))) {
    case RopeScaling::None: freq = inv_freq(rot, static_cast<float>(theta), false); break;
    case RopeScaling::Llama3: freq = inv_freq(rot, static_cast<float>(theta), true); break;
    case RopeScaling::Linear:
      freq = inv_freq(rot, static_cast<float>(theta), false);
      for (float& f : freq) f /= static_cast<float>(factor);
      break;
    case RopeScaling::Yarn: freq = yarn_inv_freq(rot, theta, factor, in.param("original_max_positions")); break;
  }
  std::vector<double> out = values(x);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t head = 0; head < h; ++head)
      rope_head(&out[static_cast<size_t>((r * h + head) * d)], rot, freq, in.at("positions").i[static_cast<size_t>(r)],
                in.param("interleaved") != 0, in.param("attention_factor"));
  for (double& v : out) v = rnd(v, x.dtype);
  return {{"x", out}};
}

inline Outputs qk_norm_rope_and_cache(const OpData& in) {
  const HostTensor &q = in.at("q"), &k = in.at("k"), &v = in.at("v"), &kc = in.at("k_cache");
  const int64_t t = q.shape[0], hq = q.shape[1], d = q.shape[2], hkv = k.shape[1];
  const int64_t rot = static_cast<int64_t>(in.param("rotary_dim"));
  const bool norm = in.param("norm") != 0, zc = in.param("zero_centered") != 0;
  const std::vector<float> freq = inv_freq(rot, static_cast<float>(in.param("theta")), in.param("llama3") != 0);
  std::vector<double> qo = values(q), ko = values(k), kco = values(kc), vco = values(in.at("v_cache"));
  auto head = [&](std::vector<double>& x, const HostTensor& w, int64_t at, int32_t pos) {
    if (norm) {
      std::vector<double> tmp(x.begin() + at, x.begin() + at + d);
      rms_norm_row(tmp.data(), w, d, in.param("eps"), zc, &x[static_cast<size_t>(at)]);
    }
    rope_head(&x[static_cast<size_t>(at)], rot, freq, pos);
  };
  for (int64_t r = 0; r < t; ++r) {
    const int32_t pos = in.meta.positions[static_cast<size_t>(r)], slot = in.meta.slot_mapping[static_cast<size_t>(r)];
    for (int64_t h = 0; h < hq; ++h) head(qo, in.at("q_norm"), (r * hq + h) * d, pos);
    for (int64_t h = 0; h < hkv; ++h) {
      head(ko, in.at("k_norm"), (r * hkv + h) * d, pos);
      if (slot < 0) continue;
      for (int64_t e = 0; e < d; ++e) {
        const size_t dst = static_cast<size_t>((slot * hkv + h) * d + e), src = static_cast<size_t>((r * hkv + h) * d + e);
        kco[dst] = rnd(ko[src], kc.dtype);
        vco[dst] = rnd(v.f[src], kc.dtype);
      }
    }
  }
  for (double& x : qo) x = rnd(x, q.dtype);
  return {{"q", qo}, {"k_cache", kco}, {"v_cache", vco}};
}

inline Outputs reshape_and_cache(const OpData& in) {
  const HostTensor &k = in.at("k"), &v = in.at("v"), &kc = in.at("k_cache");
  const int64_t t = k.shape[0], row = k.row_numel();
  std::vector<double> kco = values(kc), vco = values(in.at("v_cache"));
  for (int64_t r = 0; r < t; ++r) {
    const int32_t slot = in.at("slot_mapping").i[static_cast<size_t>(r)];
    if (slot < 0) continue;
    for (int64_t e = 0; e < row; ++e) {
      kco[static_cast<size_t>(slot * row + e)] = rnd(k.at(r * row + e), kc.dtype);
      vco[static_cast<size_t>(slot * row + e)] = rnd(v.at(r * row + e), kc.dtype);
    }
  }
  return {{"k_cache", kco}, {"v_cache", vco}};
}

// Dense causal attention of every query row over its sequence's keys, read through the block table.
inline Outputs paged_attention(const OpData& in) {
  const HostTensor &q = in.at("q"), &kc = in.at("k_cache"), &vc = in.at("v_cache");
  const int64_t hq = q.shape[1], d = q.shape[2], bs = kc.shape[1], hkv = kc.shape[2], group = hq / hkv;
  const double scale = in.param("scale"), cap = in.param("softcap");
  const int64_t window = static_cast<int64_t>(in.param("window"));
  const optable::HostMeta& m = in.meta;
  std::vector<double> out(q.f.size(), 0.0);
  for (int32_t s = 0; s < m.num_seqs(); ++s) {
    const int64_t q_len = m.cu_seqlens_q[s + 1] - m.cu_seqlens_q[s], ctx = m.seq_lens[static_cast<size_t>(s)];
    auto slot = [&](int64_t j) {
      return int64_t{m.block_tables[static_cast<size_t>(s * m.max_blocks_per_seq + j / bs)]} * bs + j % bs;
    };
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t row = m.cu_seqlens_q[s] + i, p = ctx - q_len + i;
      const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kvh = h / group;
        std::vector<double> sc;
        for (int64_t j = lo; j <= p; ++j) {
          double acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += double(q.at((row * hq + h) * d + e)) * kc.at((slot(j) * hkv + kvh) * d + e);
          acc *= scale;
          sc.push_back(cap > 0 ? cap * std::tanh(acc / cap) : acc);
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < d; ++e) {
          double o = 0;
          for (int64_t j = lo; j <= p; ++j) o += sc[static_cast<size_t>(j - lo)] * vc.at((slot(j) * hkv + kvh) * d + e);
          out[static_cast<size_t>((row * hq + h) * d + e)] = rnd(o / sum, q.dtype);
        }
      }
    }
  }
  return {{"out", out}};
}

// out[t, c] = silu(Σ_j w[c, j] · in[t − (K−1) + j, c]), the inputs before a sequence's first new
// token from its slot's state (zeros without initial state); the slot keeps the last K−1 inputs.
inline Outputs causal_conv1d_silu(const OpData& in) {
  const HostTensor &x = in.at("x"), &w = in.at("w"), &st = in.at("conv_state");
  const int64_t c = x.shape[1], k = w.shape[1], hist = k - 1;
  std::vector<double> out(x.f.size()), state = values(st);
  const optable::HostMeta& m = in.meta;
  for (int32_t s = 0; s < m.num_seqs(); ++s) {
    const int64_t slot = m.state_slots[static_cast<size_t>(s)], start = m.cu_seqlens_q[s];
    const int64_t len = m.cu_seqlens_q[s + 1] - start;
    for (int64_t ch = 0; ch < c; ++ch) {
      double* sp = &state[static_cast<size_t>((slot * c + ch) * hist)];
      std::vector<double> seq;
      for (int64_t j = 0; j < hist; ++j) seq.push_back(m.has_initial_state[static_cast<size_t>(s)] ? sp[j] : 0.0);
      for (int64_t r = 0; r < len; ++r) seq.push_back(x.at((start + r) * c + ch));
      for (int64_t r = 0; r < len; ++r) {
        double acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += w.at(ch * k + j) * seq[static_cast<size_t>(r + j)];
        out[static_cast<size_t>((start + r) * c + ch)] = rnd(silu(acc), x.dtype);
      }
      for (int64_t j = 0; j < hist; ++j) sp[j] = seq[seq.size() - static_cast<size_t>(hist - j)];
    }
  }
  return {{"out", out}, {"conv_state", state}};
}

// docs/models.md's gated delta rule, token by token (the recurrent form), in double.
inline Outputs gated_delta_rule(const OpData& in) {
  const int64_t hk = static_cast<int64_t>(in.param("hk")), hv = static_cast<int64_t>(in.param("hv"));
  const int64_t dk = static_cast<int64_t>(in.param("dk")), dv = static_cast<int64_t>(in.param("dv"));
  const HostTensor &qkv = in.at("qkv"), &ba = in.at("ba"), &alog = in.at("A_log"), &dtb = in.at("dt_bias");
  const int64_t ld = qkv.shape[1], t = qkv.shape[0];
  std::vector<double> state = values(in.at("state")), out(static_cast<size_t>(t * hv * dv));
  const optable::HostMeta& m = in.meta;
  for (int32_t s = 0; s < m.num_seqs(); ++s)
    for (int64_t h = 0; h < hv; ++h) {
      double* S = &state[static_cast<size_t>((m.state_slots[static_cast<size_t>(s)] * hv + h) * dk * dv)];
      if (!m.has_initial_state[static_cast<size_t>(s)]) std::fill(S, S + dk * dv, 0.0);
      const int64_t kh = h / (hv / hk);
      for (int64_t r = m.cu_seqlens_q[s]; r < m.cu_seqlens_q[s + 1]; ++r) {
        auto qv = [&](int64_t i) { return double(qkv.at(r * ld + kh * dk + i)); };
        auto kv = [&](int64_t i) { return double(qkv.at(r * ld + hk * dk + kh * dk + i)); };
        double qn = 0, kn = 0;
        for (int64_t i = 0; i < dk; ++i) qn += qv(i) * qv(i), kn += kv(i) * kv(i);
        std::vector<double> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk));
        for (int64_t i = 0; i < dk; ++i) {
          q[static_cast<size_t>(i)] = qv(i) / std::sqrt(qn + 1e-6) / std::sqrt(double(dk));
          k[static_cast<size_t>(i)] = kv(i) / std::sqrt(kn + 1e-6);
        }
        const double beta = sigmoid(ba.at(r * 2 * hv + h));
        const double g = -std::exp(double(alog.at(h))) * softplus(double(ba.at(r * 2 * hv + hv + h)) + dtb.at(h));
        for (int64_t e = 0; e < dk * dv; ++e) S[e] *= std::exp(g);
        for (int64_t j = 0; j < dv; ++j) {
          double sk = 0;
          for (int64_t i = 0; i < dk; ++i) sk += S[i * dv + j] * k[static_cast<size_t>(i)];
          const double delta = beta * (qkv.at(r * ld + 2 * hk * dk + h * dv + j) - sk);
          for (int64_t i = 0; i < dk; ++i) S[i * dv + j] += k[static_cast<size_t>(i)] * delta;
        }
        for (int64_t j = 0; j < dv; ++j) {
          double o = 0;
          for (int64_t i = 0; i < dk; ++i) o += S[i * dv + j] * q[static_cast<size_t>(i)];
          out[static_cast<size_t>((r * hv + h) * dv + j)] = rnd(o, qkv.dtype);
        }
      }
    }
  return {{"out", out}, {"state", state}};
}

inline Outputs gated_rms_norm(const OpData& in) {
  const HostTensor &x = in.at("x"), &z = in.at("z"), &w = in.at("w");
  const int64_t dv = x.shape[2], rows = x.numel() / dv;
  std::vector<double> xs = values(x), out(xs.size());
  for (int64_t r = 0; r < rows; ++r) {
    rms_norm_row(&xs[static_cast<size_t>(r * dv)], w, dv, 1e-6, false, &out[static_cast<size_t>(r * dv)]);
    for (int64_t j = 0; j < dv; ++j)
      out[static_cast<size_t>(r * dv + j)] = rnd(out[static_cast<size_t>(r * dv + j)] * silu(z.at(r * dv + j)), x.dtype);
  }
  return {{"out", out}};
}

// The reference of every op in the table, by Backend method name.
inline const std::map<std::string, std::function<Outputs(const OpData&)>>& formulas() {
  static const std::map<std::string, std::function<Outputs(const OpData&)>> f = {
      {"embedding", embedding},
      {"rms_norm", rms_norm},
      {"add_rms_norm", add_rms_norm},
      {"linear", linear},
      {"linear_fp8", linear_fp8},
      {"linear_int4", linear_int4},
      {"silu_mul", silu_mul},
      {"gelu_tanh_mul", gelu_tanh_mul},
      {"scale", scale},
      {"softcap", softcap},
      {"linear_silu_mul", linear_silu_mul},
      {"sigmoid_gate", sigmoid_gate},
      {"add_bias", add_bias},
      {"gather_rows", gather_rows},
      {"argmax_rows", argmax_rows},
      {"apply_token_mask", apply_token_mask},
      {"add", add},
      {"rope", rope},
      {"qk_norm_rope_and_cache", qk_norm_rope_and_cache},
      {"reshape_and_cache", reshape_and_cache},
      {"paged_attention", paged_attention},
      {"causal_conv1d_silu", causal_conv1d_silu},
      {"gated_delta_rule", gated_delta_rule},
      {"gated_rms_norm", gated_rms_norm},
      {"moe_route", moe_route},
      {"moe_permute", moe_permute},
      {"moe_grouped_linear", moe_grouped_linear},
      {"moe_unpermute", moe_unpermute},
      {"lora_expand", lora_expand},
      {"layer_norm", layer_norm},
      {"gelu", gelu},
      {"rope_axes", rope_axes},
      {"segment_attention", segment_attention},
  };
  return f;
}

}  // namespace pagoda::naive
