#include "io/model_config.h"
#include "model/registry.h"

#include "core/error.h"
#include "engine/generation_defaults.h"

#include <gtest/gtest.h>

#include <cmath>

#include "io_test_util.h"

namespace pagoda {
namespace {

using io_test::contains;
using io_test::error_of;
using json = nlohmann::json;

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

// config.json of Qwen/Qwen3-0.6B as released (transformers 4.51 layout: rope_theta at the top).
const char* const kQwen3_0_6B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
})";

const char* const kQwen3Generation = R"({
  "bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
  "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95
})";

// config.json of Qwen/Qwen3.5-0.8B (multimodal layout; vision_config trimmed).
const char* const kQwen3_5_0_8B = R"({
  "architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": 248056,
  "model_type": "qwen3_5",
  "text_config": {
    "attention_bias": false, "attention_dropout": 0.0, "attn_output_gate": true,
    "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256,
    "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
    "intermediate_size": 3584,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 16, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_5_text",
    "mtp_num_hidden_layers": 1, "num_attention_heads": 8, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "use_cache": true, "vocab_size": 248320,
    "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10],
                        "rope_type": "default", "rope_theta": 10000000,
                        "partial_rotary_factor": 0.25}
  },
  "tie_word_embeddings": true, "transformers_version": "4.57.0.dev0",
  "video_token_id": 248057, "vision_config": {"depth": 12, "hidden_size": 768},
  "vision_end_token_id": 248054, "vision_start_token_id": 248053
})";

// Qwen3.5-4B's decoder settings, with layer_types left to the full_attention_interval rule.
const char* const kQwen3_5_4B = R"({
  "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
  "text_config": {
    "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256,
    "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 9216,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "num_attention_heads": 16, "num_hidden_layers": 32,
    "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "vocab_size": 248320,
    "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10],
                        "rope_type": "default", "rope_theta": 10000000,
                        "partial_rotary_factor": 0.25}
  },
  "tie_word_embeddings": true
})";

ModelConfig parse(const json& config, const std::string& gen = "") {
  return parse_model_config(config.dump(), gen);
}

std::string parse_error(const json& config, const std::string& gen = "") {
  return error_of([&] { parse(config, gen); });
}

TEST(ModelConfig, Qwen3_0_6B) {
  const ModelConfig c = parse_model_config(kQwen3_0_6B, kQwen3Generation);
  EXPECT_EQ(c.family, "Qwen3");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.dtype, DType::BF16);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.rotary_dim, 128);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_layers_of(LayerKind::FullAttention), 28);
  EXPECT_EQ(c.num_layers_of(LayerKind::LinearAttention), 0);
  // generation_config.json first, then config.json's (already present) id.
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(c.bos_token_id, 151643);
  // docs/models.md: 112 KiB of KV per token in bf16.
  EXPECT_EQ(c.kv_bytes_per_token(DType::BF16), 112 * KiB);
  EXPECT_EQ(c.kv_bytes_per_token(DType::F32), 224 * KiB);
  EXPECT_EQ(c.state_bytes_per_sequence(), 0);
}

TEST(ModelConfig, Qwen3_5_0_8B_Nested) {
  const ModelConfig c = parse_model_config(kQwen3_5_0_8B, "");
  EXPECT_EQ(c.family, "Qwen3.5");
  EXPECT_EQ(c.model_type, "qwen3_5");
  EXPECT_EQ(c.architecture, "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3584);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_TRUE(c.tie_word_embeddings);  // top level of the nested config
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_layers_of(LayerKind::LinearAttention), 18);
  EXPECT_EQ(c.num_layers_of(LayerKind::FullAttention), 6);
  EXPECT_EQ(c.layer_types[3], LayerKind::FullAttention);
  EXPECT_EQ(c.layer_types[4], LayerKind::LinearAttention);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 16);
  EXPECT_EQ(c.linear_key_head_dim, 128);
  EXPECT_EQ(c.linear_value_head_dim, 128);
  EXPECT_EQ(c.linear_conv_kernel_dim, 4);
  EXPECT_EQ(c.conv_dim(), 2 * 16 * 128 + 16 * 128);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{248044}));
  EXPECT_EQ(c.bos_token_id, -1);
  // docs/models.md: 12 KiB of KV per token.
  EXPECT_EQ(c.kv_bytes_per_token(DType::BF16), 12 * KiB);
  // docs/models.md's "18 MiB" is the fp32 recurrent state (1 MiB per layer); the bf16 conv state adds
  // 3 rows of conv_dim per layer.
  EXPECT_EQ(c.state_bytes_per_sequence(), 18 * (1 * MiB + 3 * c.conv_dim() * 2));
  EXPECT_GE(c.state_bytes_per_sequence(), 18 * MiB);
  EXPECT_LT(c.state_bytes_per_sequence(), 19 * MiB);
}

TEST(ModelConfig, Qwen3_5_4B_IntervalRule) {
  const ModelConfig c = parse_model_config(kQwen3_5_4B, "");
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_layers_of(LayerKind::LinearAttention), 24);
  EXPECT_EQ(c.num_layers_of(LayerKind::FullAttention), 8);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    EXPECT_EQ(c.layer_types[i],
              i % 4 == 3 ? LayerKind::FullAttention : LayerKind::LinearAttention) << i;
  }
  EXPECT_EQ(c.kv_bytes_per_token(DType::BF16), 32 * KiB);
  EXPECT_EQ(c.state_bytes_per_sequence(), 24 * (2 * MiB + 3 * c.conv_dim() * 2));
  EXPECT_GE(c.state_bytes_per_sequence(), 48 * MiB);
  EXPECT_LT(c.state_bytes_per_sequence(), 50 * MiB);
}

TEST(ModelConfig, IntervalRuleWithOtherIntervalAndDefault) {
  json c = json::parse(kQwen3_5_4B);
  c["text_config"]["num_hidden_layers"] = 6;
  c["text_config"]["full_attention_interval"] = 3;
  ModelConfig m = parse(c);
  EXPECT_EQ(m.layer_types,
            (std::vector<LayerKind>{LayerKind::LinearAttention, LayerKind::LinearAttention,
                                    LayerKind::FullAttention, LayerKind::LinearAttention,
                                    LayerKind::LinearAttention, LayerKind::FullAttention}));
  c["text_config"].erase("full_attention_interval");  // transformers' default: 4
  c["text_config"]["num_hidden_layers"] = 8;
  m = parse(c);
  EXPECT_EQ(m.num_layers_of(LayerKind::FullAttention), 2);
  EXPECT_EQ(m.layer_types[7], LayerKind::FullAttention);
}

TEST(ModelConfig, Qwen3_5TextOnlyFlat) {
  // A text-only save (Qwen3_5ForCausalLM): decoder settings at the top, rope_theta and
  // partial_rotary_factor outside rope_parameters.
  json c = json::parse(kQwen3_5_0_8B)["text_config"];
  c["model_type"] = "qwen3_5_text";
  c["architectures"] = {"Qwen3_5ForCausalLM"};
  c.erase("rope_parameters");
  c["rope_theta"] = 5e6;
  c["partial_rotary_factor"] = 0.5;
  c["tie_word_embeddings"] = false;
  const ModelConfig m = parse(c);
  EXPECT_EQ(m.family, "Qwen3.5");
  EXPECT_EQ(m.model_type, "qwen3_5_text");
  EXPECT_EQ(m.architecture, "Qwen3_5ForCausalLM");
  EXPECT_DOUBLE_EQ(m.rope_theta, 5e6);
  EXPECT_EQ(m.rotary_dim, 128);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.num_layers_of(LayerKind::LinearAttention), 18);
}

TEST(ModelConfig, PartialRotaryFactorDefaultsToQuarterForQwen3_5) {
  json c = json::parse(kQwen3_5_0_8B);
  c["text_config"]["rope_parameters"].erase("partial_rotary_factor");
  EXPECT_EQ(parse(c).rotary_dim, 64);
  c["partial_rotary_factor"] = 0.5;  // top level of the nested config
  EXPECT_EQ(parse(c).rotary_dim, 128);
}

TEST(ModelConfig, RopeThetaInRopeParameters) {
  json c = json::parse(kQwen3_0_6B);  // transformers 5 layout
  c.erase("rope_theta");
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 2e6}};
  EXPECT_DOUBLE_EQ(parse(c).rope_theta, 2e6);
  c["rope_parameters"].erase("rope_theta");
  c["rope_theta"] = 3e6;
  EXPECT_DOUBLE_EQ(parse(c).rope_theta, 3e6);
  c.erase("rope_theta");
  EXPECT_TRUE(contains(parse_error(c), "rope_theta is missing; looked for "
                                       "rope_parameters.rope_theta and rope_theta"));
}

TEST(ModelConfig, RopeScalingForEveryFamily) {
  json c = json::parse(kQwen3_0_6B);  // transformers 4: rope_scaling beside rope_theta
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0},
                       {"original_max_position_embeddings", 32768}};
  ModelConfig m = parse(c);
  EXPECT_EQ(m.rope_scaling.scaling, RopeScaling::Yarn);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 4.0);
  EXPECT_DOUBLE_EQ(m.rope_scaling.original_max_positions, 32768.0);
  EXPECT_DOUBLE_EQ(m.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(m.rope_scaling.beta_slow, 1.0);
  EXPECT_TRUE(m.rope_scaling.truncate);
  EXPECT_FLOAT_EQ(m.rope_scaling.attention_factor, static_cast<float>(0.1 * std::log(4.0) + 1.0));
  // mscale / mscale_all_dim (DeepSeek's form): get_mscale(f, m) / get_mscale(f, m_all).
  c["rope_scaling"]["mscale"] = 0.707;
  c["rope_scaling"]["mscale_all_dim"] = 1.0;
  c["rope_scaling"]["truncate"] = false;
  c["rope_scaling"]["beta_fast"] = 16;
  m = parse(c);
  EXPECT_FLOAT_EQ(m.rope_scaling.attention_factor,
                  static_cast<float>((0.1 * 0.707 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1)));
  EXPECT_FALSE(m.rope_scaling.truncate);
  EXPECT_DOUBLE_EQ(m.rope_scaling.beta_fast, 16.0);
  c["rope_scaling"]["attention_factor"] = 1.5;  // an explicit one wins
  EXPECT_FLOAT_EQ(parse(c).rope_scaling.attention_factor, 1.5f);
  // No original_max_position_embeddings: max_position_embeddings (and then factor 1 if absent too);
  // a top-level one wins over the RoPE settings' own.
  c["rope_scaling"] = {{"rope_type", "yarn"}};
  m = parse(c);
  EXPECT_DOUBLE_EQ(m.rope_scaling.original_max_positions, 40960.0);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 1.0);
  EXPECT_FLOAT_EQ(m.rope_scaling.attention_factor, 1.0f);
  c["original_max_position_embeddings"] = 10240;
  m = parse(c);
  EXPECT_DOUBLE_EQ(m.rope_scaling.original_max_positions, 10240.0);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 4.0);  // 40960 / 10240
  c.erase("original_max_position_embeddings");
  // transformers 5: rope_parameters with rope_theta inside; linear needs its factor.
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e4}};
  m = parse(c);
  EXPECT_EQ(m.rope_scaling.scaling, RopeScaling::Linear);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 2.0);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e4);
  c["rope_parameters"].erase("factor");
  EXPECT_TRUE(contains(parse_error(c), "rope_parameters.factor is missing; rope_type linear needs it"));
  c["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}, {"rope_theta", 1e4}};
  EXPECT_TRUE(contains(parse_error(c), "rope_parameters.rope_type is 'dynamic'; pagoda implements "
                                       "the RoPE types default, linear, llama3 and yarn"));
}

// transformers 5 keys rope_parameters by layer type when layers differ (Gemma 3): the common core
// reads the full-attention entry.
TEST(ModelConfig, RopeParametersKeyedByLayerType) {
  json c = json::parse(kQwen3_0_6B);
  c.erase("rope_theta");
  c.erase("rope_scaling");
  c["num_hidden_layers"] = 2;
  c["layer_types"] = {"full_attention", "full_attention"};
  // Keyed only when every key is one of layer_types (transformers' rule).
  c["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}}};
  const ModelConfig m = parse(c);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.rope_scaling.scaling, RopeScaling::Linear);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 8.0);
}

TEST(ModelConfig, SlidingLayersNeedAFamilyThatReadsTheWindow) {
  json c = json::parse(kQwen3_0_6B);
  c["num_hidden_layers"] = 2;
  c["layer_types"] = {"sliding_attention", "full_attention"};
  c["sliding_window"] = 16;
  EXPECT_TRUE(contains(parse_error(c), "layer_types has sliding_attention layers, which pagoda's "
                                       "qwen3 does not implement"));
}

TEST(ModelConfig, TieWordEmbeddingsTextConfigFirst) {
  json c = json::parse(kQwen3_5_0_8B);
  c["text_config"]["tie_word_embeddings"] = false;
  EXPECT_FALSE(parse(c).tie_word_embeddings);
  c["text_config"].erase("tie_word_embeddings");
  c.erase("tie_word_embeddings");
  EXPECT_FALSE(parse(c).tie_word_embeddings);  // transformers' default
}

TEST(ModelConfig, HeadDimDefaultsLikeTransformers) {
  json c = json::parse(kQwen3_0_6B);
  c.erase("head_dim");
  c["hidden_size"] = 512;  // hidden / heads = 32, but transformers' Qwen3Config default is 128
  EXPECT_EQ(parse(c).head_dim, 128);
  json q = json::parse(kQwen3_5_0_8B);
  q["text_config"].erase("head_dim");
  EXPECT_EQ(parse(q).head_dim, 256);
}

TEST(ModelConfig, EosIntListAndSources) {
  json c = json::parse(kQwen3_0_6B);
  EXPECT_EQ(parse(c, R"({"eos_token_id": 7})").eos_token_ids,
            (std::vector<int64_t>{7, 151645}));
  EXPECT_EQ(parse(c, R"({"eos_token_id": [9, 8, 9]})").eos_token_ids,
            (std::vector<int64_t>{9, 8, 151645}));
  EXPECT_EQ(parse(c).eos_token_ids, (std::vector<int64_t>{151645}));
  c["eos_token_id"] = {151645, 151643};
  EXPECT_EQ(parse(c).eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  c.erase("eos_token_id");
  EXPECT_TRUE(parse(c).eos_token_ids.empty());
  EXPECT_TRUE(contains(parse_error(c, R"({"eos_token_id": [1, "x"]})"),
                       "generation_config.json: eos_token_id[1] must be an integer"));
  EXPECT_TRUE(contains(parse_error(c, R"({"eos_token_id": 999999999})"),
                       "generation_config.json: eos_token_id = 999999999 is outside [0, 151935]"));
  // Nested: text_config's id, then the top level's.
  json q = json::parse(kQwen3_5_0_8B);
  q["eos_token_id"] = 248046;
  EXPECT_EQ(parse(q, R"({"eos_token_id": [248046], "bos_token_id": 1})").eos_token_ids,
            (std::vector<int64_t>{248046, 248044}));
  EXPECT_EQ(parse(q, R"({"bos_token_id": 1})").bos_token_id, 1);
}

TEST(ModelConfig, DtypeFromEitherKey) {
  json c = json::parse(kQwen3_0_6B);
  c["torch_dtype"] = "float16";
  EXPECT_EQ(parse(c).dtype, DType::F16);
  c.erase("torch_dtype");
  EXPECT_EQ(parse(c).dtype, DType::BF16);
  c["dtype"] = "float32";
  EXPECT_EQ(parse(c).dtype, DType::F32);
  c["dtype"] = "int8";
  EXPECT_TRUE(contains(parse_error(c), "dtype is 'int8'; pagoda loads bfloat16, float16"));
}

TEST(ModelConfig, UnknownArchitectureListsSupported) {
  json c = json::parse(kQwen3_0_6B);
  c["model_type"] = "phi";
  c["architectures"] = {"PhiForCausalLM"};
  const std::string error = parse_error(c);
  EXPECT_TRUE(contains(error, "unsupported architecture 'PhiForCausalLM' (model_type 'phi'); "
                              "pagoda supports: qwen3 (Qwen3ForCausalLM), qwen3_5 "
                              "(Qwen3_5ForConditionalGeneration), qwen3_5_text (Qwen3_5ForCausalLM), "
                              "llama (LlamaForCausalLM)"));
  for (const ModelFamily& f : model_families())  // every registered family is listed
    EXPECT_TRUE(contains(error, std::string(f.model_type) + " (" + f.architecture + ")")) << f.model_type;
  c["model_type"] = "qwen3";
  c["architectures"] = {"Qwen3_5ForCausalLM"};  // disagrees with model_type
  EXPECT_TRUE(contains(parse_error(c), "unsupported architecture 'Qwen3_5ForCausalLM'"));
  c.erase("architectures");  // optional
  EXPECT_EQ(parse(c).architecture, "Qwen3ForCausalLM");
}

TEST(ModelConfig, MissingFieldsAreNamed) {
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "num_key_value_heads", "vocab_size",
                            "linear_num_key_heads", "linear_num_value_heads",
                            "linear_key_head_dim", "linear_value_head_dim",
                            "linear_conv_kernel_dim"}) {
    json c = json::parse(kQwen3_5_0_8B);
    c["text_config"].erase(field);
    EXPECT_TRUE(contains(parse_error(c),
                         std::string("config.json: text_config.") + field + " is missing"));
  }
  json c = json::parse(kQwen3_0_6B);
  c.erase("num_hidden_layers");
  EXPECT_TRUE(contains(parse_error(c), "config.json: num_hidden_layers is missing"));
  json q = json::parse(kQwen3_5_0_8B);
  q.erase("text_config");
  EXPECT_TRUE(contains(parse_error(q), "text_config is missing"));
}

TEST(ModelConfig, RejectsBadValues) {
  json c = json::parse(kQwen3_0_6B);
  c["hidden_size"] = -4;
  EXPECT_TRUE(contains(parse_error(c), "hidden_size = -4 is outside [1, "));
  c["hidden_size"] = "1024";
  EXPECT_TRUE(contains(parse_error(c), "hidden_size must be an integer, got string"));
  c["hidden_size"] = 1024;
  c["num_key_value_heads"] = 6;
  EXPECT_TRUE(contains(parse_error(c), "num_attention_heads (16) is not a multiple of "
                                       "num_key_value_heads (6)"));
  c["num_key_value_heads"] = 8;
  c["rms_norm_eps"] = 0;
  EXPECT_TRUE(contains(parse_error(c), "rms_norm_eps must be a positive number"));
  c["rms_norm_eps"] = 1e-6;
  c["num_hidden_layers"] = 1000000;
  EXPECT_TRUE(contains(parse_error(c), "num_hidden_layers = 1000000 is outside"));
  c["num_hidden_layers"] = 28;
  c["attention_bias"] = true;
  EXPECT_TRUE(contains(parse_error(c), "attention_bias is true"));
}

TEST(ModelConfig, RejectsBadLayerTypesAndGdnHeads) {
  json c = json::parse(kQwen3_5_0_8B);
  c["text_config"]["layer_types"].erase(0);
  EXPECT_TRUE(contains(parse_error(c), "text_config.layer_types has 23 entries but "
                                       "num_hidden_layers is 24"));
  c = json::parse(kQwen3_5_0_8B);
  c["text_config"]["layer_types"][2] = "chunked_attention";
  EXPECT_TRUE(contains(parse_error(c), "text_config.layer_types[2] is 'chunked_attention'"));
  c["text_config"]["layer_types"][2] = "sliding_attention";  // a kind pagoda's Qwen3.5 has no window for
  EXPECT_TRUE(contains(parse_error(c), "text_config.layer_types has sliding_attention layers, which "
                                       "pagoda's qwen3_5 does not implement"));
  c = json::parse(kQwen3_5_0_8B);
  c["text_config"]["linear_num_value_heads"] = 24;
  c["text_config"]["linear_num_key_heads"] = 16;
  EXPECT_TRUE(contains(parse_error(c), "linear_num_value_heads (24) is not a multiple of "
                                       "text_config.linear_num_key_heads (16)"));
  json q = json::parse(kQwen3_0_6B);
  q["layer_types"] = std::vector<std::string>(28, "linear_attention");
  EXPECT_TRUE(contains(parse_error(q), "layer_types[0] is 'linear_attention'"));
}

TEST(ModelConfig, RejectsBadJson) {
  EXPECT_TRUE(contains(error_of([] { parse_model_config("{\"model_type\": ", ""); }),
                       "config.json is not valid JSON"));
  EXPECT_TRUE(contains(error_of([] { parse_model_config("[]", ""); }),
                       "config.json is not a JSON object"));
  EXPECT_TRUE(contains(error_of([] { parse_model_config(kQwen3_0_6B, "nope"); }),
                       "generation_config.json is not valid JSON"));
}

TEST(ModelConfig, LoadsFromDirectory) {
  io_test::TempDir dir;
  EXPECT_TRUE(contains(error_of([&] { load_model_config(dir.path()); }), "no config.json in"));
  io_test::write_file(dir.file("config.json"), kQwen3_0_6B);
  EXPECT_EQ(load_model_config(dir.path()).eos_token_ids, (std::vector<int64_t>{151645}));
  io_test::write_file(dir.file("generation_config.json"), kQwen3Generation);
  EXPECT_EQ(load_model_config(dir.path()).eos_token_ids,
            (std::vector<int64_t>{151645, 151643}));
  io_test::write_file(dir.file("config.json"), "{");
  const std::string msg = error_of([&] { load_model_config(dir.path()); });
  EXPECT_TRUE(contains(msg, dir.path()));
  EXPECT_TRUE(contains(msg, "config.json is not valid JSON"));
}

// config.json in the layout of meta-llama/Llama-3.1-8B-Instruct (transformers 4.43: rope_scaling
// and rope_theta at the top, no head_dim).
constexpr const char* kLlama3_1_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256
})";

TEST(ModelConfig, Llama3_1_8B) {
  const ModelConfig c = parse_model_config(kLlama3_1_8B, "");
  EXPECT_EQ(c.family, "Llama");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.dtype, DType::BF16);
  EXPECT_EQ(c.head_dim, 128);  // hidden_size / num_attention_heads, as LlamaConfig derives it
  EXPECT_EQ(c.rotary_dim, 128);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.num_layers_of(LayerKind::FullAttention), 32);
  EXPECT_EQ(c.kv_bytes_per_token(DType::BF16), 32 * 2 * 8 * 128 * 2);
  EXPECT_EQ(c.state_bytes_per_sequence(), 0);
  EXPECT_NE(c.family_fields, nullptr);  // attention_bias, read by the Llama model
  EXPECT_EQ(c.rope_scaling.scaling, RopeScaling::Llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.original_max_positions, 8192.0);

  json j = json::parse(kLlama3_1_8B);
  j["head_dim"] = 64;  // explicit head_dim wins
  EXPECT_EQ(parse(j).head_dim, 64);
}

TEST(ModelConfig, LlamaRefusesWhatItDoesNotImplement) {
  json c = json::parse(kLlama3_1_8B);
  c["rope_scaling"]["rope_type"] = "longrope";
  EXPECT_TRUE(contains(parse_error(c), "rope_scaling.rope_type is 'longrope'; pagoda implements "
                                       "the RoPE types default, linear, llama3 and yarn"));
  c = json::parse(kLlama3_1_8B);
  c["rope_scaling"].erase("low_freq_factor");
  EXPECT_TRUE(contains(parse_error(c), "rope_scaling.low_freq_factor is missing"));
  c = json::parse(kLlama3_1_8B);
  c["mlp_bias"] = true;
  EXPECT_TRUE(contains(parse_error(c), "mlp_bias is true"));
  c = json::parse(kLlama3_1_8B);
  c["hidden_act"] = "gelu";
  EXPECT_TRUE(contains(parse_error(c), "hidden_act must be 'silu'"));
  c = json::parse(kLlama3_1_8B);
  c["attention_bias"] = true;  // supported: q/k/v/o biases
  EXPECT_EQ(parse(c).family, "Llama");
  c.erase("rope_scaling");  // plain RoPE
  EXPECT_EQ(parse(c).rotary_dim, 128);
}

TEST(ModelConfig, Names) {
  EXPECT_STREQ(layer_kind_name(LayerKind::LinearAttention), "linear_attention");
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

TEST(ModelConfig, GenerationConfigSamplingDefaults) {
  const ModelConfig c = parse_model_config(
      kQwen3_0_6B, R"({"eos_token_id": 151645, "temperature": 0.6, "top_k": 20, "top_p": 0.95})");
  EXPECT_EQ(c.generation_defaults.temperature, 0.6);
  EXPECT_EQ(c.generation_defaults.top_k, 20);
  EXPECT_EQ(c.generation_defaults.top_p, 0.95);
  EXPECT_FALSE(c.generation_defaults.min_p.has_value());
  EXPECT_FALSE(c.generation_defaults.repetition_penalty.has_value());
  // A request that sets nothing gets the checkpoint's values; the rest keep the built-in defaults.
  const SamplingParams p = with_generation_defaults({}, c);
  EXPECT_EQ(p.temperature, 0.6);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.top_p, 0.95);
  EXPECT_EQ(p.min_p, SamplingParams{}.min_p);
  EXPECT_THROW(parse_model_config(kQwen3_0_6B, R"({"top_p": 3})"), Error);
  EXPECT_THROW(parse_model_config(kQwen3_0_6B, R"({"temperature": "hot"})"), Error);
}

}  // namespace
}  // namespace pagoda
