// Op table test cases of attention: qk_norm_rope_and_cache, rope, reshape_and_cache, paged_attention over
// ragged varlen batches (decodes, prefills, chunks starting mid-sequence), block sizes 8..128, GQA
// ratios, head dims, KV dtypes, sliding windows, soft-capping, split-KV contexts and plans made
// from the maxima alone (graph capture).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "bench/op_table.h"

namespace pagoda::optable {
namespace {

struct Seq {
  int32_t q_len, ctx;
};

// kv == F32 with kv_is_act: the cache in the activation dtype (what --kv-cache-dtype auto gives).
struct KvDtype {
  DType dtype = DType::F32;
  bool is_act = true;
  DType of(DType act) const { return is_act ? act : dtype; }
  std::string name() const { return is_act ? "act" : dtype_name(dtype); }
};

// The FP8 KV cache (--kv-cache-dtype fp8) runs on the CPU and CUDA backends, not yet on Vulkan.
void not_on_vulkan_for_fp8(OpCase& c, DType kv) {
  if (kv != DType::F8_E4M3) return;
  auto base = c.unsupported;
  c.unsupported = [base](Backend& be) {
    if (be.device() == Device::Vulkan) return std::string("the FP8 KV cache runs on the CPU and CUDA backends only");
    return base ? base(be) : std::string();
  };
}

HostMeta meta_for(const std::vector<Seq>& seqs, int32_t bs, uint32_t seed, int32_t* num_blocks) {
  std::vector<int32_t> ctx, q;
  for (const Seq& s : seqs) {
    ctx.push_back(s.ctx);
    q.push_back(s.q_len);
  }
  return make_meta(ctx, q, bs, seed, num_blocks);
}

std::string describe(const std::vector<Seq>& seqs) {
  std::string s;
  for (size_t i = 0; i < seqs.size() && i < 8; ++i)
    s += (i ? "," : "") + std::to_string(seqs[i].q_len) + "/" + std::to_string(seqs[i].ctx);
  if (seqs.size() > 8) s += ",... (" + std::to_string(seqs.size()) + " seqs)";
  return "[" + s + "]";
}

// A cache pool [num_blocks, bs, hkv, d] holding NaN wherever no key of any sequence lives (a kernel
// that reads there poisons its output), keys and values where they do.
HostTensor cache_pool(const HostMeta& m, int32_t num_blocks, int64_t hkv, int64_t d, DType dt, uint32_t seed) {
  HostTensor c;
  c.dtype = dt;
  c.shape = {num_blocks, m.block_size, hkv, d};
  c.f.assign(static_cast<size_t>(c.numel()), std::numeric_limits<float>::quiet_NaN());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t row = hkv * d;
  for (int32_t s = 0; s < m.num_seqs(); ++s)
    for (int32_t j = 0; j < m.seq_lens[static_cast<size_t>(s)]; ++j) {
      const int32_t blk = m.block_tables[static_cast<size_t>(s * m.max_blocks_per_seq + j / m.block_size)];
      const int64_t slot = int64_t{blk} * m.block_size + j % m.block_size;
      for (int64_t e = 0; e < row; ++e) c.f[static_cast<size_t>(slot * row + e)] = round_to(u(rng), dt);
    }
  return c;
}

struct AttnSpec {
  int hq = 8, hkv = 2, d = 64, bs = 16;
  KvDtype kv;
  int window = 0;
  float softcap = 0.0f;
  float q_amp = 4.0f;
  int plan_len = 0;  // > 0: plan as under graph capture, from max_seq_len = plan_len and no lengths
  int64_t q_pad = 0; // q a strided view (the q columns of a fused projection)
  std::vector<Seq> seqs;
  uint32_t seed = 1;
  bool large = false;
};

OpCase attention_case(const AttnSpec& a) {
  OpCase c;
  c.op = "paged_attention";
  c.label = "Hq" + std::to_string(a.hq) + "/Hkv" + std::to_string(a.hkv) + " D" + std::to_string(a.d) + " bs" +
            std::to_string(a.bs) + " kv " + a.kv.name() + (a.window ? " window " + std::to_string(a.window) : "") +
            (a.softcap > 0 ? " softcap " + std::to_string(static_cast<int>(a.softcap)) : "") +
            (a.plan_len ? " plan_len " + std::to_string(a.plan_len) : "") + (a.q_pad ? " strided q" : "") + " " +
            describe(a.seqs) + " seed " + std::to_string(a.seed);
  c.make = [a](DType act) {
    OpData d;
    int32_t nb = 0;
    d.meta = meta_for(a.seqs, a.bs, a.seed, &nb);
    const DType kv = a.kv.of(act);
    d.t["k_cache"] = cache_pool(d.meta, nb, a.hkv, a.d, kv, a.seed + 1);
    d.t["v_cache"] = cache_pool(d.meta, nb, a.hkv, a.d, kv, a.seed + 2);
    const int64_t t = d.meta.num_tokens();
    d.t["q"] = random_tensor(a.seed + 3, act, {t, a.hq, a.d}, -a.q_amp, a.q_amp);
    d.t["q"].row_pad = a.q_pad;
    d.t["out"] = random_tensor(a.seed + 4, act, {t, a.hq, a.d});
    d.p["scale"] = 1.0 / std::sqrt(static_cast<double>(a.d));
    d.p["window"] = a.window;
    d.p["softcap"] = a.softcap;
    return d;
  };
  c.run = [a](Backend& be, DeviceData& d, int rep) {
    AttentionShape shape;
    shape.num_q_heads = a.hq;
    shape.num_kv_heads = a.hkv;
    shape.head_dim = a.d;
    shape.q_dtype = d.t("q").dtype;
    shape.kv_dtype = d.t("k_cache").dtype;
    if (rep == 0) d.plan_attention(shape, a.plan_len);
    AttentionParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(a.d));
    p.sliding_window = a.window;
    p.softcap = a.softcap;
    be.paged_attention(d.t("q"), d.t("k_cache", rep), d.t("v_cache", rep), d.meta(), p, d.t("out"));
  };
  c.outputs = {"out"};
  const KvDtype kv = a.kv;
  // bf16 activations: one bf16 plane of keys and values (bf16 caches, and fp8 ones, whose values
  // bf16 holds) multiplies p rounded to bf16; two planes (fp16, fp32 caches) keep p's rest too.
  c.tol = [kv](DType act, const std::string&) {
    if (act == DType::F32) return Tol{5e-5, 1e-4};
    const DType k = kv.of(act);
    return k == DType::BF16 || k == DType::F8_E4M3 ? Tol{1e-2, 2e-2} : Tol{3e-3, 8e-3};
  };
  const int d = a.d;
  c.unsupported = [d](Backend& be) {
    return be.device() == Device::CUDA && be.activation_dtype() == DType::BF16 && (d % 8 != 0 || d > 256)
               ? std::string("the cuda tensor-core attention takes head_dim multiples of 8 up to 256")
               : std::string();
  };
  c.large = a.large;
  not_on_vulkan_for_fp8(c, a.kv.dtype);
  return c;
}

// Decodes of ragged lengths (a first partial block, one ending on a block boundary), a prefill
// from zero, a chunk in the middle of a long prompt, a short multi-token step.
std::vector<Seq> mixed_batch(std::mt19937& rng, int bs) {
  auto len = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1)); };
  std::vector<Seq> v;
  v.push_back({1, len(1, 3)});
  v.push_back({1, bs * len(2, 5)});
  const int p = len(8, 40);  // small enough for the CPU under ASan: ~100 cases of this batch
  v.push_back({p, p});
  v.push_back({1, len(100, 300)});
  const int chunk = len(4, 24);
  v.push_back({chunk, chunk + len(20, 150)});
  v.push_back({1, len(5, 40)});
  v.push_back({3, len(30, 60)});
  return v;
}

// The FP8 KV cache through every path of the CUDA kernels (the bytes staged, then widened to bf16
// in shared memory): decode and prefill tilings, head dims 32-256 with zero padding and odd 8-byte
// chunks, GQA groups, block sizes, windows, soft-capping, split-KV and graph-capture plans. Own rng
// so that the cases above keep their shapes.
void add_fp8_paged_attention(std::vector<OpCase>& out) {
  std::mt19937 rng(17);
  const KvDtype fp8{DType::F8_E4M3, false};
  auto with = [&](int hq, int hkv, int d, int bs, std::vector<Seq> seqs, uint32_t seed) {
    AttnSpec a;
    a.hq = hq;
    a.hkv = hkv;
    a.d = d;
    a.bs = bs;
    a.kv = fp8;
    a.seqs = std::move(seqs);
    a.seed = seed;
    return a;
  };
  uint32_t seed = 4000;
  for (int d : {32, 40, 96, 256}) {  // 40: five 8-byte chunks a row; 96: padded to the 128 kernel
    const int hkv = d == 256 ? 2 : 4;
    out.push_back(attention_case(with(4 * hkv, hkv, d, 16, mixed_batch(rng, 16), seed++)));
    out.push_back(attention_case(with(4 * hkv, hkv, d, 16, {{1, 200}, {1, 33}, {2, 90}}, seed++)));
  }
  for (int bs : {8, 128}) out.push_back(attention_case(with(8, 2, 128, bs, mixed_batch(rng, bs), seed++)));
  // Qwen3-8B's attention (32 / 8 heads of 128): a decode batch, and a prefill beside decodes.
  out.push_back(attention_case(with(32, 8, 128, 16, {{1, 77}, {1, 1}, {1, 300}, {1, 16}, {1, 129}}, seed++)));
  out.push_back(attention_case(with(32, 8, 128, 16, {{1, 40}, {60, 60}, {1, 5}, {17, 100}}, seed++)));
  {
    AttnSpec a = with(16, 4, 64, 16, mixed_batch(rng, 16), seed++);
    a.window = 17;
    a.softcap = 30.0f;
    a.q_amp = 8.0f;
    out.push_back(attention_case(a));
  }
  {
    AttnSpec a = with(8, 2, 64, 16, {{1, 1}, {1, 17}, {1, 300}, {1, 5}}, seed++);
    a.plan_len = 40960;
    out.push_back(attention_case(a));
  }
  // Long contexts: split-KV over CTAs, a window, a chunk at the end of a long prompt.
  for (int d : {128, 256}) {
    AttnSpec a = with(16, d == 256 ? 4 : 8, d, 16, {{1, 5000}, {1, 3333}}, seed++);
    a.large = true;  // the CPU (under the sanitizers in CI) runs the short fp8 cases only
    out.push_back(attention_case(a));
    a.seqs = {{1, 4097}};
    a.window = 1000;
    a.seed = seed++;
    out.push_back(attention_case(a));
    a.seqs = {{37, 2500}};
    a.window = 0;
    a.seed = seed++;
    out.push_back(attention_case(a));
  }
}

void add_paged_attention(std::vector<OpCase>& out) {
  std::mt19937 rng(11);
  const KvDtype bf16{DType::BF16, false}, f16{DType::F16, false}, f32{DType::F32, false}, act{};
  for (int bs : {8, 16, 32, 64, 128}) {
    AttnSpec a;
    a.bs = bs;
    a.seqs = mixed_batch(rng, bs);
    a.seed = 100u + static_cast<uint32_t>(bs);
    out.push_back(attention_case(a));
  }
  const int ratios[][2] = {{4, 4}, {8, 4}, {16, 4}, {16, 2}, {6, 2}, {12, 4}, {16, 1}, {32, 1}};
  for (const auto& r : ratios) {
    AttnSpec a;
    a.hq = r[0];
    a.hkv = r[1];
    a.seqs = mixed_batch(rng, a.bs);
    a.seed = 200u + static_cast<uint32_t>(r[0] * 7 + r[1]);
    out.push_back(attention_case(a));
    a.seqs = {{1, 77}, {1, 1}, {1, 300}, {1, 16}};  // decode only: the decode tiling while Hq/Hkv <= 16
    a.seed += 100;
    out.push_back(attention_case(a));
  }
  for (int d : {64, 128, 256})
    for (KvDtype kv : {act, bf16, f16, f32}) {
      AttnSpec a;
      a.d = d;
      a.hq = d == 256 ? 8 : 16;
      a.hkv = d == 256 ? 2 : 8;
      a.kv = kv;
      a.bs = d == 64 ? 32 : 16;
      a.seqs = mixed_batch(rng, a.bs);
      a.seed = 400u + static_cast<uint32_t>(d) + static_cast<uint32_t>(kv.dtype) * 3;
      a.large = d == 256 && !kv.is_act;
      out.push_back(attention_case(a));
      a.seqs = {{1, 200}, {1, 33}, {2, 90}};
      a.seed += 100;
      out.push_back(attention_case(a));
    }
  // The FP8 KV cache: e4m3 keys and values read as stored (their values are exact in the formula).
  for (int d : {64, 128}) {
    AttnSpec a;
    a.d = d;
    a.hq = 16;
    a.hkv = 8;
    a.kv = KvDtype{DType::F8_E4M3, false};
    a.bs = 16;
    a.seqs = mixed_batch(rng, a.bs);
    a.seed = 900u + static_cast<uint32_t>(d);
    out.push_back(attention_case(a));
  }
  // Head dims the kernels pad to their next instance, and odd ones (fp32 activations only on cuda).
  for (int d : {5, 8, 16, 24, 40, 56, 72, 96, 100, 136, 200})
    for (KvDtype kv : {act, bf16}) {
      AttnSpec a;
      a.d = d;
      a.hq = 4;
      a.kv = kv;
      a.seqs = mixed_batch(rng, a.bs);
      a.seed = 1100u + static_cast<uint32_t>(d) * 2 + (kv.is_act ? 0 : 1);
      a.large = !kv.is_act;
      out.push_back(attention_case(a));
      a.large = false;
      a.seqs = {{1, 200}, {1, 1}, {1, 2100}};  // decode, split over CTAs
      a.seed += 500;
      out.push_back(attention_case(a));
    }
  // Under graph capture the plan sees max_seq_len = max_model_len: more splits than the real
  // contexts need; CTAs with empty key ranges must leave the result unchanged.
  for (int d : {64, 128}) {
    AttnSpec a;
    a.d = d;
    a.plan_len = 40960;
    std::vector<Seq> many;
    for (int i = 0; i < 24; ++i) many.push_back({1, 1 + 37 * i});
    uint32_t seed = 1300u + static_cast<uint32_t>(d);
    for (const auto& seqs : {std::vector<Seq>{{1, 1}}, std::vector<Seq>{{1, 1}, {1, 17}, {1, 300}, {1, 5}}, many}) {
      a.seqs = seqs;
      a.seed = seed++;
      out.push_back(attention_case(a));
    }
  }
  for (int window : {0, 1, 17, 64, 100})
    for (float softcap : {0.0f, 5.0f, 30.0f}) {
      AttnSpec a;
      a.window = window;
      a.softcap = softcap;
      a.q_amp = softcap > 0 ? 8.0f : 4.0f;
      a.seqs = mixed_batch(rng, a.bs);
      a.seed = 600u + static_cast<uint32_t>(window) * 10u + static_cast<uint32_t>(softcap);
      out.push_back(attention_case(a));
    }
  {
    AttnSpec a;
    a.window = 50;
    a.kv = f32;
    a.bs = 8;
    a.seqs = {{200, 200}, {1, 1000}, {64, 500}};
    a.seed = 700;
    out.push_back(attention_case(a));
  }
  // Few sequences with long contexts: split-KV over CTAs, then merged.
  for (KvDtype kv : {act, bf16, f32})
    for (int d : {64, 128, 256}) {
      AttnSpec a;
      a.d = d;
      a.kv = kv;
      a.hq = 16;
      a.hkv = d == 256 ? 4 : 8;
      a.seqs = {{1, 5000}, {1, 3333}};
      a.seed = 800u + static_cast<uint32_t>(d) + static_cast<uint32_t>(kv.dtype);
      a.large = !(d == 64 && kv.is_act);  // the CPU under ASan runs one of each
      out.push_back(attention_case(a));
      a.seqs = {{1, 4097}};
      a.window = 1000;
      a.seed += 100;
      out.push_back(attention_case(a));
      a.window = 0;
      a.seqs = {{37, 2500}};  // a chunk at the end of a long prompt, split as well
      a.seed += 100;
      a.large = true;
      out.push_back(attention_case(a));
    }
  // A large decode batch beside one prefill of several CTAs of query rows, q strided.
  {
    AttnSpec a;
    a.hq = 16;
    a.hkv = 4;
    a.q_pad = 2 * 4 * 64;
    for (int i = 0; i < 64; ++i) a.seqs.push_back({1, 1 + static_cast<int>(rng() % 500)});
    a.seqs.push_back({150, 150});
    a.seed = 1500;
    out.push_back(attention_case(a));
  }
  add_fp8_paged_attention(out);
}

struct RopeSpec {
  int hq, hkv, d, bs, rotary;
  float theta;
  bool norm, zc;
  DType w;
  KvDtype kv;
  bool llama3;
  int64_t q_pad;
  std::vector<Seq> seqs;
};

void add_qk_norm_rope(std::vector<OpCase>& out) {
  const KvDtype as_act{}, bf16{DType::BF16, false}, f32{DType::F32, false}, fp8{DType::F8_E4M3, false};
  const RopeSpec specs[] = {
      {4, 2, 32, 8, 32, 10000.0f, true, false, DType::F32, as_act, false, 0, {{5, 5}, {1, 20}, {7, 40}, {1, 3000}}},
      {6, 2, 64, 16, 32, 1000000.0f, true, true, DType::BF16, bf16, false, 2 * 2 * 64, {{1, 9}, {12, 30}, {1, 1}}},
      {8, 8, 128, 128, 128, 1000000.0f, true, false, DType::BF16, as_act, false, 0, {{3, 130}, {1, 64}}},
      {2, 1, 16, 8, 16, 10000.0f, false, false, DType::F32, f32, false, 0, {{4, 4}, {1, 17}}},
      {4, 1, 64, 16, 64, 500000.0f, true, false, DType::F32, as_act, true, 0, {{6, 6}, {1, 2500}}},
      {8, 2, 128, 16, 128, 1000000.0f, true, false, DType::BF16, fp8, false, 2 * 2 * 128, {{5, 5}, {1, 40}, {3, 19}}},
  };
  uint32_t seed = 2000;
  for (const RopeSpec& r : specs) {
    OpCase c;
    c.op = "qk_norm_rope_and_cache";
    c.label = "Hq" + std::to_string(r.hq) + "/Hkv" + std::to_string(r.hkv) + " D" + std::to_string(r.d) + " rot" +
              std::to_string(r.rotary) + " theta " + std::to_string(static_cast<int64_t>(r.theta)) +
              (r.norm ? std::string(" norm w ") + dtype_name(r.w) : " no norm") + (r.zc ? " zero-centred" : "") +
              (r.llama3 ? " llama3 scaling" : "") + " kv " + r.kv.name() + " bs" + std::to_string(r.bs) + " " +
              describe(r.seqs);
    const uint32_t sd = seed++;
    c.make = [r, sd](DType act) {
      OpData d;
      int32_t nb = 0;
      d.meta = meta_for(r.seqs, r.bs, sd, &nb);
      d.meta.slot_mapping[1] = -1;  // a token whose K/V are not written (a padding row)
      const int64_t t = d.meta.num_tokens();
      d.t["q"] = random_tensor(sd + 1, act, {t, r.hq, r.d}, -2.0f, 2.0f);
      d.t["q"].row_pad = r.q_pad;
      d.t["k"] = random_tensor(sd + 2, act, {t, r.hkv, r.d}, -2.0f, 2.0f);
      d.t["v"] = random_tensor(sd + 3, act, {t, r.hkv, r.d});
      d.t["q_norm"] = random_tensor(sd + 4, r.w, {r.d}, r.zc ? -0.5f : 0.5f, 1.5f);
      d.t["k_norm"] = random_tensor(sd + 5, r.w, {r.d}, r.zc ? -0.5f : 0.5f, 1.5f);
      const DType kv = r.kv.of(act);
      d.t["k_cache"] = random_tensor(sd + 6, kv, {nb, r.bs, r.hkv, r.d});
      d.t["v_cache"] = random_tensor(sd + 7, kv, {nb, r.bs, r.hkv, r.d});
      d.p["eps"] = 1e-6;
      d.p["zero_centered"] = r.zc;
      d.p["norm"] = r.norm;
      d.p["rotary_dim"] = r.rotary;
      d.p["theta"] = r.theta;
      d.p["llama3"] = r.llama3;
      return d;
    };
    c.run = [r](Backend& be, DeviceData& d, int) {
      RopeParams rope;
      rope.rotary_dim = r.rotary;
      rope.theta = r.theta;
      if (r.llama3) {
        rope.scaling = RopeScaling::Llama3;
        rope.factor = 8.0;
        rope.low_freq_factor = 1.0;
        rope.high_freq_factor = 4.0;
        rope.original_max_positions = 8192.0;
      }
      const Tensor none;
      be.qk_norm_rope_and_cache(d.t("q"), d.t("k"), d.t("v"), r.norm ? d.t("q_norm") : none,
                                r.norm ? d.t("k_norm") : none, 1e-6f, r.zc, rope, d.meta(), d.t("k_cache"),
                                d.t("v_cache"));
    };
    c.outputs = {"q", "k_cache", "v_cache"};
    c.tol = tol_by_act({1e-4, 1e-4}, {2e-2, 2e-2});
    if (r.kv.dtype == DType::F8_E4M3) {
      // An e4m3 key is k rounded once; k computed another way (fp32 beside double, or through bf16)
      // may round to the next code: one e4m3 step, 2^-3 relative (2^-9 among subnormals).
      const auto plain = c.tol;
      c.tol = [plain](DType act, const std::string& name) {
        if (name == "q") return plain(act, name);
        return act == DType::F32 ? Tol{2e-3, 0.13} : Tol{4e-3, 0.16};
      };
    }
    not_on_vulkan_for_fp8(c, r.kv.dtype);
    out.push_back(std::move(c));
  }
}

// RoPE alone, as the unfused paths call it (interleaved pairs; a backend without the fused kernel).
struct RopeOnly {
  int h, d, rotary;  // rotary 0: the whole head
  float theta;
  RopeStyle style;
  RopeScaling scaling;
  double factor;           // Linear and Yarn
  double original;         // Yarn's original_max_position_embeddings
  float attention_factor;  // Yarn's
  int64_t pad;             // elements after every token's row: x a column view of a wider tensor
  int extra_positions;     // positions past T (the op reads the first T)
  std::vector<Seq> seqs;
};

RopeParams rope_params_of(const RopeOnly& r) {
  RopeParams rope;
  rope.rotary_dim = r.rotary;
  rope.theta = r.theta;
  rope.style = r.style;
  rope.scaling = r.scaling;
  rope.attention_factor = r.attention_factor;
  if (r.scaling == RopeScaling::Llama3) {  // the naive formula's Llama 3.1 constants
    rope.factor = 8.0;
    rope.low_freq_factor = 1.0;
    rope.high_freq_factor = 4.0;
    rope.original_max_positions = 8192.0;
  } else {
    rope.factor = r.factor;
    rope.original_max_positions = r.original;
  }
  return rope;
}

const char* scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::None: return "";
    case RopeScaling::Llama3: return " llama3";
    case RopeScaling::Linear: return " linear";
    case RopeScaling::Yarn: return " yarn";
  }
  return "";
}

void add_rope(std::vector<OpCase>& out) {
  const auto neox = RopeStyle::NeoX, gptj = RopeStyle::Interleaved;
  const RopeOnly specs[] = {
      // Ragged positions: a prefill from 0, a decode, a chunk mid-sequence, a long-context decode.
      {4, 64, 0, 10000.0f, neox, RopeScaling::None, 1, 0, 1.0f, 0, 0, {{5, 5}, {1, 20}, {7, 40}, {1, 3000}}},
      // Partial rotary (the tail passes through), q a column view of the fused qkv output, linear scaling.
      {2, 128, 64, 1000000.0f, neox, RopeScaling::Linear, 4, 0, 1.0f, 2 * 128, 3, {{1, 9}, {12, 30}, {1, 1}}},
      // GLM/GPT-J pairs on half the head, strided, Llama 3 frequencies.
      {3, 64, 32, 500000.0f, gptj, RopeScaling::Llama3, 1, 0, 1.0f, 5, 0, {{6, 6}, {1, 2500}}},
      // YaRN: ramped frequencies and cos/sin scaled by the attention factor (short context: the
      // formula's frequencies are exact in double, the backends' in fp32).
      {2, 32, 0, 10000.0f, gptj, RopeScaling::Yarn, 4, 64, 1.1386f, 0, 0, {{4, 4}, {1, 50}, {3, 90}}},
      {1, 16, 0, 10000.0f, neox, RopeScaling::Yarn, 4, 64, 1.1386f, 16, 0, {{2, 60}}},
  };
  uint32_t seed = 2500;
  for (const RopeOnly& r : specs) {
    OpCase c;
    c.op = "rope";
    c.label = "H" + std::to_string(r.h) + " D" + std::to_string(r.d) + " rot" + std::to_string(r.rotary ? r.rotary : r.d) +
              (r.style == RopeStyle::NeoX ? " neox" : " interleaved") + " theta " +
              std::to_string(static_cast<int64_t>(r.theta)) + scaling_name(r.scaling) +
              (r.attention_factor != 1.0f ? " attention factor" : "") + (r.pad ? " strided" : "") +
              (r.extra_positions ? " spare positions" : "") + " " + describe(r.seqs);
    const uint32_t sd = seed++;
    c.make = [r, sd](DType act) {
      OpData d;
      int32_t nb = 0;
      std::vector<int32_t> pos = meta_for(r.seqs, 16, sd, &nb).positions;
      const auto t = static_cast<int64_t>(pos.size());
      for (int i = 0; i < r.extra_positions; ++i) pos.push_back(100000 + i);  // never used
      d.t["x"] = random_tensor(sd + 1, act, {t, r.h, r.d}, -2.0f, 2.0f);
      d.t["x"].row_pad = r.pad;
      d.t["positions"] = ints(pos);
      d.p["rotary_dim"] = r.rotary;
      d.p["theta"] = r.theta;
      d.p["interleaved"] = r.style == RopeStyle::Interleaved;
      d.p["scaling"] = static_cast<double>(static_cast<int32_t>(r.scaling));
      d.p["factor"] = r.factor;
      d.p["original_max_positions"] = r.original;
      d.p["attention_factor"] = r.attention_factor;
      return d;
    };
    c.run = [r](Backend& be, DeviceData& d, int) { be.rope(d.t("x"), d.t("positions"), rope_params_of(r)); };
    c.outputs = {"x"};
    c.tol = tol_by_act({1e-4, 1e-4}, {2e-2, 2e-2});
    int64_t t = 0;
    for (const Seq& q : r.seqs) t += q.q_len;
    const double pairs = static_cast<double>(t * r.h * (r.rotary ? r.rotary : r.d) / 2);
    c.bytes = [=](DType act) { return 2.0 * static_cast<double>(t * r.h * r.d) * static_cast<double>(dtype_size(act)); };
    c.flops = [=](DType) { return 6.0 * pairs; };
    out.push_back(std::move(c));
  }
}

void add_reshape_and_cache(std::vector<OpCase>& out) {
  const KvDtype as_act{}, bf16{DType::BF16, false}, f16{DType::F16, false}, fp8{DType::F8_E4M3, false};
  struct Spec { int hkv, d, bs; KvDtype kv; std::vector<Seq> seqs; };
  const Spec specs[] = {{2, 64, 16, as_act, {{1, 30}, {9, 9}, {1, 16}}},
                        {1, 8, 8, f16, {{5, 12}, {1, 1}}},
                        {4, 128, 32, bf16, {{2, 70}, {1, 33}, {20, 20}}},
                        {2, 64, 16, fp8, {{3, 20}, {1, 17}}},
                        {3, 40, 8, fp8, {{2, 9}, {1, 1}, {7, 7}}}};
  uint32_t seed = 3000;
  for (const Spec& s : specs) {
    OpCase c;
    c.op = "reshape_and_cache";
    c.label = "Hkv" + std::to_string(s.hkv) + " D" + std::to_string(s.d) + " bs" + std::to_string(s.bs) + " kv " +
              s.kv.name() + " " + describe(s.seqs);
    const uint32_t sd = seed++;
    c.make = [s, sd](DType act) {
      OpData d;
      int32_t nb = 0;
      d.meta = meta_for(s.seqs, s.bs, sd, &nb);
      d.meta.slot_mapping[0] = -1;
      const int64_t t = d.meta.num_tokens();
      d.t["k"] = random_tensor(sd + 1, act, {t, s.hkv, s.d});
      d.t["v"] = random_tensor(sd + 2, act, {t, s.hkv, s.d});
      d.t["slot_mapping"].dtype = DType::I32;
      d.t["slot_mapping"].shape = {t};
      d.t["slot_mapping"].i = d.meta.slot_mapping;
      const DType kv = s.kv.of(act);
      d.t["k_cache"] = random_tensor(sd + 3, kv, {nb, s.bs, s.hkv, s.d});
      d.t["v_cache"] = random_tensor(sd + 4, kv, {nb, s.bs, s.hkv, s.d});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) {
      be.reshape_and_cache(d.t("k"), d.t("v"), d.t("slot_mapping"), d.t("k_cache"), d.t("v_cache"));
    };
    c.outputs = {"k_cache", "v_cache"};
    // fp8: one rounding to e4m3 (half an ulp is 2^-4 relative) from bf16 activations.
    c.tol = s.kv.dtype == DType::F8_E4M3 ? tol_by_act({0, 0}, {0, 6.5e-2}) : tol_by_act({0, 0}, {0, 8e-3});
    not_on_vulkan_for_fp8(c, s.kv.dtype);
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_attention_cases(std::vector<OpCase>& out) {
  add_qk_norm_rope(out);
  add_rope(out);
  add_reshape_and_cache(out);
  add_paged_attention(out);
}

}  // namespace pagoda::optable
