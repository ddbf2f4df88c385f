// The EAGLE-3 reference check shared by the CPU test (eagle3_head_test.cpp) and the CUDA one
// (eagle3_head_gputest.cpp): a committed head (tests/fixtures/eagle3/<name>) and its target against
// reference.json of tools/make_eagle3_fixtures.py — the target's aux hidden states at the last prompt
// position and its greedy next token, the head's first-pass logits at every prompt position (in one
// pass and in chunks of 7, as a chunked prefill feeds it) and its greedy drafts in target ids.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "eagle3_fixture.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "model/eagle3_head.h"
#include "model/model.h"
#include "single_sequence.h"

namespace pagoda::testing {

// Whether the head's reference exists (it is made on the GPU machine); the message of a skip when not.
inline bool eagle3_reference_missing(const std::string& name, std::string* why) {
  if (std::filesystem::exists(eagle3_fixture_dir(name) + "/reference.json")) return false;
  *why = "tests/fixtures/eagle3/" + name +
         "/reference.json is missing: make it on the GPU machine with "
         "python3 tools/make_eagle3_fixtures.py --out tests/fixtures/eagle3 (tools/device/make_eagle3_fixtures.sh)";
  return true;
}

namespace eagle3_detail {
inline constexpr int32_t kBlockSize = 16, kMaxLen = 64, kNumBlocks = kMaxLen / kBlockSize + 1;

inline std::vector<float> to_host(Backend& be, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  be.copy_to_host(out.data(), t.data, out.size() * sizeof(float));
  return out;
}

// Worst |a - b| relative to max(1, |b|).
inline float worst_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0f, std::abs(b[i])));
  return worst;
}
}  // namespace eagle3_detail

// `tol`: the worst |got - want| / max(1, |want|) allowed for logits and aux states.
inline void expect_eagle3_reference(const std::string& name, const std::string& device, const std::string& dtype,
                                    float tol) {
  using namespace eagle3_detail;

  const std::string dir = eagle3_fixture_dir(name);
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::string target_dir = std::string(PAGODA_SOURCE_DIR) + "/" + ref.at("target").get<std::string>();
  auto backend = make_backend(device, 0, dtype);
  const ModelConfig cfg = load_model_config(target_dir);
  const Checkpoint ckpt = Checkpoint::open_dir(target_dir);
  auto target = load_model(cfg, ckpt, *backend);
  Eagle3Head head = load_eagle3_head(dir, *target, *backend);
  EXPECT_EQ(head.aux_layers, ref.at("aux_layer_ids").get<std::vector<int>>());
  target->set_aux_hidden_layers(head.aux_layers);
  const ModelConfig& hc = head.model->config();
  const KvCacheShape target_shape{static_cast<int32_t>(cfg.num_layers), kNumBlocks, kBlockSize,
                                  static_cast<int32_t>(cfg.num_kv_heads), static_cast<int32_t>(cfg.head_dim),
                                  DType::F32};
  const KvCacheShape head_shape{1, kNumBlocks, kBlockSize, static_cast<int32_t>(hc.num_kv_heads),
                                static_cast<int32_t>(hc.head_dim), DType::F32};
  const int64_t Vd = hc.vocab_size;
  ASSERT_GE(ref.at("cases").size(), 3u);
  for (const auto& c : ref.at("cases")) {
    const auto prompt = c.at("prompt").get<std::vector<int32_t>>();
    const auto expected = c.at("first_pass_logits").get<std::vector<std::vector<float>>>();
    const auto n = static_cast<int32_t>(prompt.size());
    const int32_t next = c.at("target_next").get<int32_t>();
    std::vector<int32_t> fed(prompt.begin() + 1, prompt.end());
    fed.push_back(next);
    for (int32_t chunk : {n, 7}) {
      SCOPED_TRACE("prompt of " + std::to_string(n) + " tokens, chunks of " + std::to_string(chunk));
      PagedKvCache kv(*backend, target_shape), head_kv(*backend, head_shape);
      ModelRunner runner(*backend, *target, kMaxLen, 1, kNumBlocks);
      ModelRunner head_runner(*backend, *head.model, kMaxLen, 1, kNumBlocks, kMaxLen);
      SingleSequence seq{kBlockSize, std::vector<int32_t>(kNumBlocks), 0};
      std::iota(seq.blocks.rbegin(), seq.blocks.rend(), 0);  // blocks in reverse order
      SingleSequence head_seq = seq;
      std::vector<std::vector<float>> got;
      int32_t len = 0;
      for (int32_t at = 0; at < n; at += chunk) {
        len = std::min(chunk, n - at);
        // The target over positions [at, at + len); the head over the same positions, fed the
        // token after each and the target's aux states of each (rows 0..len-1 of that pass).
        const std::vector<float>& logits = runner.execute(seq.step({prompt.begin() + at, prompt.begin() + at + len}), kv);
        if (at + len == n) {
          EXPECT_EQ(argmax(logits), next) << "the target's greedy token after the prompt";
          const auto aux_ref = c.at("aux_hidden_last").get<std::vector<std::vector<float>>>();
          const std::vector<Tensor> aux = target->aux_hidden(len);
          ASSERT_EQ(aux.size(), aux_ref.size());
          for (size_t a = 0; a < aux.size(); ++a)
            EXPECT_LT(worst_diff(to_host(*backend, aux[a].rows(len - 1, len)), aux_ref[a]), tol)
                << "aux layer " << head.aux_layers[a];
        }
        StepBatch b = head_seq.step({fed.begin() + at, fed.begin() + at + len});
        b.hidden_rows.resize(static_cast<size_t>(len));
        std::iota(b.hidden_rows.begin(), b.hidden_rows.end(), 0);
        b.logits_rows = b.hidden_rows;
        head.model->set_aux_hidden_input(target->aux_hidden(len));
        const std::vector<float>& hl = head_runner.execute(b, head_kv);
        for (int32_t r = 0; r < len; ++r)
          got.emplace_back(hl.begin() + static_cast<std::ptrdiff_t>(r) * Vd,
                           hl.begin() + static_cast<std::ptrdiff_t>(r + 1) * Vd);
      }
      ASSERT_EQ(got.size(), expected.size());
      for (size_t t = 0; t < got.size(); ++t) {
        ASSERT_EQ(got[t].size(), expected[t].size());
        EXPECT_LT(worst_diff(got[t], expected[t]), tol) << "position " << t;
        EXPECT_EQ(argmax(got[t]), c.at("first_pass_argmax")[t].get<int32_t>()) << "position " << t;
      }
      // The drafts: the last row's argmax, then passes fed each draft (a target id) and the head's
      // own pre-norm state of the row before, at the positions after the prompt.
      std::vector<int32_t> ids, tokens;
      int32_t d = argmax(got.back());
      int32_t prev_rows = len, prev_row = len - 1;
      const auto k = c.at("draft_tokens").size();
      for (size_t j = 0; j < k; ++j) {
        ids.push_back(d);
        tokens.push_back(head.draft_to_target[static_cast<size_t>(d)]);
        if (j + 1 == k) break;
        StepBatch b = head_seq.step({tokens.back()});
        b.hidden_rows = {prev_row};
        head.model->set_hidden_input(head.model->draft_hidden_rows(prev_rows));
        d = argmax(head_runner.execute(b, head_kv));
        prev_rows = 1;
        prev_row = 0;
      }
      EXPECT_EQ(ids, c.at("draft_ids").get<std::vector<int32_t>>());
      EXPECT_EQ(tokens, c.at("draft_tokens").get<std::vector<int32_t>>());
    }
  }
}

// The head's greedy chain computed directly (runners, no scheduler or proposer): the target's
// greedy token after `prompt`, then `k` drafts in target ids. What the engine's proposer must draft
// after prefilling `prompt` (eagle3_speculative_test.cpp).
inline std::vector<int32_t> eagle3_direct_drafts(const std::string& target_dir, const std::string& head_dir,
                                                 const std::vector<int32_t>& prompt, int32_t k) {
  using namespace eagle3_detail;
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(target_dir);
  auto target = load_model(cfg, Checkpoint::open_dir(target_dir), *backend);
  Eagle3Head head = load_eagle3_head(head_dir, *target, *backend);
  target->set_aux_hidden_layers(head.aux_layers);
  const ModelConfig& hc = head.model->config();
  const auto n = static_cast<int32_t>(prompt.size());
  const int32_t blocks = (n + k + kBlockSize) / kBlockSize + 1;
  PagedKvCache kv(*backend, {static_cast<int32_t>(cfg.num_layers), blocks, kBlockSize,
                             static_cast<int32_t>(cfg.num_kv_heads), static_cast<int32_t>(cfg.head_dim), DType::F32});
  PagedKvCache head_kv(*backend, {1, blocks, kBlockSize, static_cast<int32_t>(hc.num_kv_heads),
                                  static_cast<int32_t>(hc.head_dim), DType::F32});
  ModelRunner runner(*backend, *target, n, 1, blocks);
  ModelRunner head_runner(*backend, *head.model, n, 1, blocks, n);
  SingleSequence seq{kBlockSize, std::vector<int32_t>(static_cast<size_t>(blocks)), 0};
  std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
  SingleSequence head_seq = seq;
  std::vector<int32_t> out = {argmax(runner.execute(seq.step(prompt), kv))};
  std::vector<int32_t> fed(prompt.begin() + 1, prompt.end());
  fed.push_back(out[0]);
  StepBatch b = head_seq.step(fed);
  b.hidden_rows.resize(static_cast<size_t>(n));
  std::iota(b.hidden_rows.begin(), b.hidden_rows.end(), 0);
  b.logits_rows = {n - 1};
  head.model->set_aux_hidden_input(target->aux_hidden(n));
  int32_t d = argmax(head_runner.execute(b, head_kv));
  for (int32_t j = 0; j < k; ++j) {
    out.push_back(head.draft_to_target[static_cast<size_t>(d)]);
    if (j + 1 == k) break;
    StepBatch next = head_seq.step({out.back()});
    next.hidden_rows = {0};
    head.model->set_hidden_input(head.model->draft_hidden_rows(1));
    d = argmax(head_runner.execute(next, head_kv));
  }
  return out;
}

}  // namespace pagoda::testing
