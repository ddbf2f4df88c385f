// `pagoda info` on full-size MoE configs (config.json alone: no weights needed) gives transformers'
// parameter counts: total and active per token of a Qwen3-30B-A3B and a Qwen3.5-35B-A3B config, as
// tools/make_moe_fixtures.py counted them with AutoModelForCausalLM.from_config on the meta device
// (tests/fixtures/configs/moe_param_counts.json). And on the tiny MoE fixtures: the family and its
// expert settings, read from their config.json.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../support/run_command.h"
#include "core/build_paths.h"

namespace {

using nlohmann::json;

const std::string kRoot = std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures";

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

std::string info_line(const std::string& out, const std::string& label) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(label + " ", 0) != 0) continue;
    const size_t v = line.find_first_not_of(' ', label.size());
    return v == std::string::npos ? "" : line.substr(v);
  }
  return "";
}

// "30532122624 total (30.53B), 3345383424 active per token (3.35B)" -> the two integers.
std::pair<long long, long long> counts_of(const std::string& line) {
  long long total = -1, active = -1;
  if (std::sscanf(line.c_str(), "%lld total (%*[^)]), %lld active", &total, &active) != 2) return {-1, -1};
  return {total, active};
}

class InfoMoeCounts : public ::testing::TestWithParam<std::string> {};

TEST_P(InfoMoeCounts, EqualTransformersCounts) {
  const std::string name = GetParam();
  const json counts = read_json(kRoot + "/configs/moe_param_counts.json");
  ASSERT_TRUE(counts["models"].contains(name)) << name;
  const json& want = counts["models"][name];
  const auto r = pagoda::testing::run_command(std::string(PAGODA_BINARY) + " info " + kRoot + "/configs/" + name + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(info_line(r.out, "weights on disk"), "none (config.json only)") << r.out;
  const auto [total, active] = counts_of(info_line(r.out, "params (config)"));
  EXPECT_EQ(total, want["total"].get<long long>()) << r.out;
  EXPECT_EQ(active, want["active"].get<long long>()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(FullSize, InfoMoeCounts, ::testing::Values("qwen3-30b-a3b", "qwen3_5-35b-a3b"),
                         [](const auto& p) {
                           std::string n = p.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// The tiny fixtures: the family and the experts line, each value from the fixture's config.json.
TEST(InfoMoe, TinyFixturesShowTheirExperts) {
  for (const std::string fixture : {"qwen3_moe-tiny-dense-layer", "qwen3_moe-tiny-raw-topk", "qwen3_5_moe-tiny-mm"}) {
    SCOPED_TRACE(fixture);
    const std::string dir = kRoot + "/models/" + fixture;
    const json top = read_json(dir + "/config.json");
    const json& dec = top.contains("text_config") ? top["text_config"] : top;
    const auto r = pagoda::testing::run_command(std::string(PAGODA_BINARY) + " info " + dir + " 2>&1");
    ASSERT_EQ(r.code, 0) << r.out;
    const bool qwen35 = top["model_type"] == "qwen3_5_moe";
    EXPECT_NE(info_line(r.out, "architecture").find(qwen35 ? "family Qwen3.5-MoE" : "family Qwen3-MoE"), std::string::npos)
        << r.out;
    const long long experts = dec.contains("num_experts") ? dec["num_experts"].get<long long>()
                                                          : dec["num_local_experts"].get<long long>();
    const bool renorm = qwen35 || dec.value("norm_topk_prob", false);
    std::string want = std::to_string(experts) + " routed, top " + std::to_string(dec["num_experts_per_tok"].get<long long>()) +
                       (renorm ? " renormalised" : " (not renormalised)") + ", moe_intermediate_size " +
                       std::to_string(dec["moe_intermediate_size"].get<long long>());
    if (qwen35)
      want += ", shared expert " + std::to_string(dec["shared_expert_intermediate_size"].get<long long>()) +
              " (sigmoid-gated)";
    EXPECT_EQ(info_line(r.out, "experts"), want) << r.out;
  }
}

}  // namespace
