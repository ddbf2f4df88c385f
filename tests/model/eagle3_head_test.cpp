// EAGLE-3 draft heads (model/eagle3_head.h) against the reference of tools/make_eagle3_fixtures.py
// (tests/fixtures/eagle3/<head>/reference.json): an fp32 torch head written from vLLM's
// llama_eagle3.py, fed the target's residual stream taken from transformers — or, until that is
// made on the GPU machine, the tool's float64 standard-library stand-in (its made_by says which). For every prompt: the target's
// aux hidden states and greedy next token, the head's first-pass logits at every prompt position
// (in one pass and in chunks of 7, as a chunked prefill feeds it) and its greedy drafts in target
// ids. And the refusals: a head for another target, with a tensor missing, d2t outside the vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "backend/backend.h"
#include "core/error.h"
#include "eagle3_fixture.h"
#include "eagle3_reference_check.h"
#include "io/model_config.h"
#include "model/eagle3_head.h"
#include "model/model.h"
#include "reference_fixture.h"

namespace pagoda {
namespace {

using testing::eagle3_fixture_dir;
using testing::fixture_model_dir;

class Eagle3Reference : public ::testing::TestWithParam<std::string> {};

TEST_P(Eagle3Reference, AuxStatesFirstPassLogitsAndDraftsMatchTheTorchHead) {
  std::string why;
  if (testing::eagle3_reference_missing(GetParam(), &why)) GTEST_SKIP() << why;
  testing::expect_eagle3_reference(GetParam(), "cpu", "auto", 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Eagle3Reference, ::testing::Values("qwen3-gqa4-eagle3", "llama3-untied-eagle3"),
                         testing::FixtureParamName());

// The committed heads load whatever their reference says (they exist before reference.json does).
TEST(Eagle3Head, TheCommittedHeadsLoadWithTheirLayersAndDraftVocabularies) {
  auto backend = make_backend("cpu");
  struct Case {
    const char* head;
    const char* target;
    std::vector<int> aux;
    int64_t draft_vocab;
  };
  for (const Case& c : {Case{"qwen3-gqa4-eagle3", "qwen3-tiny-untied-gqa4", {0, 1, 2}, 64},
                        Case{"llama3-untied-eagle3", "llama3-tiny-untied", {0, 2, 3}, 96}}) {
    SCOPED_TRACE(c.head);
    auto target = load_model(fixture_model_dir(c.target), *backend);
    const Eagle3Head head = load_eagle3_head(eagle3_fixture_dir(c.head), *target, *backend);
    EXPECT_EQ(head.aux_layers, c.aux);
    EXPECT_EQ(head.model->config().vocab_size, c.draft_vocab);
    ASSERT_EQ(static_cast<int64_t>(head.draft_to_target.size()), c.draft_vocab);
    // Sorted target ids with 0, 1, 2 first, as the tool makes them: a non-trivial d2t.
    EXPECT_EQ(head.draft_to_target[2], 2);
    EXPECT_GT(head.draft_to_target.back(), c.draft_vocab);
    EXPECT_TRUE(std::is_sorted(head.draft_to_target.begin(), head.draft_to_target.end()));
  }
}

// A config.json as the published Qwen3-8B heads write theirs (transformers 4 keys, rope_scaling
// null, explicit head_dim, token ids, an integer rope_theta) loads; the weights are a committed head's.
TEST(Eagle3Head, APublishedStyleConfigLoads) {
  io_test::TempDir dir;
  const std::string src = eagle3_fixture_dir("qwen3-gqa4-eagle3");
  std::filesystem::copy_file(src + "/model.safetensors", dir.file("model.safetensors"));
  io_test::write_file(dir.file("config.json"), R"({
    "architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 24,
    "hidden_act": "silu", "hidden_size": 96, "initializer_range": 0.02, "intermediate_size": 160,
    "max_position_embeddings": 40960, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 1,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000,
    "tie_word_embeddings": false, "torch_dtype": "float32", "transformers_version": "4.51.0", "use_cache": true,
    "vocab_size": 256, "draft_vocab_size": 64})");
  auto backend = make_backend("cpu");
  auto target = load_model(fixture_model_dir("qwen3-tiny-untied-gqa4"), *backend);
  const Eagle3Head head = load_eagle3_head(dir.path(), *target, *backend);
  EXPECT_EQ(head.aux_layers, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(head.model->config().head_dim, 24);
  EXPECT_EQ(head.model->config().rope_theta, 10000.0);
}

// ---- refusals ----------------------------------------------------------------------------------

std::string load_error(const std::string& target_name, const testing::RandomEagle3Head& o) {
  io_test::TempDir dir;
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(fixture_model_dir(target_name));
  testing::write_random_eagle3_head(dir.path(), cfg, o);
  auto target = load_model(fixture_model_dir(target_name), *backend);
  return io_test::error_of([&] {
    const Eagle3Head head = load_eagle3_head(dir.path(), *target, *backend);
    target->set_aux_hidden_layers(head.aux_layers);
  });
}

TEST(Eagle3Head, AHeadWhoseFcDoesNotReadThreeTargetLayersIsRefused) {
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.fc_cols = 3 * 64 + 8;  // qwen3-tiny-tied: hidden 64
  const std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "EAGLE-3 head in ")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "tensor 'fc.weight' is [64, 200], expected [64, 192]")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "the head was trained for another target")) << msg;
}

TEST(Eagle3Head, AMissingTensorIsNamed) {
  for (const char* name : {"midlayer.hidden_norm.weight", "lm_head.weight", "fc.weight"}) {
    testing::RandomEagle3Head o;
    o.aux_ids = {0, 1, 2};
    o.drop = name;
    const std::string msg = load_error("qwen3-tiny-tied", o);
    EXPECT_TRUE(io_test::contains(msg, std::string("has no tensor '") + name + "'")) << msg;
    EXPECT_TRUE(io_test::contains(msg, "is it an EAGLE-3 checkpoint?")) << msg;
  }
}

TEST(Eagle3Head, ANarrowerHeadWithoutItsOwnEmbeddingIsRefused) {
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.hidden = 48;  // the target's embedding rows are 64 wide
  o.drop = "embed_tokens.weight";
  const std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "has no embed_tokens.weight, so it shares the target's embedding, but its "
                                     "hidden size 48 differs from the target's (64)")) << msg;
}

TEST(Eagle3Head, D2tOutsideTheVocabularyIsRefused) {
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.bad_d2t = 5;
  const std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "tensor 'd2t' maps draft token 5 to target token")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "outside the target's vocabulary [0, 512)")) << msg;
  // Without d2t a draft vocabulary smaller than the target's cannot be mapped.
  o.bad_d2t = -1;
  o.drop = "d2t";
  EXPECT_TRUE(io_test::contains(load_error("qwen3-tiny-tied", o), "has no tensor 'd2t' but its draft_vocab_size"));
}

TEST(Eagle3Head, AHeadForAnotherTargetOrLayersTheTargetLacksIsRefused) {
  testing::RandomEagle3Head o;
  // The default layers (2, 1, -1) of a 2-layer target: -1 is not a layer.
  EXPECT_TRUE(io_test::contains(load_error("qwen3-tiny-tied", o), "reads the target's layers [-1, 1, 2]"));
  o.aux_ids = {0, 1, 5};
  const std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "but the target has 2 layers (ids 0..2)")) << msg;
  // A head made for a target of another hidden size or vocabulary.
  io_test::TempDir dir;
  auto backend = make_backend("cpu");
  o.aux_ids = {0, 1, 2};
  testing::write_random_eagle3_head(dir.path(), load_model_config(fixture_model_dir("qwen3-tiny-tied")), o);
  auto other = load_model(fixture_model_dir("qwen3-tiny-untied-gqa4"), *backend);  // hidden 96, vocab 256
  const std::string vocab = io_test::error_of([&] { load_eagle3_head(dir.path(), *other, *backend); });
  EXPECT_TRUE(io_test::contains(vocab, "was made for a vocabulary of 512 tokens")) << vocab;
}

TEST(Eagle3Head, AnEagle1HeadOrAnotherModelIsRefusedByName) {
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.architecture = "EagleLlamaForCausalLM";
  std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "is an EAGLE-1 head (EagleLlamaForCausalLM)")) << msg;
  o.architecture = "LlamaForCausalLM";
  msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "is not an EAGLE-3 head")) << msg;
}

TEST(Eagle3Head, AHybridTargetSaysItCannotExportAuxStates) {
  auto backend = make_backend("cpu");
  auto target = load_model(fixture_model_dir("qwen3_5-tiny-text"), *backend);
  const std::string msg = io_test::error_of([&] { target->set_aux_hidden_layers({0, 1, 2}); });
  EXPECT_TRUE(io_test::contains(msg, "pagoda exports them from dense decoders")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "Qwen3_5ForCausalLM")) << msg;
}

}  // namespace
}  // namespace pagoda
