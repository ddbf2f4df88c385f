// Whole models in 4 bits on the CPU: a family fixture's projections quantized here (round to
// nearest per group, as a GPTQ/AWQ writer without calibration) and stored in each 4-bit layout
// (int4_pack.h, written from the formats' definitions), beside a dense f32 checkpoint of exactly
// the dequantized weights. The dense checkpoint runs pagoda's f32 path, which the family fixtures
// hold to transformers; the 4-bit one must give the same last-prompt logits (within fp32
// rounding) and the same greedy tokens — every projection of Qwen3, Qwen3.5 (Gated DeltaNet, its
// bf16 b/a beside 4-bit q|k|v|z in one fused projection), Qwen2 (biases) and Llama 3 read right.
// The transformers references of the 4-bit formats themselves are tools/make_int4_fixtures.py's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "../io/io_test_util.h"
#include "backend/backend.h"
#include "engine/model_runner.h"
#include "int4_pack.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/paged_kv_cache.h"
#include "kv/recurrent_state.h"
#include "model/model.h"
#include "model/registry.h"
#include "reference_fixture.h"
#include "single_sequence.h"

namespace pagoda {
namespace {

using int4_test::Int4Matrix;
using int4_test::Layout;

const std::regex kQuantized(R"(\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|in_proj_qkv|in_proj_z|out_proj)\.weight$)");

// w [rows, cols] f32 → 4-bit: per group, asymmetric (zero point) or symmetric (z = 8); scales with
// 8 significant bits (exact in bf16, exact products in fp32).
Int4Matrix quantize(const float* w, int64_t rows, int64_t cols, int64_t group, bool symmetric) {
  Int4Matrix m{rows, cols, group, {}, {}, {}};
  m.q.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < cols / group; ++g) {
      const float* p = w + r * cols + g * group;
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < group; ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
      float s = symmetric ? std::max(-lo, hi) / 7.0f : (hi - lo) / 15.0f;
      if (!(s > 0)) s = 1.0f;
      int e = 0;
      std::frexp(s, &e);
      s = std::ldexp(std::round(std::ldexp(s, 8 - e)), e - 8);  // 8 significant bits
      const int z = symmetric ? 8 : static_cast<int>(std::clamp(std::round(-lo / s), 0.0f, 15.0f));
      m.scale.push_back(s);
      m.z.push_back(z);
      for (int64_t i = 0; i < group; ++i)
        m.q[static_cast<size_t>(r * cols + g * group + i)] =
            static_cast<int>(std::clamp(std::round(p[i] / s) + static_cast<float>(z), 0.0f, 15.0f));
    }
  return m;
}

nlohmann::json quantization_config(Layout layout, int64_t group) {
  if (layout == Layout::Awq)
    return {{"quant_method", "awq"}, {"bits", 4}, {"group_size", group}, {"zero_point", true}, {"version", "gemm"}};
  if (layout == Layout::Gptq)
    return {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", group > 0 ? group : -1}, {"desc_act", false},
            {"sym", false}, {"checkpoint_format", "gptq"}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights", {{"num_bits", 4}, {"type", "int"}, {"strategy", group > 0 ? "group" : "channel"},
                           {"group_size", group}, {"symmetric", true}}}}}}}};
}

// Writes `dir`/int4 and `dir`/dense from fixture `name`.
void write_pair(const std::string& name, Layout layout, int64_t group, const std::string& dir) {
  const Checkpoint ckpt = Checkpoint::open_dir(testing::fixture_model_dir(name));
  std::vector<io_test::Tensor> int4, dense;
  int quantized = 0;
  for (const TensorView* t : ckpt.all()) {
    ASSERT_EQ(t->dtype, DType::F32) << t->name;
    const std::string bytes(reinterpret_cast<const char*>(t->data), t->nbytes);
    if (!std::regex_search(t->name, kQuantized) || t->shape.size() != 2) {
      int4.push_back({t->name, "F32", t->shape, bytes});
      dense.push_back({t->name, "F32", t->shape, bytes});
      continue;
    }
    const int64_t rows = t->shape[0], cols = t->shape[1];
    const Int4Matrix m = quantize(reinterpret_cast<const float*>(t->data), rows, cols, group > 0 ? group : cols,
                                  layout == Layout::PackQuantized);
    std::vector<float> deq(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) deq[static_cast<size_t>(r * cols + c)] = static_cast<float>(m.at(r, c));
    dense.push_back({t->name, "F32", t->shape, io_test::bytes_of(deq)});
    for (auto& p : int4_test::pack(t->name.substr(0, t->name.size() - 7), m, layout)) int4.push_back(std::move(p));
    ++quantized;
  }
  ASSERT_GT(quantized, 4);
  std::ifstream in(testing::fixture_model_dir(name) + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  for (const char* sub : {"int4", "dense"}) std::filesystem::create_directories(dir + "/" + sub);
  io_test::write_file(dir + "/dense/config.json", config.dump());
  io_test::write_file(dir + "/dense/model.safetensors", io_test::build(dense));
  config["quantization_config"] = quantization_config(layout, group);
  io_test::write_file(dir + "/int4/config.json", config.dump());
  io_test::write_file(dir + "/int4/model.safetensors", io_test::build(int4));
}

struct ModelRun {
  std::vector<float> last_logits;
  std::vector<int32_t> greedy;
};

ModelRun run_model(const std::string& dir, const std::vector<int32_t>& prompt, int new_tokens) {
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  auto model = load_model(cfg, ckpt, *backend);
  const int32_t block_size = 16, longest = static_cast<int32_t>(prompt.size()) + new_tokens;
  const int32_t num_blocks = longest / block_size + 1;
  KvCacheShape shape{static_cast<int32_t>(cfg.num_layers_of(LayerKind::FullAttention)), num_blocks, block_size,
                     static_cast<int32_t>(cfg.num_kv_heads), static_cast<int32_t>(cfg.head_dim), DType::F32};
  PagedKvCache kv(*backend, shape);
  ModelRunner runner(*backend, *model, longest, 1, num_blocks);
  std::unique_ptr<RecurrentState> state;
  if (cfg.num_layers_of(LayerKind::LinearAttention) > 0)
    state = std::make_unique<RecurrentState>(*backend, RecurrentStateShape::for_model(cfg, 1, DType::F32));
  testing::SingleSequence seq{block_size, std::vector<int32_t>(static_cast<size_t>(num_blocks))};
  std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
  if (state) seq.state_slot = 0;
  ModelRun r;
  std::vector<float> logits = runner.execute(seq.step(prompt), kv, state.get());
  r.last_logits = logits;
  for (int t = 0; t < new_tokens; ++t) {
    r.greedy.push_back(testing::argmax(logits));
    if (t + 1 < new_tokens) logits = runner.execute(seq.step({r.greedy.back()}), kv, state.get());
  }
  return r;
}

struct Case {
  const char* fixture;
  Layout layout;
  int64_t group;  // 0: per channel
};

class Int4Checkpoint : public ::testing::TestWithParam<Case> {};

TEST_P(Int4Checkpoint, GivesTheDequantizedModelsLogitsAndTokens) {
  const Case c = GetParam();
  io_test::TempDir tmp;
  write_pair(c.fixture, c.layout, c.group, tmp.path());
  const std::vector<testing::ReferenceCase> cases = testing::load_reference(c.fixture);
  ASSERT_FALSE(cases.empty());
  for (const auto& rc : {cases.front(), cases.back()}) {
    SCOPED_TRACE("prompt of " + std::to_string(rc.prompt_ids.size()) + " tokens");
    const ModelRun want = run_model(tmp.path() + "/dense", rc.prompt_ids, 12);
    const ModelRun got = run_model(tmp.path() + "/int4", rc.prompt_ids, 12);
    ASSERT_EQ(got.last_logits.size(), want.last_logits.size());
    float scale = 0;
    for (float v : want.last_logits) scale = std::max(scale, std::fabs(v));
    EXPECT_LT(testing::max_abs_diff(got.last_logits, want.last_logits), 1e-4f * std::max(1.0f, scale));
    EXPECT_EQ(got.greedy, want.greedy);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Int4Checkpoint,
                         ::testing::Values(Case{"qwen3-tiny-tied", Layout::Awq, 32},
                                           Case{"qwen3_5-tiny-text", Layout::Gptq, 32},
                                           Case{"qwen2-tiny-bias", Layout::PackQuantized, 16},
                                           Case{"llama3-tiny-untied", Layout::Gptq, 0}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.fixture;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace pagoda
