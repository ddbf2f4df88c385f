// Tool calls in the syntax of the Llama 3.x, Mistral and Gemma 3 families, through the official
// `openai` npm client (family_tool_calls_test.mjs): tool_choice auto, required and named, whole and
// streamed. Each family's model is written at test time: a few tiny layers of seeded random weights
// with the real tokenizer's vocabulary (tests/data, from tools/fetch_test_data.sh), so the server
// renders the family's own chat template and its grammar and parser work on the real tokens.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server_harness.h"

namespace pagoda::server::test {
namespace {

constexpr const char* kKey = "sk-family";

struct Family {
  const char* name;
  const char* fixture;    // tests/fixtures/models/<fixture>/config.json: the family's config keys
  const char* tokenizer;  // tests/data/<tokenizer>: tokenizer.json + tokenizer_config.json
  const char* parser;     // --tool-call-parser
  const char* chat_template;  // --chat-template (a file under the source tree), or "" for the tokenizer's
  int64_t vocab_size;     // the real model's (its embedding rows), at least the tokenizer's ids
  nlohmann::json bos, eos;
};

// Llama 3.2's tokenizer_config.json carries the Llama 3.1-family template with JSON tool calls
// (the @lenml llama3_1 package ships Llama 3's short template, which has no tools).
const Family kFamilies[] = {
    {"llama3", "llama3-tiny-untied", "llama3_2-tokenizer", "llama3_json", "", 128256, 128000,
     nlohmann::json::array({128001, 128008, 128009})},
    {"mistral", "mistral-tiny-swa", "mistral_nemo-tokenizer", "mistral", "", 131072, 1, 2},
    {"gemma3", "gemma3-tiny-text", "gemma3-tokenizer", "pythonic",
     "tests/fixtures/chat_templates/gemma3_pythonic_tools.jinja", 262208, 2, nlohmann::json::array({1, 106})},
};

// The fixture's config with tiny sizes and the real vocabulary: hidden 32, two layers, 2 query
// heads over 1 KV head of 16, bf16. With 128k-262k rows the embedding is still only 8-17 MB.
nlohmann::json tiny_config(const Family& f) {
  nlohmann::json c = nlohmann::json::parse(read_file(source_path(std::string("tests/fixtures/models/") + f.fixture +
                                                                 "/config.json")));
  c["vocab_size"] = f.vocab_size;
  c["bos_token_id"] = f.bos;
  c["eos_token_id"] = f.eos;
  c["pad_token_id"] = nullptr;
  c["hidden_size"] = 32;
  c["intermediate_size"] = 64;
  c["num_hidden_layers"] = 2;
  c["num_attention_heads"] = 2;
  c["num_key_value_heads"] = 1;
  c["head_dim"] = 16;
  c["dtype"] = "bfloat16";
  if (c.contains("layer_types")) c["layer_types"] = {"sliding_attention", "full_attention"};
  if (c.contains("query_pre_attn_scalar")) c["query_pre_attn_scalar"] = 16;
  return c;
}

// The tensors a Llama-style decoder of config `c` has (Gemma 3: its extra norms, a tied head).
std::vector<std::pair<std::string, std::vector<int64_t>>> decoder_tensors(const nlohmann::json& c) {
  const int64_t h = c["hidden_size"], inter = c["intermediate_size"], hd = c["head_dim"];
  const int64_t q = c["num_attention_heads"].get<int64_t>() * hd, kv = c["num_key_value_heads"].get<int64_t>() * hd;
  const bool gemma = c["model_type"] == "gemma3_text";
  std::vector<std::pair<std::string, std::vector<int64_t>>> t = {{"model.embed_tokens.weight", {c["vocab_size"], h}},
                                                                 {"model.norm.weight", {h}}};
  if (!c.value("tie_word_embeddings", false)) t.push_back({"lm_head.weight", {c["vocab_size"], h}});
  for (int l = 0; l < c["num_hidden_layers"].get<int>(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {h}});
    t.push_back({p + "post_attention_layernorm.weight", {h}});
    t.push_back({p + "self_attn.q_proj.weight", {q, h}});
    t.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    t.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    t.push_back({p + "self_attn.o_proj.weight", {h, q}});
    t.push_back({p + "mlp.gate_proj.weight", {inter, h}});
    t.push_back({p + "mlp.up_proj.weight", {inter, h}});
    t.push_back({p + "mlp.down_proj.weight", {h, inter}});
    if (gemma) {
      t.push_back({p + "pre_feedforward_layernorm.weight", {h}});
      t.push_back({p + "post_feedforward_layernorm.weight", {h}});
      t.push_back({p + "self_attn.q_norm.weight", {hd}});
      t.push_back({p + "self_attn.k_norm.weight", {hd}});
    }
  }
  return t;
}

// A safetensors file of seeded random bf16 values in [-0.1, 0.1): the weights only have to give
// finite logits; the grammar, not the model, decides what is written.
void write_random_bf16_safetensors(const std::string& path,
                                   const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  size_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, offset + 2 * n}}};
    offset += 2 * n;
  }
  std::string head = header.dump();
  while ((8 + head.size()) % 8 != 0) head += ' ';  // data stays 8-byte aligned, as the format's writers do
  std::string bytes(8 + head.size() + offset, '\0');
  const uint64_t len = head.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  std::memcpy(bytes.data() + 8, head.data(), head.size());
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  for (size_t i = 8 + head.size(); i < bytes.size(); i += 2) {
    const float v = dist(rng);
    uint32_t u = 0;
    std::memcpy(&u, &v, 4);
    bytes[i] = static_cast<char>((u >> 16) & 0xff);  // bf16: a float's upper half, little-endian
    bytes[i + 1] = static_cast<char>(u >> 24);
  }
  write_file(path, bytes);
}

// The model folder for `f` in a fresh temporary directory, removed with this object.
struct FamilyModelDir {
  explicit FamilyModelDir(const Family& f) {
    const fs::path tok = source_path(std::string("tests/data/") + f.tokenizer);
    if (!fs::exists(tok / "tokenizer.json") || !fs::exists(tok / "tokenizer_config.json")) {
      ADD_FAILURE() << tok << " lacks tokenizer.json / tokenizer_config.json: run tools/fetch_test_data.sh";
      return;
    }
    std::string tmpl = (fs::temp_directory_path() / "pagoda-family-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    path = tmpl;
    const nlohmann::json config = tiny_config(f);
    write_file(path + "/config.json", config.dump(2));
    write_file(path + "/generation_config.json",
               nlohmann::json{{"bos_token_id", f.bos}, {"eos_token_id", f.eos}}.dump(2));
    write_random_bf16_safetensors(path + "/model.safetensors", decoder_tensors(config));
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tok / file, fs::path(path) / file);
  }
  ~FamilyModelDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
  FamilyModelDir(const FamilyModelDir&) = delete;
  std::string path;
};

// gtest names a failing case by its family, not by the struct's bytes.
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

class FamilyToolCalls : public ::testing::TestWithParam<Family> {};

TEST_P(FamilyToolCalls, AutoRequiredNamedThroughTheOpenAiClient) {
  const Family& f = GetParam();
  ASSERT_TRUE(fs::exists(source_path("tests/data/node/node_modules/openai/package.json")))
      << "the `openai` npm package is missing: run tools/fetch_test_data.sh";
  const FamilyModelDir dir(f);
  ASSERT_FALSE(dir.path.empty());
  std::vector<std::string> args = {"--api-key", kKey, "--served-model-name", "tiny", "--tool-call-parser", f.parser};
  if (*f.chat_template) {
    args.push_back("--chat-template");
    args.push_back(source_path(f.chat_template));
  }
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, args)) << s.log();
  const CommandResult r = run_command("node " + source_path("tests/server/family_tool_calls_test.mjs") + " " +
                                      std::to_string(s.port()) + " " + kKey + " tiny " + f.parser + " 2>&1");
  EXPECT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("# pass 6"), std::string::npos) << r.out;  // all ran, none skipped
  EXPECT_EQ(s.stop(), 0) << s.log();
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyToolCalls, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace pagoda::server::test
