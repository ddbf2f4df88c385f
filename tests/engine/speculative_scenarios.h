// The speculative-decoding scenarios, shared by the CPU test (speculative_decoding_test.cpp) and
// the CUDA one (speculative_decoding_gputest.cpp): the same requests with and without drafts must
// give the same greedy tokens and logprobs.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../model/reference_fixture.h"
#include "engine/engine.h"

// Its own namespace: prefix_caching_scenarios.h has a Knobs, RunOutput and run() of its own.
namespace pagoda::testing::spec {

struct Knobs {
  std::string device = "cpu";
  std::string dtype = "auto";   // float32 on the GPU: with and without drafts must match token for token
  int32_t k = 0;                 // 0 = no speculative decoding
  bool oracle = false;           // drafts from the reference run (with planted errors), else n-gram
  int32_t budget = 32;           // max_num_batched_tokens: prompts are prefilled in chunks
  int64_t num_blocks = 400;
  bool caching = true;
  int32_t max_num_seqs = 4;
  int32_t max_tokens = 20;
  double temperature = 0;
  int32_t top_k = 0;
  double top_p = 1.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  bool logit_bias = false;
  bool seeded = false;           // request i gets seed i
  int32_t max_model_len = 400;
  bool together = true;          // all requests queued at once, else each after the previous finished
  std::string draft_model;       // a fixture drafting for the target (method draft_model)
  bool mtp = false;              // the target's own MTP head drafts
  std::string eagle3;            // an EAGLE-3 head's directory drafts (method eagle3)
  bool adaptive = false;         // drafts per step chosen by the speculation controller
  EngineCore::DraftProposer proposer;  // when set: the drafts (overrides oracle)
  int32_t workers = 1;           // EngineConfig::replicated_workers (the executor's test double)
  int32_t tp = 1;                // EngineConfig::tensor_parallel_size
};

struct RunOutput {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> logprobs;
  EngineStats stats;
  int64_t preemptions = 0;
};

// Drafts from `reference` (the outputs of a run without drafts): the tokens the sequence will
// produce, each 5th one wrong, so that steps accept all, some or none of their drafts. Only
// even-numbered requests get drafts: the others decode plainly in the same batches.
inline EngineCore::DraftProposer oracle(const std::vector<std::vector<int32_t>>* reference, const std::map<int64_t, size_t>* index) {
  return [=](const Sequence& seq, int32_t k) {
    const size_t i = index->at(seq.id());
    std::vector<int32_t> drafts;
    if (i % 2 == 1) return drafts;
    const std::vector<int32_t>& ref = (*reference)[i];
    for (int32_t j = 0; j < k; ++j) {
      const auto m = static_cast<size_t>(seq.num_output_tokens() + j);
      if (m >= ref.size()) break;
      drafts.push_back(m % 5 == 3 ? (ref[m] + 1) % 512 : ref[m]);
    }
    return drafts;
  };
}

inline RunOutput run(const std::string& model, const std::vector<std::vector<int32_t>>& prompts, const Knobs& kn,
              const std::vector<std::vector<int32_t>>* reference = nullptr) {
  EngineConfig config;
  config.device = kn.device;
  config.dtype = kn.dtype;
  config.max_num_seqs = kn.max_num_seqs;
  config.max_num_batched_tokens = kn.budget;
  config.max_model_len = kn.max_model_len;
  config.num_gpu_blocks_override = kn.num_blocks;
  config.enable_prefix_caching = kn.caching;
  config.replicated_workers = kn.workers;
  config.tensor_parallel_size = kn.tp;
  if (kn.k > 0) {
    config.speculative.method = SpeculativeMethod::Ngram;
    config.speculative.num_speculative_tokens = kn.k;
    config.speculative.prompt_lookup_min = 1;
    config.speculative.prompt_lookup_max = 3;
    config.speculative.adaptive = kn.adaptive;
    if (kn.mtp) config.speculative.method = SpeculativeMethod::Mtp;
    if (!kn.eagle3.empty()) {
      config.speculative.method = SpeculativeMethod::Eagle3;
      config.speculative.model = kn.eagle3;
    }
    if (!kn.draft_model.empty()) {
      config.speculative.method = SpeculativeMethod::DraftModel;
      config.speculative.model = fixture_model_dir(kn.draft_model);
    }
  }
  Engine engine(fixture_model_dir(model), config);
  std::map<int64_t, size_t> index;
  if (kn.proposer) engine.core().set_draft_proposer_for_testing(kn.proposer);
  else if (kn.oracle) engine.core().set_draft_proposer_for_testing(oracle(reference, &index));
  RunOutput out;
  out.tokens.resize(prompts.size());
  out.logprobs.resize(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p;
    p.temperature = kn.temperature;
    p.top_k = kn.top_k;
    p.top_p = kn.top_p;
    p.repetition_penalty = kn.repetition_penalty;
    p.presence_penalty = kn.presence_penalty;
    if (kn.logit_bias)
      p.logit_bias = std::make_shared<const std::vector<std::pair<int32_t, float>>>(
          std::vector<std::pair<int32_t, float>>{{7, 2.5f}, {100, -3.0f}});
    if (kn.seeded) p.seed = i;
    p.ignore_eos = true;
    p.max_tokens = kn.max_tokens;
    if (kn.temperature == 0) p.logprobs = 0;
    index[engine.add_request(prompts[i], p)] = i;
    if (!kn.together || i + 1 == prompts.size())
      for (int steps = 0; engine.has_unfinished() && steps < 100000; ++steps)
        for (const RequestOutput& o : engine.step()) {
          const size_t r = index.at(o.id);
          out.tokens[r].insert(out.tokens[r].end(), o.new_token_ids.begin(), o.new_token_ids.end());
          for (const SampleResult& s : o.samples) out.logprobs[r].push_back(s.logprob);
        }
  }
  EXPECT_FALSE(engine.has_unfinished());
  out.stats = engine.core().stats();
  out.preemptions = engine.scheduler().num_preemptions();
  return out;
}

// Random prompts, and prompts that repeat a phrase (where n-gram lookup finds its drafts).
inline std::vector<std::vector<int32_t>> prompts() {
  std::mt19937 rng(77);
  std::vector<std::vector<int32_t>> out;
  for (size_t len : {5u, 17u, 40u, 70u}) out.push_back(random_tokens(rng, len));
  for (size_t phrase : {3u, 7u, 11u}) {
    const std::vector<int32_t> p = random_tokens(rng, phrase);
    std::vector<int32_t> prompt;
    for (int r = 0; r < 5; ++r) prompt.insert(prompt.end(), p.begin(), p.end());
    out.push_back(prompt);
  }
  // Two that share a 48-token prefix: prefix-cache hits during speculation.
  const std::vector<int32_t> shared = random_tokens(rng, 48);
  for (int r = 0; r < 2; ++r) {
    std::vector<int32_t> p = shared;
    const std::vector<int32_t> tail = random_tokens(rng, 9);
    p.insert(p.end(), tail.begin(), tail.end());
    out.push_back(p);
  }
  return out;
}

// The same prompts in a smaller vocabulary (fixtures of fewer than 512 tokens).
inline std::vector<std::vector<int32_t>> prompts_in(int64_t vocab) {
  std::vector<std::vector<int32_t>> out = prompts();
  for (auto& p : out)
    for (int32_t& t : p) t = static_cast<int32_t>(t % vocab);
  return out;
}

inline void expect_same(const RunOutput& with, const RunOutput& without) {
  ASSERT_EQ(with.tokens.size(), without.tokens.size());
  for (size_t i = 0; i < with.tokens.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(with.tokens[i], without.tokens[i]);
    ASSERT_EQ(with.logprobs[i].size(), without.logprobs[i].size());
    for (size_t t = 0; t < with.logprobs[i].size(); ++t)
      EXPECT_NEAR(with.logprobs[i][t], without.logprobs[i][t], 1e-3) << "token " << t;
  }
}

}  // namespace pagoda::testing::spec
