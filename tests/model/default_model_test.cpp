// The models that ship in models/ (tools/train_tiny_models.py): the perplexity of the held-out text
// (tests/fixtures/heldout.txt, the Revelation, never trained on) computed by pagoda's tokenizer,
// Scorer and CPU model must equal what transformers computed for the same text and sliding window
// (tests/fixtures/heldout_reference.json, written by the training script from the saved bf16
// checkpoints evaluated in fp32), within 1%. Measured agreement when the models were made: ~3e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/scorer.h"
#include "model/model.h"
#include "model/registry.h"
#include "tokenizer/tokenizer.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

const std::string kSource = PAGODA_SOURCE_DIR;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double nll(std::span<const float> row, int32_t target) {
  double mx = row[0];
  for (float v : row) mx = std::max(mx, static_cast<double>(v));
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  return std::log(sum) + mx - static_cast<double>(row[static_cast<size_t>(target)]);
}

struct Perplexity {
  double ppl;
  int64_t scored;
};

// Hugging Face's sliding window (windows of ctx tokens every stride tokens; each window scores the
// targets the previous one did not), token-weighted mean NLL.
Perplexity sliding_perplexity(Backend& be, Model& model, const std::vector<int32_t>& ids,
                              int32_t ctx, int32_t stride, const std::string& kv_cache_dtype = "auto") {
  Scorer scorer(be, model, ctx, std::min(ctx, 512),
                parse_kv_cache_dtype(kv_cache_dtype, model.config().dtype));
  const int32_t n = static_cast<int32_t>(ids.size());
  double total = 0;
  int64_t count = 0;
  for (int32_t begin = 0, prev_end = 0; begin < n; begin += stride) {
    const int32_t end = std::min(begin + ctx, n);
    const int32_t first = std::max(0, (end - begin) - (end - prev_end) - 1);
    const std::vector<int32_t> window(ids.begin() + begin, ids.begin() + end);
    scorer.score(window, [&](int32_t p, std::span<const float> row) {
      if (p + 1 < static_cast<int32_t>(window.size()) && p >= first) {
        total += nll(row, window[static_cast<size_t>(p) + 1]);
        ++count;
      }
    });
    prev_end = end;
    if (end == n) break;
  }
  return {std::exp(total / static_cast<double>(count)), count};
}

// The cheaper of the recorded windows (non-overlapping); `pagoda perplexity` defaults to stride
// 256, whose reference is recorded too (models/README.md lists both). Null when absent.
const nlohmann::json& window_512(const nlohmann::json& ref, const std::string& name) {
  static const nlohmann::json absent;
  const auto& windows = ref.at("models").at(name).at("windows");
  auto it = std::find_if(windows.begin(), windows.end(), [](const nlohmann::json& w) {
    return w.at("ctx") == 512 && w.at("stride") == 512;
  });
  return it == windows.end() ? absent : *it;
}

// The held-out text as the model in `dir` tokenizes it.
std::vector<int32_t> heldout_ids(const std::string& dir, const nlohmann::json& ref) {
  return Tokenizer::load_dir(dir)->encode(read_text(kSource + "/" + ref.at("text").get<std::string>()));
}

class DefaultModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DefaultModelTest, HeldOutPerplexityMatchesTransformers) {
  const std::string name = GetParam();
  const nlohmann::json ref = read_json(kSource + "/tests/fixtures/heldout_reference.json");
  ASSERT_TRUE(ref.at("models").contains(name)) << name << " missing from heldout_reference.json";
  const std::string dir = kSource + "/models/" + name;

  // Tokenization first: a different token sequence would make the perplexities incomparable.
  const auto tok = Tokenizer::load_dir(dir);
  const std::vector<int32_t> ids = tok->encode(read_text(kSource + "/" + ref.at("text").get<std::string>()));
  ASSERT_EQ(static_cast<int64_t>(ids.size()), ref.at("num_tokens").get<int64_t>());
  const auto first = ref.at("first_token_ids").get<std::vector<int32_t>>();
  ASSERT_TRUE(std::equal(first.begin(), first.end(), ids.begin()));

  auto backend = make_backend("cpu");
  auto model = load_model(dir, *backend);
  const nlohmann::json& window = window_512(ref, name);
  ASSERT_FALSE(window.is_null());
  const double want = window.at("perplexity").get<double>();
  const Perplexity got = sliding_perplexity(*backend, *model, ids, 512, 512);
  EXPECT_EQ(got.scored, window.at("scored_tokens").get<int64_t>());
  EXPECT_NEAR(got.ppl / want, 1.0, 0.01) << "pagoda " << got.ppl << ", transformers " << want;
  // A trained model, not noise: far below the vocabulary size (4096).
  EXPECT_LT(got.ppl, 100.0);
}

// FP8 weights (--quantization fp8: every projection's matrix quantized at load with per-channel
// scales) on real text: the held-out perplexity stays within 2% of transformers' bf16 reference.
// On the default model only (minutes under the sanitizers; the projection code is the same for both).
TEST(DefaultModelFp8, WeightsKeepHeldOutPerplexityWithinTwoPercent) {
  const std::string name = "qwen3_5-kjv";
  const nlohmann::json ref = read_json(kSource + "/tests/fixtures/heldout_reference.json");
  const std::string dir = kSource + "/models/" + name;
  const std::vector<int32_t> ids = heldout_ids(dir, ref);
  ModelConfig cfg = load_model_config(dir);
  apply_quantization_flag("fp8", cfg.quantization);
  auto backend = make_backend("cpu");
  auto model = load_model(cfg, Checkpoint::open_dir(dir), *backend);
  const std::vector<OpUse> ops = model->required_ops();
  ASSERT_NE(std::find(ops.begin(), ops.end(), OpUse{Op::LinearFp8, DType::F8_E4M3}), ops.end())
      << "the projections should be FP8";
  const nlohmann::json& window = window_512(ref, name);
  ASSERT_FALSE(window.is_null());
  const double want = window.at("perplexity").get<double>();
  const Perplexity got = sliding_perplexity(*backend, *model, ids, 512, 512);
  EXPECT_NEAR(got.ppl / want, 1.0, 0.02) << "pagoda fp8 " << got.ppl << ", transformers bf16 " << want;
}

// The FP8 KV cache (--kv-cache-dtype fp8: keys and values stored as e4m3, scale 1) on real text:
// the held-out perplexity stays within 2% of transformers' bf16 reference (default model only).
TEST(DefaultModelFp8, KvCacheKeepsHeldOutPerplexityWithinTwoPercent) {
  const std::string name = "qwen3_5-kjv";
  const nlohmann::json ref = read_json(kSource + "/tests/fixtures/heldout_reference.json");
  const std::string dir = kSource + "/models/" + name;
  const std::vector<int32_t> ids = heldout_ids(dir, ref);
  auto backend = make_backend("cpu");
  auto model = load_model(dir, *backend);
  const nlohmann::json& window = window_512(ref, name);
  ASSERT_FALSE(window.is_null());
  const double want = window.at("perplexity").get<double>();
  const Perplexity got = sliding_perplexity(*backend, *model, ids, 512, 512, "fp8");
  EXPECT_NEAR(got.ppl / want, 1.0, 0.02) << "pagoda fp8 KV " << got.ppl << ", transformers bf16 " << want;
  EXPECT_NE(got.ppl / want, 1.0) << "the cache should hold e4m3 values, not the model's dtype";
}

INSTANTIATE_TEST_SUITE_P(Shipped, DefaultModelTest, ::testing::Values("qwen3_5-kjv", "qwen3-kjv"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// models/default is what `pagoda serve` and `pagoda generate` load with no MODEL_DIR: the Qwen3.5
// model, with ChatML and its stop tokens; everything in models/ stays small enough to ship.
TEST(DefaultModel, IsTheQwen35ModelAndSmall) {
  const std::string dir = kSource + "/models/default";
  ASSERT_TRUE(fs::is_directory(dir));
  EXPECT_EQ(fs::canonical(dir), fs::canonical(kSource + "/models/qwen3_5-kjv"));
  const nlohmann::json config = read_json(dir + "/config.json");
  EXPECT_EQ(config.at("architectures").at(0), "Qwen3_5ForCausalLM");
  const nlohmann::json tok_config = read_json(dir + "/tokenizer_config.json");
  EXPECT_EQ(tok_config.at("eos_token"), "<|im_end|>");
  EXPECT_NE(tok_config.at("chat_template").get<std::string>().find("<|im_start|>"),
            std::string::npos);
  const auto tok = Tokenizer::load_dir(dir);
  const nlohmann::json gen = read_json(dir + "/generation_config.json");
  EXPECT_EQ(gen.at("eos_token_id"),
            nlohmann::json::array({tok->encode("<|im_end|>").at(0), tok->encode("<|endoftext|>").at(0)}));

  uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(kSource + "/models"))
    if (e.is_regular_file() && !e.is_symlink()) bytes += e.file_size();
  // Two models of ~6 M parameters in bf16 and the Qwen3.5 one's MTP head (1.6 MB).
  EXPECT_LE(bytes, 26'000'000u) << "models/ must stay small enough to ship";
}

}  // namespace
}  // namespace pagoda
