// Images in, against transformers (docs/vision.md): the tiny multimodal Qwen3.5 fixture's vision
// tower output, and greedy tokens and last-prompt logits of prompts with 1-3 images through the engine
// (chunked prefill across images, a batch of them at once, the prefix cache keyed by image); the
// multimodal rotary positions against get_rope_index's rule worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/vision_encoder.h"
#include "../support/vulkan_device.h"
#include "vision_fixture.h"

namespace pagoda {
namespace {

using vision_test::Out;

TEST(VisionTower, MergedOutputEqualsTransformers) {
  auto be = make_backend("cpu", 2);
  vision_test::expect_tower_matches(*be, 1e-4);
}

TEST(VisionTower, RefusesAnImageOffTheMergeGrid) {
  auto be = make_backend("cpu", 1);
  const Checkpoint ckpt = Checkpoint::open_dir(vision_test::fixture_dir());
  std::unique_ptr<VisionEncoder> enc = load_vision_encoder(ckpt, *be);
  std::vector<float> pixels(static_cast<size_t>(3 * 4 * enc->patch_dim()), 0.5f);
  Buffer buf = be->alloc(64 * sizeof(float) * 4);
  Tensor out = buf.tensor(DType::F32, {3, enc->out_hidden()});
  EXPECT_THROW(enc->encode(1, 3, 4, pixels, out), Error);  // 3 rows of patches: not a multiple of 2
}

// get_rope_index (transformers' Qwen3_5Model) worked by hand: text 0, 1; an image of 1x4x6 patches
// (merge 2: 2 x 3 tokens) starts at 2 and takes (2, 2 + row, 2 + col); the text after it continues
// from 2 + max(2, 3) = 5; generated tokens then sit at index - 3.
TEST(MultimodalPrompt, PositionsFollowGetRopeIndex) {
  constexpr int32_t P = 99;
  const std::vector<int32_t> prompt = {5, 6, P, P, P, P, P, P, 7, 8};
  auto img = std::make_shared<ImageInput>();
  img->grid_t = 1, img->grid_h = 4, img->grid_w = 6, img->num_tokens = 6;
  const auto mm = make_multimodal_prompt(prompt, {img}, P, 2);
  const std::vector<int32_t> t = {0, 1, 2, 2, 2, 2, 2, 2, 5, 6};
  const std::vector<int32_t> h = {0, 1, 2, 2, 2, 3, 3, 3, 5, 6};
  const std::vector<int32_t> w = {0, 1, 2, 3, 4, 2, 3, 4, 5, 6};
  std::vector<int32_t> want = t;
  want.insert(want.end(), h.begin(), h.end());
  want.insert(want.end(), w.begin(), w.end());
  EXPECT_EQ(mm->positions, want);
  EXPECT_EQ(mm->rope_delta, -3);
  EXPECT_EQ(mm->images.at(0)->offset, 2);
  // The cache's view: text as it is, the image's tokens negative and distinct.
  for (size_t i : {0u, 1u, 8u, 9u}) EXPECT_EQ(mm->cache_tokens[i], prompt[i]);
  for (size_t i = 2; i < 8; ++i) EXPECT_LT(mm->cache_tokens[i], 0);
  EXPECT_NE(mm->cache_tokens[2], mm->cache_tokens[3]);

  auto other = std::make_shared<ImageInput>(*img);
  other->num_tokens = 4;  // its grid says 6
  EXPECT_THROW(make_multimodal_prompt(prompt, {other}, P, 2), Error);
  EXPECT_THROW(make_multimodal_prompt(prompt, {img, img}, P, 2), Error);  // one run, two images
  EXPECT_THROW(make_multimodal_prompt(prompt, {}, P, 2), Error);
}

TEST(VisionReference, TokensAndLogitsEqualTransformersOneAtATime) {
  Engine engine(vision_test::fixture_dir(), vision_test::engine_config("cpu", "auto"));
  const std::vector<Out> out = vision_test::run_cases(engine, {0, 1, 2, 3}, /*together=*/false);
  for (size_t i = 0; i < out.size(); ++i) vision_test::expect_reference(out[i], i, 2e-4);
}

TEST(VisionReference, ABatchOfImagePromptsGivesEachItsOwnTokens) {
  EngineConfig c = vision_test::engine_config("cpu", "auto");
  c.enable_prefix_caching = false;
  Engine engine(vision_test::fixture_dir(), c);
  const std::vector<Out> out = vision_test::run_cases(engine, {3, 2, 1, 0, 2}, /*together=*/true);
  const std::vector<size_t> which = {3, 2, 1, 0, 2};
  for (size_t k = 0; k < out.size(); ++k) vision_test::expect_reference(out[k], which[k], 2e-4);
}

// Vulkan (lavapipe in CI) has no shaders for the tower's primitives and no host-visible memory to
// run them on the CPU: a multimodal checkpoint is refused at load, naming the ops and the way out,
// and serves text with --limit-mm-per-prompt 0.
TEST(VisionReference, OnVulkanTheTowerIsRefusedByNameAndTextIsServed) {
  const std::string why = testing::vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  try {
    Engine engine(vision_test::fixture_dir(), vision_test::engine_config("vulkan", "float32"));
    ADD_FAILURE() << "the vision tower loaded on Vulkan";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("segment_attention"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--limit-mm-per-prompt"), std::string::npos) << e.what();
  }
  EngineConfig c = vision_test::engine_config("vulkan", "float32");
  c.multimodal.max_images_per_prompt = 0;
  Engine engine(vision_test::fixture_dir(), c);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 3;
  p.ignore_eos = true;
  engine.add_request({5, 6, 7}, p);
  int tokens = 0;
  for (int steps = 0; engine.has_unfinished() && steps < 100; ++steps)
    for (const RequestOutput& o : engine.step()) tokens += static_cast<int>(o.new_token_ids.size());
  EXPECT_EQ(tokens, 3);
}

// The same images and prompts over a Qwen3.5-MoE decoder (routed experts, the gated shared expert).
TEST(VisionReference, TheMoeDecoderGivesTransformersTokens) {
  auto be = make_backend("cpu", 2);
  vision_test::expect_tower_matches(*be, 1e-4, vision_test::kMoe);
  Engine engine(vision_test::fixture_dir(vision_test::kMoe), vision_test::engine_config("cpu", "auto"));
  const std::vector<Out> out = vision_test::run_cases(engine, {0, 1, 2, 3, 4, 5}, /*together=*/true, vision_test::kMoe);
  for (size_t i = 0; i < out.size(); ++i) vision_test::expect_reference(out[i], i, 2e-4, vision_test::kMoe);
}

// Tensor parallelism: every rank runs the (replicated) tower; the decoder's heads are split.
TEST(VisionReference, TwoTensorParallelRanksGiveTransformersTokens) {
  EngineConfig c = vision_test::engine_config("cpu", "auto");
  c.tensor_parallel_size = 2;
  Engine engine(vision_test::fixture_dir(), c);
  const std::vector<Out> out = vision_test::run_cases(engine, {0, 2, 3}, /*together=*/true);
  const std::vector<size_t> which = {0, 2, 3};
  for (size_t k = 0; k < out.size(); ++k) vision_test::expect_reference(out[k], which[k], 2e-4);
}

TEST(VisionReference, ImagesOffRefusesAnImageAndServesText) {
  EngineConfig c = vision_test::engine_config("cpu", "auto");
  c.multimodal.max_images_per_prompt = 0;
  Engine engine(vision_test::fixture_dir(), c);
  EXPECT_THROW(vision_test::run_cases(engine, {0}, false), Error);
}

// A text prefix, one image, text: the same image again reuses the blocks through the image; another
// image of the same grid reuses nothing past the text before it, and both give what they give with the
// cache off.
TEST(VisionReference, PrefixCacheIsKeyedByTheImage) {
  const vision_test::Pixels px;
  const nlohmann::json ref = vision_test::reference();
  const auto start = ref.at("config").at("vision_start_token_id").get<int32_t>();
  const auto end = ref.at("config").at("vision_end_token_id").get<int32_t>();
  const auto pad = ref.at("config").at("image_token_id").get<int32_t>();
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 20; ++i) prompt.push_back(10 + 7 * i);
  prompt.push_back(start);
  for (int i = 0; i < 6; ++i) prompt.push_back(pad);  // image 0: 1x4x6 patches, 6 tokens
  prompt.push_back(end);
  for (int32_t i = 0; i < 22; ++i) prompt.push_back(300 - 5 * i);
  ASSERT_EQ(prompt.size(), 50u);  // three full blocks of 16, the image in the second
  const auto same = vision_test::image_input(px, 0);
  auto other = std::make_shared<ImageInput>(*same);
  for (float& v : other->pixel_values) v = -v;
  other->hash = image_hash(other->grid_t, other->grid_h, other->grid_w, other->pixel_values);
  ASSERT_NE(other->hash, same->hash);

  auto run = [&](Engine& engine, const std::shared_ptr<ImageInput>& img) {
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = 8;
    p.images = {std::make_shared<ImageInput>(*img)};
    const int64_t id = engine.add_request(prompt, p);
    Out o;
    for (int steps = 0; engine.has_unfinished() && steps < 1000; ++steps)
      for (const RequestOutput& r : engine.step())
        if (r.id == id) {
          o.tokens.insert(o.tokens.end(), r.new_token_ids.begin(), r.new_token_ids.end());
          if (r.finished) o.cached = r.num_cached_tokens;
        }
    return o;
  };
  EngineConfig off = vision_test::engine_config("cpu", "auto");
  off.enable_prefix_caching = false;
  Engine plain(vision_test::fixture_dir(), off);
  const Out want_same = run(plain, same), want_other = run(plain, other);
  ASSERT_NE(want_same.tokens, want_other.tokens) << "the two images should lead to different text";

  Engine cached(vision_test::fixture_dir(), vision_test::engine_config("cpu", "auto"));
  const Out first = run(cached, same);
  EXPECT_EQ(first.tokens, want_same.tokens);
  const Out again = run(cached, same);
  EXPECT_EQ(again.tokens, want_same.tokens);
  EXPECT_EQ(again.cached, 48) << "every full block (through the image) comes from the cache";
  const Out swapped = run(cached, other);
  EXPECT_EQ(swapped.tokens, want_other.tokens);
  // The hybrid model resumes only where a state snapshot was left; never past the image's start.
  EXPECT_LE(swapped.cached, 16) << "a block holding another image was taken from the cache";
}

}  // namespace
}  // namespace pagoda
