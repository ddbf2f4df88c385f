#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

#include "core/error.h"

namespace pagoda {
namespace {

using Ints = std::vector<int32_t>;

SchedulerConfig small_config() {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_kv_blocks = 64;
  c.eos_token_ids = {0};
  return c;
}

Ints iota_tokens(int n, int first) {
  Ints v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Slot of position p in `seq`'s block table, as docs/design.md §4 defines it.
int32_t slot_of(const Scheduler& s, int64_t seq, int32_t p) {
  const auto& t = s.kv().block_table(seq);
  const int32_t bs = s.config().block_size;
  return t.at(static_cast<size_t>(p / bs)) * bs + p % bs;
}

// Completes a step, sampling `token` for every sequence that samples.
void finish_step(Scheduler& s, const SchedulerOutput& out, int32_t token = 7) {
  const Ints sampled(out.sampling_seqs().size(), token);
  s.update_from_output(out, sampled);
}

TEST(Scheduler, DecodesComeBeforePrefills) {
  Scheduler s(small_config());
  Sequence* a = s.add(1, iota_tokens(5, 10), SamplingParams{});
  SchedulerOutput o1 = s.schedule();
  ASSERT_EQ(o1.scheduled.size(), 1u);
  EXPECT_EQ(o1.num_decodes, 0);
  EXPECT_TRUE(o1.scheduled[0].samples);
  s.update_from_output(o1, Ints{100});
  EXPECT_EQ(a->num_computed_tokens, 5);
  EXPECT_EQ(a->num_tokens(), 6);

  s.add(2, iota_tokens(6, 20), SamplingParams{});
  SchedulerOutput o2 = s.schedule();
  ASSERT_EQ(o2.scheduled.size(), 2u);
  EXPECT_EQ(o2.num_decodes, 1);
  EXPECT_EQ(o2.scheduled[0].seq->id(), 1);
  EXPECT_EQ(o2.scheduled[1].seq->id(), 2);
  const StepBatch& b = o2.batch;
  EXPECT_EQ(b.token_ids, (Ints{100, 20, 21, 22, 23, 24, 25}));
  EXPECT_EQ(b.positions, (Ints{5, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(b.cu_seqlens_q, (Ints{0, 1, 7}));
  EXPECT_EQ(b.seq_lens, (Ints{6, 6}));
  EXPECT_EQ(b.logits_rows, (Ints{0, 6}));
  EXPECT_EQ(b.has_initial_state, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(b.state_slots, (Ints{-1, -1}));
  EXPECT_EQ(b.max_blocks_per_seq, 2);
  Ints expect_slots{slot_of(s, 1, 5)};
  for (int p = 0; p < 6; ++p) expect_slots.push_back(slot_of(s, 2, p));
  EXPECT_EQ(b.slot_mapping, expect_slots);
  finish_step(s, o2);
}

TEST(Scheduler, LongPromptIsChunkedAcrossSteps) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 8;
  Scheduler s(c);
  const Ints prompt = iota_tokens(20, 100);
  s.add(1, prompt, SamplingParams{});
  s.add(2, iota_tokens(3, 200), SamplingParams{});  // must wait behind the long one (FIFO)

  const int starts[] = {0, 8, 16};
  const int lens[] = {8, 8, 4};
  for (int step = 0; step < 3; ++step) {
    SchedulerOutput o = s.schedule();
    const StepBatch& b = o.batch;
    ASSERT_GE(o.scheduled.size(), 1u);
    EXPECT_LE(b.num_tokens(), 8);
    const ScheduledSequence& first = o.scheduled[0];
    EXPECT_EQ(first.seq->id(), 1);
    EXPECT_EQ(first.start, starts[step]);
    EXPECT_EQ(first.num_new_tokens, lens[step]);
    EXPECT_EQ(b.cu_seqlens_q[0], 0);
    EXPECT_EQ(b.cu_seqlens_q[1], lens[step]);
    EXPECT_EQ(b.seq_lens[0], starts[step] + lens[step]);
    EXPECT_EQ(b.has_initial_state[0], step > 0 ? 1 : 0);
    // 4-token blocks: the table covers the context after this step.
    EXPECT_EQ(static_cast<int>(s.kv().block_table(1).size()), (starts[step] + lens[step] + 3) / 4);
    for (int i = 0; i < lens[step]; ++i) {
      const int p = starts[step] + i;
      EXPECT_EQ(b.token_ids[static_cast<size_t>(i)], prompt[static_cast<size_t>(p)]);
      EXPECT_EQ(b.positions[static_cast<size_t>(i)], p);
      EXPECT_EQ(b.slot_mapping[static_cast<size_t>(i)], slot_of(s, 1, p));
    }
    for (int j = 0; j < b.max_blocks_per_seq; ++j) {
      const auto& t = s.kv().block_table(1);
      const int32_t expect = j < static_cast<int>(t.size()) ? t[static_cast<size_t>(j)] : 0;
      EXPECT_EQ(b.block_tables[static_cast<size_t>(j)], expect);
    }
    if (step < 2) {
      EXPECT_EQ(o.scheduled.size(), 1u);  // budget used up: seq 2 waits
      EXPECT_FALSE(first.samples);
      EXPECT_TRUE(b.logits_rows.empty());
      EXPECT_EQ(s.num_waiting(), 1);
    } else {
      // The last chunk samples; seq 2 fits in the 4 tokens left.
      ASSERT_EQ(o.scheduled.size(), 2u);
      EXPECT_TRUE(first.samples);
      EXPECT_EQ(o.scheduled[1].seq->id(), 2);
      EXPECT_EQ(b.cu_seqlens_q, (Ints{0, 4, 7}));
      EXPECT_EQ(b.seq_lens, (Ints{20, 3}));
      EXPECT_EQ(b.logits_rows, (Ints{3, 6}));
      EXPECT_EQ(b.max_blocks_per_seq, 5);
      // seq 2's row is padded with zeros past its one block.
      EXPECT_EQ(b.block_tables[5], s.kv().block_table(2)[0]);
      for (int j = 1; j < 5; ++j) EXPECT_EQ(b.block_tables[static_cast<size_t>(5 + j)], 0);
    }
    finish_step(s, o, 9);
  }
  EXPECT_EQ(s.max_blocks_per_seq(), 16);  // 64 tokens in blocks of 4
  SchedulerOutput o = s.schedule();  // now both decode
  EXPECT_EQ(o.num_decodes, 2);
  EXPECT_EQ(o.batch.positions, (Ints{20, 3}));
  EXPECT_EQ(o.batch.token_ids, (Ints{9, 9}));
  finish_step(s, o);
}

// vLLM's --long-prefill-token-threshold: no prompt takes more than the threshold in one step, so a
// long prompt ahead in the queue leaves the rest of the budget to the prompts behind it; a prompt
// under the threshold goes whole.
TEST(Scheduler, LongPrefillTokenThresholdCapsEachPromptsChunk) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 16;
  c.long_prefill_token_threshold = 6;
  Scheduler s(c);
  s.add(1, iota_tokens(20, 100), SamplingParams{});
  s.add(2, iota_tokens(5, 200), SamplingParams{});
  s.add(3, iota_tokens(9, 300), SamplingParams{});

  SchedulerOutput o1 = s.schedule();  // 6 of the long one, the short one whole, 5 of the third (budget)
  ASSERT_EQ(o1.scheduled.size(), 3u);
  EXPECT_EQ(o1.scheduled[0].seq->id(), 1);
  EXPECT_EQ(o1.scheduled[0].num_new_tokens, 6);
  EXPECT_EQ(o1.scheduled[1].seq->id(), 2);
  EXPECT_EQ(o1.scheduled[1].num_new_tokens, 5);
  EXPECT_TRUE(o1.scheduled[1].samples);
  EXPECT_EQ(o1.scheduled[2].seq->id(), 3);
  EXPECT_EQ(o1.scheduled[2].num_new_tokens, 5);
  EXPECT_EQ(o1.batch.num_tokens(), 16);
  finish_step(s, o1);

  SchedulerOutput o2 = s.schedule();  // seq 2 decodes; the running prompts go on at most 6 a step
  ASSERT_EQ(o2.scheduled.size(), 3u);
  EXPECT_EQ(o2.num_decodes, 1);
  EXPECT_EQ(o2.scheduled[0].seq->id(), 2);
  EXPECT_EQ(o2.scheduled[1].seq->id(), 1);
  EXPECT_EQ(o2.scheduled[1].start, 6);
  EXPECT_EQ(o2.scheduled[1].num_new_tokens, 6);
  EXPECT_EQ(o2.scheduled[2].seq->id(), 3);
  EXPECT_EQ(o2.scheduled[2].num_new_tokens, 4);  // its last 4: under the threshold
  EXPECT_TRUE(o2.scheduled[2].samples);
  finish_step(s, o2);

  for (int step = 0; step < 3; ++step) {  // the long one: 12 → 18 → 20, never more than 6 a step
    SchedulerOutput o = s.schedule();
    for (const ScheduledSequence& q : o.scheduled) EXPECT_LE(q.num_new_tokens, 6);
    finish_step(s, o);
  }
  EXPECT_FALSE(s.running().empty());
  for (const Sequence* q : s.running()) EXPECT_FALSE(q->is_prefilling()) << q->id();
}

TEST(Scheduler, ChunkBoundaryAtTheLastPromptToken) {
  // A 9-token prompt with an 8-token budget: the 9th token goes as a one-token step that samples.
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 8;
  Scheduler s(c);
  s.add(1, iota_tokens(9, 1), SamplingParams{});
  SchedulerOutput o1 = s.schedule();
  EXPECT_TRUE(o1.batch.logits_rows.empty());
  finish_step(s, o1);
  SchedulerOutput o2 = s.schedule();
  ASSERT_EQ(o2.scheduled.size(), 1u);
  EXPECT_EQ(o2.batch.positions, (Ints{8}));
  EXPECT_EQ(o2.batch.logits_rows, (Ints{0}));
  EXPECT_EQ(o2.batch.has_initial_state, (std::vector<uint8_t>{1}));
  finish_step(s, o2, 55);
  EXPECT_EQ(s.find(1)->output()[0], 55);
}

TEST(Scheduler, TokenBudgetAndMaxNumSeqs) {
  SchedulerConfig c = small_config();
  c.max_num_seqs = 3;
  c.max_num_batched_tokens = 10;
  Scheduler s(c);
  SamplingParams one;
  one.max_tokens = 1;
  for (int i = 0; i < 5; ++i) s.add(i, iota_tokens(2, 1), one);
  SchedulerOutput o = s.schedule();
  EXPECT_EQ(o.scheduled.size(), 3u);  // 6 tokens would fit 5 sequences, max_num_seqs allows 3
  EXPECT_EQ(s.num_running(), 3);
  EXPECT_EQ(s.num_waiting(), 2);
  finish_step(s, o);  // max_tokens 1: all three finish
  EXPECT_EQ(s.take_finished().size(), 3u);
  EXPECT_EQ(s.num_running(), 0);
  o = s.schedule();
  EXPECT_EQ(o.scheduled.size(), 2u);
  finish_step(s, o);

  // Budget: prompts of 4 tokens, budget 10: two whole prompts and a 2-token chunk of the third.
  for (int i = 10; i < 13; ++i) s.add(i, iota_tokens(4, 1), one);
  o = s.schedule();
  ASSERT_EQ(o.scheduled.size(), 3u);
  EXPECT_EQ(o.batch.num_tokens(), 10);
  EXPECT_EQ(o.scheduled[2].num_new_tokens, 2);
  EXPECT_FALSE(o.scheduled[2].samples);
  finish_step(s, o);
}

TEST(Scheduler, PreemptionWithATinyPool) {
  SchedulerConfig c = small_config();
  c.block_size = 2;
  c.num_kv_blocks = 4;  // 8 token slots
  Scheduler s(c);
  SamplingParams three;
  three.max_tokens = 3;
  Sequence* a = s.add(1, Ints{11, 12, 13}, three);
  Sequence* b = s.add(2, Ints{21, 22, 23}, SamplingParams{});

  SchedulerOutput o1 = s.schedule();  // both prefill: 2 blocks each, pool full
  ASSERT_EQ(o1.scheduled.size(), 2u);
  EXPECT_EQ(s.kv().num_free_blocks(), 0);
  s.update_from_output(o1, Ints{14, 24});
  SchedulerOutput o2 = s.schedule();  // both decode position 3: room in their second blocks
  EXPECT_EQ(o2.num_decodes, 2);
  EXPECT_EQ(o2.num_preempted, 0);
  s.update_from_output(o2, Ints{15, 25});

  s.add(3, Ints{31, 32}, SamplingParams{});  // waits: no room
  SchedulerOutput o3 = s.schedule();          // a needs a block for position 4: b is preempted
  EXPECT_EQ(o3.num_preempted, 1);
  EXPECT_EQ(s.num_preemptions(), 1);
  ASSERT_EQ(o3.scheduled.size(), 1u);
  EXPECT_EQ(o3.scheduled[0].seq, a);
  EXPECT_EQ(o3.batch.positions, (Ints{4}));
  EXPECT_EQ(b->status, SequenceStatus::Waiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_FALSE(s.kv().has(2));
  ASSERT_EQ(s.num_waiting(), 2);
  EXPECT_EQ(s.waiting()[0], b);  // front of the queue, ahead of the newer request 3
  EXPECT_EQ(s.waiting()[1]->id(), 3);
  EXPECT_EQ(s.kv().num_free_blocks(), 1);  // a holds 3 of 4
  s.update_from_output(o3, Ints{16});      // a's third token: finished (length), frees 3 blocks
  EXPECT_EQ(a->finish_reason, FinishReason::Length);
  EXPECT_EQ(s.kv().num_free_blocks(), 4);

  SchedulerOutput o4 = s.schedule();  // b recomputes prompt + its two generated tokens
  ASSERT_GE(o4.scheduled.size(), 1u);
  EXPECT_EQ(o4.scheduled[0].seq, b);
  EXPECT_EQ(o4.scheduled[0].start, 0);
  EXPECT_EQ(o4.scheduled[0].num_new_tokens, 5);
  EXPECT_TRUE(o4.scheduled[0].samples);
  const StepBatch& bt = o4.batch;
  EXPECT_EQ(Ints(bt.token_ids.begin(), bt.token_ids.begin() + 5), (Ints{21, 22, 23, 24, 25}));
  EXPECT_EQ(Ints(bt.positions.begin(), bt.positions.begin() + 5), (Ints{0, 1, 2, 3, 4}));
  EXPECT_EQ(bt.has_initial_state[0], 0);
  EXPECT_EQ(bt.logits_rows[0], 4);
  EXPECT_EQ(b->num_preemptions, 1);
  finish_step(s, o4);
  EXPECT_EQ(b->num_tokens(), 6);
  EXPECT_EQ(b->num_computed_tokens, 5);
}

TEST(Scheduler, PreemptsTheMostRecentlyAdmittedFirst) {
  SchedulerConfig c = small_config();
  c.block_size = 2;
  c.num_kv_blocks = 3;
  Scheduler s(c);
  Sequence* a = s.add(1, Ints{1, 2}, SamplingParams{});
  Sequence* b = s.add(2, Ints{1, 2}, SamplingParams{});
  Sequence* d = s.add(3, Ints{1, 2}, SamplingParams{});
  SchedulerOutput o = s.schedule();  // one block each: pool full
  ASSERT_EQ(o.scheduled.size(), 3u);
  finish_step(s, o);
  // Every decode now needs a new block. a (oldest) takes d's (youngest); b, with no younger
  // sequence left to preempt, gives up its own place.
  o = s.schedule();
  ASSERT_EQ(o.scheduled.size(), 1u);
  EXPECT_EQ(o.scheduled[0].seq, a);
  EXPECT_EQ(o.num_preempted, 2);
  ASSERT_EQ(s.num_waiting(), 2);
  EXPECT_EQ(s.waiting()[0], b);  // the older of the two preempted stays ahead
  EXPECT_EQ(s.waiting()[1], d);
  EXPECT_EQ(s.running(), std::vector<Sequence*>{a});
  finish_step(s, o);
}

TEST(Scheduler, ASequenceThatCanNeverFitFinishesWithLength) {
  SchedulerConfig c = small_config();
  c.block_size = 2;
  c.num_kv_blocks = 2;  // 4 token slots
  Scheduler s(c);
  Sequence* a = s.add(1, Ints{1, 2, 3}, SamplingParams{});
  s.add(2, Ints{1, 2, 3, 4, 5}, SamplingParams{});  // 3 blocks: never fits
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.scheduled.size(), 1u);
  finish_step(s, o);
  // seq 2 was finished when it reached the head of the queue.
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id(), 2);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Length);
  EXPECT_FALSE(done[0]->finish_detail.empty());

  o = s.schedule();  // position 3 still fits
  ASSERT_EQ(o.scheduled.size(), 1u);
  finish_step(s, o);
  o = s.schedule();  // position 4 needs a third block; a is alone: it can never fit
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(a->status, SequenceStatus::Finished);
  EXPECT_EQ(a->finish_reason, FinishReason::Length);
  EXPECT_EQ(s.kv().num_free_blocks(), 2);
  EXPECT_FALSE(s.has_unfinished());
  EXPECT_EQ(s.take_finished().size(), 1u);
}

TEST(Scheduler, StopConditions) {
  SchedulerConfig c = small_config();  // EOS = 0, max_model_len 64
  c.max_num_batched_tokens = 128;
  Scheduler s(c);
  SamplingParams plain;
  SamplingParams ignore;
  ignore.ignore_eos = true;
  ignore.max_tokens = 2;
  SamplingParams min2;
  min2.min_tokens = 2;
  SamplingParams stop_ids;
  stop_ids.stop_token_ids = {42};
  s.add(1, Ints{5}, plain);
  s.add(2, Ints{5}, ignore);
  s.add(3, Ints{5}, min2);
  s.add(4, Ints{5}, stop_ids);
  s.add(5, iota_tokens(63, 1), plain);  // reaches max_model_len 64 with its first token

  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.sampling_seqs().size(), 5u);
  s.update_from_output(o, Ints{0, 0, 0, 42, 9});
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0]->id(), 1);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Stop);
  EXPECT_EQ(done[0]->stop_token, 0);
  EXPECT_EQ(done[1]->id(), 4);
  EXPECT_EQ(done[1]->finish_reason, FinishReason::Stop);
  EXPECT_EQ(done[1]->stop_token, 42);
  EXPECT_EQ(done[2]->id(), 5);
  EXPECT_EQ(done[2]->finish_reason, FinishReason::Length);
  EXPECT_EQ(done[2]->num_tokens(), 64);
  EXPECT_EQ(s.num_running(), 2);  // 2 ignores EOS, 3 has min_tokens 2

  o = s.schedule();
  s.update_from_output(o, Ints{0, 0});
  done = s.take_finished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0]->id(), 2);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Length);  // max_tokens 2, EOS ignored
  EXPECT_EQ(done[1]->id(), 3);
  EXPECT_EQ(done[1]->finish_reason, FinishReason::Stop);  // second EOS counts
  EXPECT_EQ((Ints(done[1]->output().begin(), done[1]->output().end())), (Ints{0, 0}));
  EXPECT_EQ(s.kv().num_free_blocks(), s.kv().pool().num_blocks());
}

TEST(Scheduler, AbortWaitingRunningAndInFlight) {
  Scheduler s(small_config());
  s.add(1, Ints{1, 2}, SamplingParams{});
  s.add(2, Ints{1, 2}, SamplingParams{});
  EXPECT_TRUE(s.abort(2));  // waiting: at once
  EXPECT_FALSE(s.abort(2));
  EXPECT_FALSE(s.abort(77));
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Abort);

  SchedulerOutput o = s.schedule();
  EXPECT_TRUE(s.abort(1));  // in flight: applied when the step completes, token dropped
  EXPECT_TRUE(s.take_finished().empty());
  s.update_from_output(o, Ints{5});
  done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Abort);
  EXPECT_EQ(done[0]->num_output_tokens(), 0);
  EXPECT_EQ(s.kv().num_free_blocks(), s.kv().pool().num_blocks());
  EXPECT_FALSE(s.has_unfinished());
}

TEST(Scheduler, StateSlotsFollowTheSequences) {
  SchedulerConfig c = small_config();
  c.use_state_slots = true;
  c.max_num_seqs = 2;
  c.max_num_batched_tokens = 8;
  Scheduler s(c);
  SamplingParams one;
  one.max_tokens = 1;
  s.add(1, Ints{1, 2}, one);
  s.add(2, Ints{1, 2}, SamplingParams{});
  s.add(3, Ints{1, 2}, SamplingParams{});
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.scheduled.size(), 2u);
  const int32_t slot1 = o.batch.state_slots[0];
  const int32_t slot2 = o.batch.state_slots[1];
  EXPECT_NE(slot1, slot2);
  EXPECT_GE(slot1, 0);
  EXPECT_GE(slot2, 0);
  EXPECT_EQ(s.state_slots().num_free(), 0);
  finish_step(s, o);  // seq 1 finishes and returns its slot
  EXPECT_EQ(s.state_slots().num_free(), 1);
  o = s.schedule();   // decode of 2, prefill of 3 in 1's old slot
  ASSERT_EQ(o.scheduled.size(), 2u);
  EXPECT_EQ(o.batch.state_slots, (Ints{slot2, slot1}));
  EXPECT_EQ(o.batch.has_initial_state, (std::vector<uint8_t>{1, 0}));
  finish_step(s, o);
}

TEST(Scheduler, RejectsBadRequestsAndMisuse) {
  Scheduler s(small_config());
  EXPECT_THROW(s.add(1, Ints{}, SamplingParams{}), Error);
  EXPECT_THROW(s.add(1, iota_tokens(65, 1), SamplingParams{}), Error);  // > max_model_len
  SamplingParams bad;
  bad.top_p = 0;
  EXPECT_THROW(s.add(1, Ints{1}, bad), Error);
  s.add(1, Ints{1}, SamplingParams{});
  EXPECT_THROW(s.add(1, Ints{1}, SamplingParams{}), Error);  // id in use
  SchedulerOutput o = s.schedule();
  EXPECT_THROW(s.schedule(), std::logic_error);                   // previous step not updated
  EXPECT_THROW(s.update_from_output(o, Ints{}), std::logic_error);  // one token expected
  s.update_from_output(o, Ints{3});
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 4;  // < max_num_seqs
  EXPECT_THROW(Scheduler{c}, Error);
}

}  // namespace
}  // namespace pagoda
