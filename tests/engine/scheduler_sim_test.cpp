// A randomized simulation of the engine loop with a fake model that really reads what the batch
// says: it writes each new token into a fake KV pool at slot_mapping, reads every context token
// back through block_tables / seq_lens, and keeps a fake recurrent state per state slot. Its logits
// are a function of the sequence's own tokens only, so every sequence must produce exactly the
// tokens it produces when generated alone, whatever the batching, chunking and preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace pagoda {
namespace {

constexpr int kVocab = 48;

uint64_t attn_fold(uint64_t h, int32_t token) { return h * 1000003u + static_cast<uint64_t>(token) + 1; }
uint64_t state_fold(uint64_t h, int32_t token) { return mix_seed(h ^ (static_cast<uint64_t>(token) << 7)); }

std::vector<float> fake_logits(uint64_t attn, uint64_t state) {
  std::vector<float> row(kVocab);
  uint64_t h = mix_seed(attn ^ mix_seed(state));
  for (float& v : row) {
    h = mix_seed(h);
    v = static_cast<float>(h % 4000) / 500.0f;  // [0, 8)
  }
  return row;
}

// The reference: one sequence generated alone, straight from its tokens.
std::vector<int32_t> generate_alone(int64_t id, const std::vector<int32_t>& prompt, const SamplingParams& p,
                                    uint64_t engine_seed, bool hybrid, int32_t max_model_len,
                                    const std::vector<int32_t>& eos, const Sampler& sampler) {
  Sequence seq(id, prompt, p, engine_seed);
  for (;;) {
    uint64_t a = 0, st = 0;
    for (int32_t t : seq.tokens()) {
      a = attn_fold(a, t);
      st = state_fold(st, t);
    }
    const auto row = fake_logits(a, hybrid ? st : 0);
    const int32_t token = sampler.sample_row(row, p, seq.prompt(), seq.output(), seq.rng()).token;
    seq.append_token(token);
    const int32_t n = seq.num_output_tokens();
    const bool is_eos = !p.ignore_eos && std::count(eos.begin(), eos.end(), token) > 0;
    if (n >= p.min_tokens && is_eos) break;
    if (p.max_tokens && n >= *p.max_tokens) break;
    if (seq.num_tokens() >= max_model_len) break;
  }
  return {seq.output().begin(), seq.output().end()};
}

struct FakeModel {
  struct Entry {
    int32_t token = -1;
    int32_t position = -1;
  };
  struct State {
    uint64_t hash = 0;
    int32_t count = 0;
  };
  std::vector<Entry> kv;
  std::vector<State> states;
  bool hybrid;

  FakeModel(int32_t num_slots, int32_t num_state_slots, bool is_hybrid)
      : kv(static_cast<size_t>(num_slots)), states(static_cast<size_t>(num_state_slots)), hybrid(is_hybrid) {}

  // Logits rows [S', kVocab] for the batch.
  std::vector<float> forward(const StepBatch& b) {
    const int32_t T = b.num_tokens();
    const int32_t S = b.num_seqs();
    EXPECT_EQ(b.positions.size(), static_cast<size_t>(T));
    EXPECT_EQ(b.slot_mapping.size(), static_cast<size_t>(T));
    EXPECT_EQ(b.cu_seqlens_q.size(), static_cast<size_t>(S + 1));
    EXPECT_EQ(b.block_tables.size(), static_cast<size_t>(S * b.max_blocks_per_seq));
    std::set<int32_t> slots(b.slot_mapping.begin(), b.slot_mapping.end());
    EXPECT_EQ(slots.size(), static_cast<size_t>(T)) << "two tokens of one step share a KV slot";
    for (int32_t t = 0; t < T; ++t) {
      kv.at(static_cast<size_t>(b.slot_mapping[static_cast<size_t>(t)])) = {b.token_ids[static_cast<size_t>(t)],
                                                                             b.positions[static_cast<size_t>(t)]};
    }
    std::vector<float> logits;
    size_t next_row = 0;
    for (int32_t s = 0; s < S; ++s) {
      const int32_t q0 = b.cu_seqlens_q[static_cast<size_t>(s)], q1 = b.cu_seqlens_q[static_cast<size_t>(s + 1)];
      const int32_t ctx = b.seq_lens[static_cast<size_t>(s)];
      EXPECT_EQ(b.positions[static_cast<size_t>(q1 - 1)], ctx - 1);
      State* st = nullptr;
      if (hybrid) {
        st = &states.at(static_cast<size_t>(b.state_slots[static_cast<size_t>(s)]));
        if (!b.has_initial_state[static_cast<size_t>(s)]) *st = State{};
        EXPECT_EQ(st->count, b.positions[static_cast<size_t>(q0)]) << "state slot holds another history";
        for (int32_t t = q0; t < q1; ++t) {
          st->hash = state_fold(st->hash, b.token_ids[static_cast<size_t>(t)]);
          ++st->count;
        }
      } else {
        EXPECT_EQ(b.state_slots[static_cast<size_t>(s)], -1);
      }
      if (next_row < b.logits_rows.size() && b.logits_rows[next_row] == q1 - 1) {
        ++next_row;
        uint64_t a = 0;
        for (int32_t p = 0; p < ctx; ++p) {
          const int32_t block = b.block_tables[static_cast<size_t>(s * b.max_blocks_per_seq + p / b.block_size)];
          const Entry& e = kv.at(static_cast<size_t>(block * b.block_size + p % b.block_size));
          EXPECT_EQ(e.position, p) << "KV slot of position " << p << " holds another token";
          a = attn_fold(a, e.token);
        }
        const auto row = fake_logits(a, hybrid ? st->hash : 0);
        logits.insert(logits.end(), row.begin(), row.end());
      }
    }
    EXPECT_EQ(next_row, b.logits_rows.size()) << "a logits row is not the last token of its sequence";
    return logits;
  }
};

struct SimResult {
  int64_t preemptions = 0;
  int steps = 0;
};

SimResult simulate(uint64_t seed, bool hybrid) {
  std::mt19937_64 gen(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };

  SchedulerConfig c;
  c.max_num_seqs = 6;
  c.max_num_batched_tokens = 24;
  c.max_model_len = 96;
  c.block_size = 4;
  c.num_kv_blocks = 24;  // exactly one max_model_len sequence
  c.use_state_slots = hybrid;
  c.eos_token_ids = {0, 1};
  c.seed = seed;
  Scheduler sched(c);
  Sampler sampler(c.eos_token_ids);
  FakeModel model(c.num_kv_blocks * c.block_size, c.max_num_seqs, hybrid);

  struct Request {
    std::vector<int32_t> prompt;
    SamplingParams params;
    bool aborted = false;
  };
  std::map<int64_t, Request> requests;
  std::map<int64_t, std::vector<int32_t>> outputs;
  const int num_requests = 40;
  int64_t next_id = 0;
  SimResult result;

  while (next_id < num_requests || sched.has_unfinished()) {
    // Random arrivals, a few at a time.
    while (next_id < num_requests && uni(0, 9) < 4) {
      Request r;
      const int len = uni(1, 60);
      for (int i = 0; i < len; ++i) r.prompt.push_back(uni(2, kVocab - 1));
      r.params.temperature = uni(0, 2) == 0 ? 0.0 : 0.9;
      if (uni(0, 1)) r.params.seed = static_cast<uint64_t>(uni(0, 1000));
      r.params.top_k = uni(0, 1) ? 0 : 20;
      r.params.repetition_penalty = uni(0, 3) == 0 ? 1.2 : 1.0;
      r.params.min_tokens = uni(0, 3);
      r.params.max_tokens = uni(r.params.min_tokens > 0 ? r.params.min_tokens : 1, 50);
      sched.add(next_id, r.prompt, r.params);
      requests[next_id] = r;
      ++next_id;
    }
    // Now and then the client goes away.
    if (uni(0, 99) < 2 && next_id > 0) {
      const int64_t victim = uni(0, static_cast<int>(next_id) - 1);
      if (sched.abort(victim)) requests[victim].aborted = true;
    }

    SchedulerOutput out = sched.schedule();
    for (auto& seq : sched.take_finished()) {
      outputs[seq->id()] = {seq->output().begin(), seq->output().end()};
      EXPECT_TRUE(seq->finish_detail.empty()) << seq->finish_detail;
    }
    if (out.empty()) {
      EXPECT_FALSE(sched.has_unfinished() && sched.num_running() > 0) << "running sequences but nothing scheduled";
      if (sched.has_unfinished() && next_id >= num_requests) {
        ADD_FAILURE() << "stuck with " << sched.num_waiting() << " waiting";
        break;
      }
      continue;
    }
    ++result.steps;
    EXPECT_LE(out.batch.num_tokens(), c.max_num_batched_tokens);
    EXPECT_LE(out.batch.num_seqs(), c.max_num_seqs);
    EXPECT_LE(sched.num_running(), c.max_num_seqs);
    for (int32_t i = 0; i < out.num_decodes; ++i) EXPECT_EQ(out.scheduled[static_cast<size_t>(i)].num_new_tokens, 1);

    const std::vector<float> logits = model.forward(out.batch);
    const std::vector<Sequence*> rows = out.sampling_seqs();
    const auto samples = sampler.sample(logits, kVocab, rows);
    std::vector<int32_t> tokens;
    for (const auto& r : samples) tokens.push_back(r.token);
    sched.update_from_output(out, tokens);
    for (auto& seq : sched.take_finished()) outputs[seq->id()] = {seq->output().begin(), seq->output().end()};
    if (result.steps > 20000) {
      ADD_FAILURE() << "no end in sight";
      break;
    }
  }

  EXPECT_EQ(outputs.size(), static_cast<size_t>(num_requests));
  for (const auto& [id, req] : requests) {
    const auto expect = generate_alone(id, req.prompt, req.params, c.seed, hybrid, c.max_model_len,
                                       c.eos_token_ids, sampler);
    const auto& got = outputs[id];
    if (req.aborted) {
      EXPECT_LE(got.size(), expect.size()) << "request " << id;
      EXPECT_TRUE(got.size() <= expect.size() && std::equal(got.begin(), got.end(), expect.begin()))
          << "request " << id;
    } else {
      EXPECT_EQ(got, expect) << "request " << id << " (seed " << seed << ")";
    }
  }
  EXPECT_EQ(sched.kv().num_free_blocks(), c.num_kv_blocks);
  EXPECT_EQ(sched.state_slots().num_free(), hybrid ? c.max_num_seqs : 0);
  EXPECT_EQ(sched.num_running(), 0);
  EXPECT_EQ(sched.num_waiting(), 0);
  result.preemptions = sched.num_preemptions();
  return result;
}

TEST(SchedulerSimulation, BatchAndPreemptionInvariantDense) {
  int64_t preemptions = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) preemptions += simulate(seed, false).preemptions;
  EXPECT_GT(preemptions, 0) << "the pool is too big to exercise preemption";
}

TEST(SchedulerSimulation, BatchAndPreemptionInvariantHybrid) {
  int64_t preemptions = 0;
  for (uint64_t seed = 11; seed <= 16; ++seed) preemptions += simulate(seed, true).preemptions;
  EXPECT_GT(preemptions, 0) << "the pool is too big to exercise preemption";
}

}  // namespace
}  // namespace pagoda
