#include "model/eagle3_head.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backend/fallback_backend.h"
#include "core/error.h"
#include "model/decoder_base.h"
#include "model/layers.h"
#include "model/registry.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// What the head's config.json and tensors say, checked against the target.
struct Eagle3Layout {
  std::string dir, where;        // where: "--speculative-config: the EAGLE-3 head in DIR"
  std::string layer;             // "midlayer." (published heads) or "layers.0."
  std::string embed;             // the head's embed_tokens tensor, or empty (the target's is shared)
  int64_t target_hidden = 0, draft_vocab = 0, vocab = 0;
  bool attention_bias = false, norm_before_residual = false;
  std::vector<int> aux_layers;
};

json read_config(const std::string& dir, const std::string& where) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  check(static_cast<bool>(in), where + " has no config.json (" + path + "); \"model\" must be the head's directory");
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  check(j.is_object(), where + ": " + path + " is not a JSON object");
  return j;
}

// An integer field of config.json (or `fallback` when absent or null).
int64_t int_field(const json& j, const char* key, int64_t fallback, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  check(j[key].is_number_integer(), where + ": config.json's " + key + " must be an integer");
  return j[key].get<int64_t>();
}

// eagle_aux_hidden_state_layer_ids at the top of config.json or in eagle_config (vLLM reads both),
// else vLLM's default (2, L / 2, L - 3); ascending and distinct, as vLLM's target collects them.
std::vector<int> aux_layers_of(const json& j, int64_t L, const std::string& where) {
  const json* ids = nullptr;
  if (j.contains("eagle_aux_hidden_state_layer_ids") && !j["eagle_aux_hidden_state_layer_ids"].is_null())
    ids = &j["eagle_aux_hidden_state_layer_ids"];
  else if (j.contains("eagle_config") && j["eagle_config"].is_object() &&
           j["eagle_config"].contains("eagle_aux_hidden_state_layer_ids") &&
           !j["eagle_config"]["eagle_aux_hidden_state_layer_ids"].is_null())
    ids = &j["eagle_config"]["eagle_aux_hidden_state_layer_ids"];
  std::vector<int> out;
  if (ids != nullptr && !(ids->is_array() && ids->empty())) {
    check(ids->is_array(), where + ": eagle_aux_hidden_state_layer_ids must be a list of layer ids");
    for (const json& v : *ids) {
      check(v.is_number_integer(), where + ": eagle_aux_hidden_state_layer_ids must be a list of integers");
      out.push_back(v.get<int>());
    }
  } else {
    out = {2, static_cast<int>(L / 2), static_cast<int>(L - 3)};
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  std::string list;
  for (int id : out) list += (list.empty() ? "" : ", ") + std::to_string(id);
  for (int id : out)
    check(id >= 0 && id <= L, where + " reads the target's layers [" + list + "], but the target has " +
                                   std::to_string(L) + " layers (ids 0.." + std::to_string(L) +
                                   "); the head was trained for a deeper model" +
                                   (ids ? "" : " (set eagle_aux_hidden_state_layer_ids in its config.json)"));
  return out;
}

// The architecture check, the head's own fields and the Llama layer's config (parsed by the Llama
// family's reader, so RoPE scaling and head_dim follow the same rules as a Llama checkpoint's).
ModelConfig read_head_config(Eagle3Layout& lay, const ModelConfig& target) {
  const std::string& where = lay.where;
  json j = read_config(lay.dir, where);
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    arch = j["architectures"][0].get<std::string>();
  std::string lower = arch;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  check(lower.find("eagle") == std::string::npos || lower.find("eagle3") != std::string::npos,
        where + " is an EAGLE-1 head (" + arch + "); pagoda's method \"eagle3\" takes EAGLE-3 heads "
                "(LlamaForCausalLMEagle3), and EAGLE-1 heads are not supported yet");
  check(lower.find("eagle3") != std::string::npos,
        where + " is not an EAGLE-3 head: config.json's architectures is \"" + arch +
            "\", not LlamaForCausalLMEagle3 (for a whole draft model leave \"method\" out or use \"draft_model\")");
  const std::string model_type = j.value("model_type", std::string("llama"));
  check(model_type == "llama", where + ": model_type \"" + model_type +
                                   "\" is not supported; pagoda's EAGLE-3 heads are Llama layers (model_type llama)");
  check(int_field(j, "num_hidden_layers", 1, where) == 1,
        where + " has num_hidden_layers " + std::to_string(int_field(j, "num_hidden_layers", 1, where)) +
            "; pagoda runs heads of one decoder layer (midlayer), as published");
  if (j.contains("eagle_config") && j["eagle_config"].is_object() &&
      j["eagle_config"].contains("use_aux_hidden_state"))
    check(j["eagle_config"]["use_aux_hidden_state"] != false,
          where + " has eagle_config.use_aux_hidden_state false (an EAGLE-1-style head); not supported");
  lay.vocab = int_field(j, "vocab_size", 0, where);
  check(lay.vocab == target.vocab_size,
        where + " was made for a vocabulary of " + std::to_string(lay.vocab) + " tokens (config.json vocab_size), the "
                "target has " + std::to_string(target.vocab_size) + "; use a head trained for this target");
  lay.draft_vocab = int_field(j, "draft_vocab_size", lay.vocab, where);
  check(lay.draft_vocab > 0 && lay.draft_vocab <= lay.vocab,
        where + ": draft_vocab_size " + std::to_string(lay.draft_vocab) + " must be in [1, vocab_size " +
            std::to_string(lay.vocab) + "]");
  const int64_t hidden = int_field(j, "hidden_size", 0, where);
  lay.target_hidden = int_field(j, "target_hidden_size", hidden, where);
  check(lay.target_hidden == target.hidden_size,
        where + " was made for a target of hidden size " + std::to_string(lay.target_hidden) +
            " (config.json " + (j.contains("target_hidden_size") ? "target_hidden_size" : "hidden_size") +
            "), the target's is " + std::to_string(target.hidden_size) + "; use a head trained for this target");
  lay.attention_bias = j.value("attention_bias", false);
  lay.norm_before_residual = j.value("norm_before_residual", false);
  lay.aux_layers = aux_layers_of(j, target.num_layers, where);
  // The Llama family reads the layer's settings (a head's RoPE, head_dim, eps are a Llama layer's).
  j["architectures"] = json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j["num_hidden_layers"] = 1;
  j.erase("layer_types");
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"}) j.erase(k);  // the target's tokens
  ModelConfig cfg = parse_model_config(j.dump(), "");
  cfg.architecture = arch;
  cfg.family = "EAGLE-3 head";
  cfg.vocab_size = lay.draft_vocab;  // its logits rows: the runner sizes them by config().vocab_size
  return cfg;
}

class Eagle3HeadModel final : public DecoderBase {
 public:
  Eagle3HeadModel(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend, const Eagle3Layout& lay,
                  const Tensor& target_embed)
      : DecoderBase(cfg, ckpt, backend), lay_(lay) {
    const int64_t H = cfg.hidden_size, Ht = lay.target_hidden, V = lay.vocab, Vd = lay.draft_vocab;
    const int64_t D = cfg.head_dim, Hq = cfg.num_heads, Hkv = cfg.num_kv_heads, I = cfg.intermediate_size;
    const auto n_aux = static_cast<int64_t>(lay.aux_layers.size());
    const DType wdt = weight_dtype();
    const std::string& p = lay.layer;
    opt_.qk_norm = false;
    opt_.qkv_bias = opt_.o_bias = lay.attention_bias;
    std::vector<std::string> required = {"fc.weight", "norm.weight", "lm_head.weight"};
    for (const char* n : {"input_layernorm", "hidden_norm", "post_attention_layernorm"}) required.push_back(p + n + ".weight");
    for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                          "mlp.up_proj", "mlp.down_proj"}) {
      required.push_back(p + n + ".weight");
      if (lay.attention_bias && std::string(n).rfind("self_attn.", 0) == 0) required.push_back(p + n + ".bias");
    }
    for (const std::string& name : required) require_tensor(name);
    // The shapes a head for this target must have, checked here so the message says what they mean.
    expect_shape("fc.weight", {H, n_aux * Ht},
                 "fc maps the concatenated hidden states of the target's layers " + aux_list() + " (" +
                     std::to_string(n_aux) + " × its hidden size " + std::to_string(Ht) + ") to the head's " +
                     std::to_string(H) + "; the head was trained for another target");
    expect_shape("lm_head.weight", {Vd, H}, "draft_vocab_size × hidden_size");
    if (!lay.embed.empty()) {
      expect_shape(lay.embed, {V, H}, "vocab_size × hidden_size");
      embed_ = ws_.load(lay.embed, wdt, {V, H});
    } else {
      check(!target_embed.empty() && target_embed.size(0) == V && target_embed.size(1) == H,
            lay.where + " has no embed_tokens.weight, so it shares the target's embedding, but its hidden size " +
                std::to_string(H) + " differs from the target's (" +
                std::to_string(target_embed.empty() ? 0 : target_embed.size(1)) + ")");
      embed_ = target_embed;
    }
    final_norm_ = ws_.load("norm.weight", DType::F32, {H});
    lm_head_ = Linear::load(ws_, {.parts = {{.weight = "lm_head.weight", .rows = Vd}}, .in_features = H, .dtype = wdt});
    // fc over the concatenation = the sum of one projection per aux layer over its column block.
    for (int64_t a = 0; a < n_aux; ++a)
      fc_.push_back(Linear::load(ws_, {.parts = {{.weight = "fc.weight", .rows = H}}, .in_features = n_aux * Ht,
                                       .dtype = wdt, .col_begin = a * Ht, .col_end = (a + 1) * Ht}));
    input_norm_ = ws_.load(p + "input_layernorm.weight", DType::F32, {H});
    hidden_norm_ = ws_.load(p + "hidden_norm.weight", DType::F32, {H});
    post_norm_ = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
    // q | k | v over [e; h]: the embedding half carries the biases, the hidden half none.
    for (int half = 0; half < 2; ++half) {
      const auto part = [&](const char* proj, int64_t rows) {
        const std::string w = p + "self_attn." + proj + ".weight";
        expect_shape(w, {rows, 2 * H}, "its input is [embedding; hidden], 2 × hidden_size");
        return LinearPart{.weight = w, .rows = rows,
                          .bias = half == 0 && lay.attention_bias ? p + "self_attn." + proj + ".bias" : ""};
      };
      (half == 0 ? qkv_e_ : qkv_h_) = Linear::load(
          ws_, {.parts = {part("q_proj", Hq * D), part("k_proj", Hkv * D), part("v_proj", Hkv * D)},
                .in_features = 2 * H, .dtype = wdt, .col_begin = half * H, .col_end = (half + 1) * H});
    }
    attn_.o = Linear::load(ws_, {.parts = {{.weight = p + "self_attn.o_proj.weight", .rows = H,
                                            .bias = lay.attention_bias ? p + "self_attn.o_proj.bias" : ""}},
                                 .in_features = Hq * D, .dtype = wdt});
    mlp_ = load_mlp_at(ws_, cfg, p + "mlp.", I, wdt);
    attention_index_ = {0};
  }

  std::vector<OpUse> required_ops() const override {
    std::vector<OpUse> ops = DecoderBase::required_ops();
    const DType act = be_.activation_dtype(), wdt = weight_dtype();
    ops.push_back({Op::Embedding, embed_.dtype});
    add_attention_ops(opt_, act, wdt, ops);
    add_mlp_ops(GluActivation::Silu, act, wdt, ops);
    return ops;
  }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const int64_t T = max_tokens, D = cfg_.head_dim;
    begin_reserve(max_tokens, max_logits_rows);
    s_.qkv = scratch(T, (cfg_.num_heads + 2 * cfg_.num_kv_heads) * D);
    qkv_h_out_ = scratch(T, (cfg_.num_heads + 2 * cfg_.num_kv_heads) * D);
    s_.attn = scratch(T, cfg_.num_heads * D);
    s_.gate_up = scratch(T, 2 * cfg_.intermediate_size);
    s_.mlp_act = scratch(T, cfg_.intermediate_size);
    hidden_normed_ = scratch(T, cfg_.hidden_size);
    gathered_ = scratch(T, lay_.target_hidden);
    prenorm_rows_ = scratch(max_logits_rows, cfg_.hidden_size);
    max_rows_ = max_logits_rows;
    return scratch_bytes();
  }

  void set_hidden_input(const Tensor& hidden) override {
    hidden_in_ = hidden;
    from_target_ = false;
  }
  void set_aux_hidden_input(const std::vector<Tensor>& aux) override {
    aux_in_ = aux;
    from_target_ = true;
  }
  Tensor draft_hidden_rows(int32_t num_rows) const override {
    check_invariant(num_rows >= 0 && num_rows <= max_rows_, "more pre-norm rows asked for than reserved");
    return prenorm_rows_.rows(0, num_rows);
  }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    check_invariant(meta.hidden_rows.numel() == meta.num_tokens,
                    "an EAGLE-3 pass needs the hidden state of every token (StepMeta::hidden_rows)");
    check_invariant(from_target_ ? aux_in_.size() == fc_.size() : hidden_in_.data != nullptr,
                    "an EAGLE-3 pass without its hidden input (set_aux_hidden_input / set_hidden_input)");
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    const int64_t T = meta.num_tokens;
    Stream s = begin_forward(meta);  // s.h = embed(token t + 1)
    be_.rms_norm(s.h, input_norm_, s.x, eps, false);
    Tensor hn = hidden_normed_.rows(0, T);
    // s.h becomes h0: fc of the target's aux states, or the pre-norm rows of the pass before.
    if (from_target_) {
      Tensor g = gathered_.rows(0, T);
      for (size_t a = 0; a < fc_.size(); ++a) {
        be_.gather_rows(aux_in_[a], meta.hidden_rows, g);
        fc_[a].forward(be_, g, a == 0 ? s.h : hn);
        if (a > 0) be_.add(s.h, hn, s.h);
      }
    } else {
      be_.gather_rows(hidden_in_, meta.hidden_rows, s.h);
    }
    if (lay_.norm_before_residual) {
      be_.rms_norm(s.h, hidden_norm_, s.h, eps, false);  // the residual stream starts normed
      hn = s.h;
    } else {
      be_.rms_norm(s.h, hidden_norm_, hn, eps, false);
    }
    Tensor qkv = s_.qkv.rows(0, T), qkv_h = qkv_h_out_.rows(0, T);
    qkv_e_.forward(be_, s.x, qkv);
    qkv_h_.forward(be_, hn, qkv_h);
    be_.add(qkv, qkv_h, qkv);
    attention_from_qkv(be_, cfg_, attn_, opt_, meta, state.kv.k(0), state.kv.v(0), qkv, s_, s.y);
    be_.add_rms_norm(s.h, s.y, post_norm_, s.x, eps, false);
    mlp_forward(be_, mlp_, s.x, s_, s.y);
    finish_forward(meta, s, false, logits);  // s.h = the pre-norm state; logits of norm(s.h)
    Tensor rows = prenorm_rows_.rows(0, meta.num_logits_rows);
    be_.gather_rows(s.h, meta.logits_rows, rows);
  }

 private:
  void require_tensor(const std::string& name) const {
    check(ws_.has(name), lay_.where + " has no tensor '" + name + "' (" + ckpt_files() +
                             "); an EAGLE-3 head holds fc.weight, midlayer.* (one decoder layer" +
                             (lay_.attention_bias ? ", with q/k/v/o biases as config.json's attention_bias says" : "") +
                             "), norm.weight, lm_head.weight and d2t: is it an EAGLE-3 checkpoint?");
  }
  void expect_shape(const std::string& name, const std::vector<int64_t>& shape, const std::string& why) {
    require_tensor(name);
    const std::vector<int64_t>& got = ws_.shape_of(name);
    check(got == shape, lay_.where + ": tensor '" + name + "' is " + shape_text(got) + ", expected " +
                            shape_text(shape) + " (" + why + ")");
  }
  std::string ckpt_files() const { return "in " + lay_.dir + "/*.safetensors"; }
  std::string aux_list() const {
    std::string s = "[";
    for (size_t i = 0; i < lay_.aux_layers.size(); ++i) s += (i ? ", " : "") + std::to_string(lay_.aux_layers[i]);
    return s + "]";
  }

  Eagle3Layout lay_;
  AttentionOptions opt_;
  Tensor input_norm_, hidden_norm_, post_norm_;
  std::vector<Linear> fc_;  // one per aux layer: its column block of fc.weight
  Linear qkv_e_, qkv_h_;    // q | k | v over the embedding half (with the biases) and the hidden half
  AttentionWeights attn_;   // o_proj only (attention_from_qkv)
  MlpWeights mlp_;
  LayerScratch s_;
  Tensor qkv_h_out_, hidden_normed_, gathered_, prenorm_rows_;
  int32_t max_rows_ = 0;
  bool from_target_ = false;
  std::vector<Tensor> aux_in_;
  Tensor hidden_in_;
};

// d2t as target ids, checked against the target's vocabulary; identity without one.
std::vector<int32_t> draft_to_target(const Checkpoint& ckpt, const Eagle3Layout& lay) {
  std::vector<int32_t> out(static_cast<size_t>(lay.draft_vocab));
  const TensorView* t = ckpt.find("d2t");
  if (t == nullptr) {
    check(lay.draft_vocab == lay.vocab, lay.where + " has no tensor 'd2t' but its draft_vocab_size " +
                                            std::to_string(lay.draft_vocab) + " is not its vocab_size " +
                                            std::to_string(lay.vocab) + ": without d2t its draft ids cannot be mapped "
                                            "to the target's tokens");
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(i);
    return out;
  }
  check((t->dtype == DType::I64 || t->dtype == DType::I32) && t->numel() == lay.draft_vocab && t->shape.size() == 1,
        lay.where + ": tensor 'd2t' is " + dtype_name(t->dtype) + " " + shape_text(t->shape) + ", expected I64 [" +
            std::to_string(lay.draft_vocab) + "] (draft_vocab_size offsets: target id = draft id + d2t[draft id])");
  for (int64_t i = 0; i < lay.draft_vocab; ++i) {
    int64_t off = 0;
    if (t->dtype == DType::I64) std::memcpy(&off, t->data + i * 8, 8);
    else {
      int32_t v = 0;
      std::memcpy(&v, t->data + i * 4, 4);
      off = v;
    }
    const int64_t id = i + off;
    check(id >= 0 && id < lay.vocab,
          lay.where + ": tensor 'd2t' maps draft token " + std::to_string(i) + " to target token " + std::to_string(i) +
              " + " + std::to_string(off) + " = " + std::to_string(id) + ", outside the target's vocabulary [0, " +
              std::to_string(lay.vocab) + "); the head was made for another tokenizer, or d2t is corrupt");
    out[static_cast<size_t>(i)] = static_cast<int32_t>(id);
  }
  return out;
}

}  // namespace

Eagle3Head load_eagle3_head(const std::string& dir, const Model& target, Backend& backend) {
  Eagle3Layout lay;
  lay.dir = dir;
  lay.where = "--speculative-config: the EAGLE-3 head in " + dir;
  const ModelConfig cfg = read_head_config(lay, target.config());
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  // Published heads name the layer midlayer.*; vLLM also takes layers.0.*.
  lay.layer = ckpt.find("midlayer.hidden_norm.weight") == nullptr && ckpt.find("layers.0.hidden_norm.weight") != nullptr
                  ? "layers.0."
                  : "midlayer.";
  for (const char* e : {"embed_tokens.weight", "model.embed_tokens.weight"})
    if (lay.embed.empty() && ckpt.find(e) != nullptr) lay.embed = e;
  Eagle3Head head;
  head.draft_to_target = draft_to_target(ckpt, lay);
  head.aux_layers = lay.aux_layers;
  head.model = std::make_unique<Eagle3HeadModel>(cfg, ckpt, backend, lay, target.input_embeddings());
  require_ops(backend, head.model->required_ops(), "EAGLE-3 head");
  return head;
}

}  // namespace pagoda
