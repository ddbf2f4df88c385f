// `pagoda info` on a fixture checkpoint of every registered family: the family, its shapes and its
// own settings, each expected value read from the fixture's config.json (written by transformers,
// tools/make_*fixtures.py), never from pagoda. One row per checkpoint: a new family adds a row.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support/run_command.h"
#include "core/build_paths.h"

namespace {

using nlohmann::json;

std::string fixture_dir(const std::string& name) {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

// %g as printf writes it (info prints rope numbers that way).
std::string g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The value printed after `label` on its own line of `pagoda info` ("" when the line is absent).
std::string info_line(const std::string& out, const std::string& label) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(label + " ", 0) != 0) continue;
    const size_t v = line.find_first_not_of(' ', label.size());
    return v == std::string::npos ? "" : line.substr(v);
  }
  return "";
}

struct InfoRow {
  const char* fixture;  // tests/fixtures/models/<fixture>
  const char* family;   // the family name info prints
  // The family's own lines: {label, expected value}, from the decoder config (text_config when
  // nested).
  std::function<std::vector<std::pair<std::string, std::string>>(const json& dec)> settings;
};

std::vector<std::pair<std::string, std::string>> no_settings(const json&) { return {}; }

// Llama 3: rope_type llama3 with its four numbers, and attention_bias.
std::vector<std::pair<std::string, std::string>> llama_settings(const json& dec) {
  const json& rope = dec.contains("rope_parameters") ? dec["rope_parameters"] : dec["rope_scaling"];
  return {{"rope scaling", "llama3, factor " + g(rope["factor"]) + ", low/high freq factor " +
                               g(rope["low_freq_factor"]) + "/" + g(rope["high_freq_factor"]) + ", original context " +
                               g(rope["original_max_position_embeddings"])},
          {"attention bias", dec.value("attention_bias", false) ? "q/k/v/o" : "none"}};
}

// Mistral: every layer within sliding_window.
std::vector<std::pair<std::string, std::string>> window_settings(const json& dec) {
  const std::string w = g(dec["sliding_window"]);
  return {{"sliding window", w + " (a query attends to its last " + w + " positions)"}};
}

// Gemma 3 text: sliding layers, and the full layers' linear RoPE scaling.
std::vector<std::pair<std::string, std::string>> gemma_settings(const json& dec) {
  auto s = window_settings(dec);
  s.push_back({"rope scaling", "linear, factor " + g(dec["rope_parameters"]["full_attention"]["factor"])});
  return s;
}

const InfoRow kRows[] = {
    {"qwen3-tiny-tied", "Qwen3", no_settings},
    {"qwen3-tiny-untied-gqa4", "Qwen3", no_settings},
    {"qwen3_5-tiny-text", "Qwen3.5", no_settings},
    {"qwen3_5-tiny-mm", "Qwen3.5", no_settings},
    {"llama3-tiny-untied", "Llama", llama_settings},
    {"llama3-tiny-tied-bias", "Llama", llama_settings},
    {"qwen2-tiny-bias", "Qwen2", no_settings},
    {"mistral-tiny-swa", "Mistral", window_settings},
    {"gemma3-tiny-text", "Gemma 3", gemma_settings},
};

class InfoFamilies : public ::testing::TestWithParam<InfoRow> {};

TEST_P(InfoFamilies, PrintsFamilyShapesAndSettings) {
  const InfoRow& row = GetParam();
  std::ifstream in(fixture_dir(row.fixture) + "/config.json");
  ASSERT_TRUE(in.good()) << row.fixture;
  const json top = json::parse(in);
  const json& dec = top.contains("text_config") ? top["text_config"] : top;
  const auto r = pagoda::testing::run_command(std::string(PAGODA_BINARY) + " info " + fixture_dir(row.fixture) + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string& out = r.out;

  const std::string arch = top["architectures"][0];
  EXPECT_EQ(info_line(out, "architecture"),
            arch + " (model_type " + top["model_type"].get<std::string>() + ", family " + row.family + ")");
  const long long layers = dec["num_hidden_layers"], heads = dec["num_attention_heads"];
  EXPECT_EQ(info_line(out, "layers").rfind(std::to_string(layers) + ": ", 0), 0u) << out;
  EXPECT_EQ(info_line(out, "hidden / mlp"),
            std::to_string(dec["hidden_size"].get<long long>()) + " / " + std::to_string(dec["intermediate_size"].get<long long>()));
  const long long head_dim = dec.contains("head_dim") && !dec["head_dim"].is_null() ? dec["head_dim"].get<long long>()
                                                                                    : dec["hidden_size"].get<long long>() / heads;
  const std::string attention = info_line(out, "attention");
  EXPECT_EQ(attention.rfind(std::to_string(heads) + " heads, " + std::to_string(dec["num_key_value_heads"].get<long long>()) +
                                " kv heads, head_dim " + std::to_string(head_dim) + ",",
                            0),
            0u)
      << out;
  const json& rope = dec.contains("rope_parameters") ? dec["rope_parameters"] : dec;
  if (rope.contains("rope_theta")) {
    EXPECT_NE(attention.find("rope_theta " + g(rope["rope_theta"])), std::string::npos) << out;
  }
  const bool tied = top.value("tie_word_embeddings", dec.value("tie_word_embeddings", false));
  EXPECT_EQ(info_line(out, "vocab"),
            std::to_string(dec["vocab_size"].get<long long>()) + (tied ? " (tied embeddings)" : " (untied embeddings)"));
  EXPECT_EQ(info_line(out, "max context"), std::to_string(dec["max_position_embeddings"].get<long long>()));
  for (const auto& [label, value] : row.settings(dec)) EXPECT_EQ(info_line(out, label), value) << out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InfoFamilies, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<InfoRow>& p) {
                           return std::regex_replace(std::string(p.param.fixture), std::regex("[^A-Za-z0-9]"), "_");
                         });

}  // namespace
