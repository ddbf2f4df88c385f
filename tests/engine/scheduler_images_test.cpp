// The scheduler with images (docs/vision.md): a step's image rows and multimodal rotary positions,
// rope positions shifted after an image, and vLLM's encoder budget (no step starts images of more
// merged tokens than max_num_batched_tokens, unless one image alone is larger).
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "engine/multimodal.h"
#include "engine/scheduler.h"

namespace pagoda {
namespace {

using Ints = std::vector<int32_t>;
constexpr int32_t kPad = 99;

SchedulerConfig config(int32_t budget) {
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = budget;
  c.max_model_len = 128;
  c.block_size = 4;
  c.num_kv_blocks = 128;
  c.eos_token_ids = {0};
  return c;
}

// An image of 1 x (2 rows) x (cols) patches: rows / 2 * cols / 2 merged tokens with merge 2.
std::shared_ptr<ImageInput> image(int32_t grid_h, int32_t grid_w, uint64_t hash) {
  auto img = std::make_shared<ImageInput>();
  img->grid_h = grid_h, img->grid_w = grid_w, img->num_tokens = grid_h * grid_w / 4, img->hash = hash;
  return img;
}

Sequence* add(Scheduler& s, int64_t id, const Ints& prompt, std::vector<std::shared_ptr<ImageInput>> images) {
  Sequence* seq = s.add(id, prompt, SamplingParams{});
  seq->set_mm(make_multimodal_prompt(prompt, std::move(images), kPad, 2));
  return seq;
}

int64_t image_tokens_started(const SchedulerOutput& o) {
  int64_t n = 0;
  for (const auto& r : o.batch.image_rows)
    if (r.first == 0) n += r.image->num_tokens;
  return n;
}

TEST(SchedulerImages, ImageRowsAndRotaryPositionsOfAStep) {
  Scheduler s(config(64));
  // text 5, 6; an image of 2 x 3 merged tokens; text 7, 8.
  const Ints prompt = {5, 6, kPad, kPad, kPad, kPad, kPad, kPad, 7, 8};
  Sequence* seq = add(s, 1, prompt, {image(4, 6, 11)});
  SchedulerOutput o = s.schedule();
  const StepBatch& b = o.batch;
  ASSERT_EQ(b.image_rows.size(), 1u);
  EXPECT_EQ(b.image_rows[0].row, 2);
  EXPECT_EQ(b.image_rows[0].first, 0);
  EXPECT_EQ(b.image_rows[0].count, 6);
  // get_rope_index: text 0, 1; the image (2, 2 + row, 2 + col); text from 2 + max(2, 3) = 5.
  EXPECT_EQ(b.positions, (Ints{0, 1, 2, 2, 2, 2, 2, 2, 5, 6}));
  EXPECT_EQ(b.mrope_positions, (Ints{0, 1, 2, 2, 2, 2, 2, 2, 5, 6,  //
                                     0, 1, 2, 2, 2, 3, 3, 3, 5, 6,  //
                                     0, 1, 2, 3, 4, 2, 3, 4, 5, 6}));
  s.update_from_output(o, Ints{42});
  // The generated token at index 10 sits at 10 - 3; a step without image tokens carries no rows.
  o = s.schedule();
  EXPECT_EQ(o.batch.positions, (Ints{7}));
  EXPECT_TRUE(o.batch.mrope_positions.empty());
  EXPECT_TRUE(o.batch.image_rows.empty());
  EXPECT_EQ(seq->rope_position(10), 7);
}

TEST(SchedulerImages, AChunkThatStartsInsideAnImageTakesItsLaterRows) {
  Scheduler s(config(6));  // 6 tokens a step: the image's 8 merged tokens span two steps
  const Ints prompt = {5, 6, 7, kPad, kPad, kPad, kPad, kPad, kPad, kPad, kPad, 8};
  add(s, 1, prompt, {image(4, 8, 12)});
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.batch.image_rows.size(), 1u);
  EXPECT_EQ(o.batch.image_rows[0].row, 3);
  EXPECT_EQ(o.batch.image_rows[0].first, 0);
  EXPECT_EQ(o.batch.image_rows[0].count, 3);
  s.update_from_output(o, Ints{});
  o = s.schedule();
  ASSERT_EQ(o.batch.image_rows.size(), 1u);
  EXPECT_EQ(o.batch.image_rows[0].row, 0);
  EXPECT_EQ(o.batch.image_rows[0].first, 3);
  EXPECT_EQ(o.batch.image_rows[0].count, 5);
}

TEST(SchedulerImages, NoStepStartsMoreImageTokensThanTheBudget) {
  Scheduler s(config(24));
  // Three requests, each text then an image of 16 merged tokens (8 x 8 patches): two images are
  // 32 > 24 tokens of encoder budget, so each step starts one.
  for (int64_t id = 1; id <= 3; ++id) {
    Ints prompt = {5, 6};
    prompt.insert(prompt.end(), 16, kPad);
    prompt.push_back(7);
    add(s, id, prompt, {image(8, 8, 100 + static_cast<uint64_t>(id))});
  }
  int started = 0;
  for (int step = 0; step < 20 && started < 3; ++step) {
    SchedulerOutput o = s.schedule();
    EXPECT_LE(image_tokens_started(o), 24) << "step " << step;
    started += static_cast<int>(image_tokens_started(o) / 16);
    s.update_from_output(o, Ints(o.sampling_seqs().size(), 42));
  }
  EXPECT_EQ(started, 3);
  // One image larger than the budget still goes (alone).
  Scheduler big(config(8));
  Ints prompt = {5};
  prompt.insert(prompt.end(), 16, kPad);
  add(big, 1, prompt, {image(8, 8, 7)});
  SchedulerOutput o = big.schedule();
  EXPECT_EQ(image_tokens_started(o), 16);
}

}  // namespace
}  // namespace pagoda
