// EAGLE-3 heads for the tests: the committed fixtures (tools/make_eagle3_fixtures.py) and random
// heads written into a temporary directory in the published layout, for any target fixture, with
// the faults the refusal tests need (a wrong fc width, a missing tensor, d2t outside the vocabulary).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../io/io_test_util.h"
#include "core/build_paths.h"
#include "io/model_config.h"

namespace pagoda::testing {

inline std::string eagle3_fixture_dir(const std::string& name) {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/eagle3/" + name;
}

struct RandomEagle3Head {
  int64_t hidden = 0;        // 0: the target's (and then the target's embedding is shared)
  int64_t heads = 4, kv_heads = 2, inter = 96;
  int64_t draft_vocab = 0;   // 0: half the target's vocabulary
  std::vector<int> aux_ids;  // eagle_aux_hidden_state_layer_ids; empty: the default rule
  int64_t fc_cols = 0;       // 0: 3 × the target's hidden size
  std::string drop;          // a tensor left out of the file
  int64_t bad_d2t = -1;      // this draft id maps past the end of the vocabulary
  // >= 0: norm.weight is all zeros, so every logit is 0 and the greedy draft is always draft id 0,
  // mapped by d2t to this target token (drafts the target accepts whenever it produces that token).
  int64_t constant_draft = -1;
  std::string architecture = "LlamaForCausalLMEagle3";
  uint32_t seed = 1;
};

// Writes config.json and model.safetensors of a random head for `target` into `dir`.
inline void write_random_eagle3_head(const std::string& dir, const ModelConfig& target, const RandomEagle3Head& o) {
  const int64_t H = o.hidden ? o.hidden : target.hidden_size, Ht = target.hidden_size, V = target.vocab_size;
  const int64_t Vd = o.draft_vocab ? o.draft_vocab : V / 2, D = H / o.heads, I = o.inter;
  nlohmann::json cfg = {{"architectures", {o.architecture}},
                        {"model_type", "llama"},
                        {"hidden_size", H},
                        {"intermediate_size", I},
                        {"num_attention_heads", o.heads},
                        {"num_key_value_heads", o.kv_heads},
                        {"num_hidden_layers", 1},
                        {"hidden_act", "silu"},
                        {"rms_norm_eps", 1e-6},
                        {"rope_theta", 10000.0},
                        {"max_position_embeddings", 2048},
                        {"vocab_size", V},
                        {"draft_vocab_size", Vd},
                        {"tie_word_embeddings", false},
                        {"torch_dtype", "float32"}};
  if (H != Ht) cfg["target_hidden_size"] = Ht;
  if (!o.aux_ids.empty()) cfg["eagle_aux_hidden_state_layer_ids"] = o.aux_ids;
  io_test::write_file(dir + "/config.json", cfg.dump(2));

  std::mt19937 rng(o.seed);
  std::vector<io_test::Tensor> tensors;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean, float std) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::normal_distribution<float> d(mean, std);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng);
    if (name != o.drop) tensors.push_back({name, "F32", shape, io_test::bytes_of(v)});
  };
  const auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float gain = 1.5f) {
    add(name, {rows, cols}, 0.0f, gain / std::sqrt(static_cast<float>(cols)));
  };
  if (H != Ht) add("embed_tokens.weight", {V, H}, 0.0f, 0.5f);
  matrix("fc.weight", H, o.fc_cols ? o.fc_cols : 3 * Ht);
  const std::string p = "midlayer.";
  for (const char* n : {"input_layernorm", "hidden_norm", "post_attention_layernorm"}) add(p + n + ".weight", {H}, 1, 0.25f);
  matrix(p + "self_attn.q_proj.weight", o.heads * D, 2 * H);
  matrix(p + "self_attn.k_proj.weight", o.kv_heads * D, 2 * H);
  matrix(p + "self_attn.v_proj.weight", o.kv_heads * D, 2 * H);
  matrix(p + "self_attn.o_proj.weight", H, o.heads * D);
  matrix(p + "mlp.gate_proj.weight", I, H);
  matrix(p + "mlp.up_proj.weight", I, H);
  matrix(p + "mlp.down_proj.weight", H, I);
  if (o.constant_draft >= 0)
    tensors.push_back({"norm.weight", "F32", {H}, io_test::bytes_of(std::vector<float>(static_cast<size_t>(H), 0.0f))});
  else
    add("norm.weight", {H}, 1, 0.25f);
  matrix("lm_head.weight", Vd, H, 4.0f);
  // The draft vocabulary: every other target token (d2t[i] = i), then t2d's mask.
  std::vector<int64_t> d2t(static_cast<size_t>(Vd));
  std::vector<uint8_t> t2d(static_cast<size_t>(V), 0);
  for (int64_t i = 0; i < Vd; ++i) {
    d2t[static_cast<size_t>(i)] = i * (V / Vd) - i;
    t2d[static_cast<size_t>(i * (V / Vd))] = 1;
  }
  if (o.bad_d2t >= 0) d2t[static_cast<size_t>(o.bad_d2t)] = V;
  if (o.constant_draft >= 0) d2t[0] = o.constant_draft;
  // First: the builder packs tensors back to back, and I64 must be 8-byte aligned.
  if (o.drop != "d2t") tensors.insert(tensors.begin(), {"d2t", "I64", {Vd}, io_test::bytes_of(d2t)});
  tensors.push_back({"t2d", "BOOL", {V}, io_test::bytes_of(t2d)});
  io_test::write_file(dir + "/model.safetensors", io_test::build(tensors));
}

}  // namespace pagoda::testing
