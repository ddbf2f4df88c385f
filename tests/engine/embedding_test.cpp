// Embedding requests through the Engine: the final-norm hidden state of the last prompt token,
// against an independent float64 reference (tests/fixtures/embeddings, tools/embedding_reference.py);
// chunked prefill, batching with generation requests and preemption leave it unchanged, and no KV
// block is kept afterwards.
#include <gtest/gtest.h>

#include <map>

#include "../support/embedding_fixture.h"
#include "../support/engine_driver.h"
#include "core/error.h"
#include "engine/engine.h"
#include "server/pooling_runner.h"

namespace pagoda {
namespace {

using testing::compare_vectors;
using testing::EmbeddingCase;
using testing::load_embedding_cases;

const char* kModel = "qwen3-tiny-tied";

EngineConfig config(int32_t batched_tokens) {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = batched_tokens;
  c.max_model_len = 512;
  c.kv_cache_memory_bytes = 8 << 20;
  return c;
}

// Adds every case (and `generate` greedy requests alongside), steps until all finish; returns the
// normalised embeddings in case order and the generated tokens.
struct EmbedRun {
  std::vector<std::vector<float>> embeddings;
  std::vector<RequestOutput> finals;
  std::vector<std::vector<int32_t>> generated;
};

EmbedRun run(Engine& engine, const std::vector<EmbeddingCase>& cases, const std::vector<std::vector<int32_t>>& generate = {}) {
  std::map<int64_t, size_t> emb, gen;
  EmbedRun r;
  r.embeddings.resize(cases.size());
  r.finals.resize(cases.size());
  r.generated.resize(generate.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    emb[engine.add_embedding_request(cases[i].token_ids)] = i;
    if (i < generate.size()) gen[engine.add_request(generate[i], testing::greedy(12))] = i;
  }
  for (int steps = 0; engine.has_unfinished(); ++steps) {
    if (steps > 10000) {
      ADD_FAILURE() << "the engine does not finish";
      break;
    }
    for (RequestOutput& o : engine.step()) {
      if (gen.count(o.id)) {
        auto& t = r.generated[gen[o.id]];
        t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        continue;
      }
      const size_t i = emb.at(o.id);
      EXPECT_TRUE(o.new_token_ids.empty()) << cases[i].name << ": an embedding request sampled a token";
      if (!o.embedding.empty()) r.embeddings[i] = server::embedding_head(o.embedding, 0, true);
      if (o.finished) r.finals[i] = o;
    }
  }
  return r;
}

void expect_reference(const EmbedRun& r, const std::vector<EmbeddingCase>& cases, const std::string& how) {
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(r.finals[i].finished) << how << " " << cases[i].name;
    EXPECT_EQ(r.finals[i].finish_reason, FinishReason::Stop) << how << " " << cases[i].name;
    EXPECT_EQ(r.finals[i].num_prompt_tokens, static_cast<int32_t>(cases[i].token_ids.size()));
    const auto m = compare_vectors(r.embeddings[i], cases[i].embedding);
    EXPECT_TRUE(m.ok()) << how << " " << cases[i].name << ": cosine " << m.cosine << ", max abs diff "
                        << m.max_abs_diff;
  }
}

TEST(EngineEmbedding, LastTokenHiddenStateMatchesReference) {
  const auto cases = load_embedding_cases();
  ASSERT_GE(cases.size(), 4u);
  Engine engine(testing::fixture_model_dir(kModel), config(2048));
  const EmbedRun r = run(engine, cases);
  expect_reference(r, cases, "one-shot");
  // Nothing is kept once they finish.
  EXPECT_EQ(engine.scheduler().kv().num_free_blocks(), engine.memory_plan().num_blocks);
  EXPECT_FALSE(engine.has_unfinished());
}

TEST(EngineEmbedding, MatryoshkaTruncationMatchesReference) {
  const auto cases = load_embedding_cases();
  Engine engine(testing::fixture_model_dir(kModel), config(2048));
  std::map<int64_t, size_t> ids;
  for (size_t i = 0; i < cases.size(); ++i) ids[engine.add_embedding_request(cases[i].token_ids)] = i;
  while (engine.has_unfinished())
    for (RequestOutput& o : engine.step()) {
      const EmbeddingCase& c = cases[ids.at(o.id)];
      for (const auto& [d, want] : c.dimensions) {
        const auto m = compare_vectors(server::embedding_head(o.embedding, d, true), want);
        EXPECT_TRUE(m.ok()) << c.name << " dimensions " << d << ": cosine " << m.cosine << ", max abs diff "
                            << m.max_abs_diff;
      }
    }
}

TEST(EngineEmbedding, ChunkedAndBatchedWithGenerationGiveTheSameVectors) {
  const auto cases = load_embedding_cases();
  // Generation requests alone first: their tokens must not change when embeddings share the steps.
  std::vector<std::vector<int32_t>> prompts = {{5, 6, 7, 8, 9}, {300, 200, 100}, {42}};
  std::vector<std::vector<int32_t>> alone;
  {
    Engine engine(testing::fixture_model_dir(kModel), config(2048));
    for (const auto& p : prompts) {
      const int64_t id = engine.add_request(p, testing::greedy(12));
      std::vector<int32_t> toks;
      while (engine.has_unfinished())
        for (const RequestOutput& o : engine.step())
          if (o.id == id) toks.insert(toks.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      alone.push_back(toks);
    }
  }
  Engine engine(testing::fixture_model_dir(kModel), config(24));  // the 155-token case takes 7+ steps
  const EmbedRun r = run(engine, cases, prompts);
  expect_reference(r, cases, "chunked, mixed");
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(r.generated[i], alone[i]) << "generation " << i;
  EXPECT_EQ(engine.scheduler().kv().num_free_blocks(), engine.memory_plan().num_blocks);
}

TEST(EngineEmbedding, PreemptedEmbeddingIsRecomputed) {
  const auto cases = load_embedding_cases();
  const EmbeddingCase* longest = &cases[0];
  for (const auto& c : cases)
    if (c.token_ids.size() > longest->token_ids.size()) longest = &c;
  ASSERT_GT(longest->token_ids.size(), 128u);
  EngineConfig c = config(32);  // the embedding prefills over several steps
  c.max_model_len = 200;
  c.num_gpu_blocks_override = 14;  // 224 token slots
  c.block_size = 16;
  Engine engine(testing::fixture_model_dir(kModel), c);
  // Two older generations grow to 100 tokens (7 blocks each): as they decode they take the blocks of
  // the younger embedding, which is preempted mid-prefill and recomputed later.
  for (int g = 0; g < 2; ++g) engine.add_request(std::vector<int32_t>(40, 11 + g), testing::greedy(60));
  const int64_t id = engine.add_embedding_request(longest->token_ids);
  std::vector<float> embedding;
  int32_t preemptions = 0;
  while (engine.has_unfinished()) {
    for (RequestOutput& o : engine.step())
      if (o.id == id && !o.embedding.empty()) embedding = server::embedding_head(o.embedding, 0, true);
    if (const Sequence* s = engine.scheduler().find(id)) preemptions = std::max(preemptions, s->num_preemptions);
  }
  EXPECT_GT(preemptions, 0) << "the test did not preempt the embedding request";
  const auto m = compare_vectors(embedding, longest->embedding);
  EXPECT_TRUE(m.ok()) << "cosine " << m.cosine << ", max abs diff " << m.max_abs_diff;
  EXPECT_EQ(engine.scheduler().kv().num_free_blocks(), 14);
}

TEST(EngineEmbedding, RejectsIdsOutsideTheVocabulary) {
  Engine engine(testing::fixture_model_dir(kModel), config(2048));
  EXPECT_THROW(engine.add_embedding_request({1, 512}), Error);
  EXPECT_THROW(engine.add_embedding_request({}), Error);
}

}  // namespace
}  // namespace pagoda
