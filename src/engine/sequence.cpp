#include "engine/sequence.h"

#include <algorithm>
#include <utility>

namespace pagoda {

const char* sequence_status_name(SequenceStatus s) {
  switch (s) {
    case SequenceStatus::Waiting: return "waiting";
    case SequenceStatus::Running: return "running";
    case SequenceStatus::Finished: return "finished";
  }
  return "?";
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
  }
  return "?";
}

uint64_t mix_seed(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

Sequence::Sequence(int64_t id, std::vector<int32_t> prompt, SamplingParams params, uint64_t engine_seed)
    : id_(id),
      num_prompt_(prompt.size()),
      tokens_(std::move(prompt)),
      params_(std::move(params)),
      rng_(params_.seed ? *params_.seed : mix_seed(mix_seed(engine_seed) ^ static_cast<uint64_t>(id))) {}

void Sequence::set_mm(std::shared_ptr<const MultimodalPrompt> mm) {
  mm_ = std::move(mm);
  cache_tokens_.clear();
  if (!mm_) return;
  cache_tokens_ = mm_->cache_tokens;
  for (int32_t t : output()) cache_tokens_.push_back(t);
}

int32_t Sequence::rope_position(int32_t index) const {
  if (!mm_) return index;
  if (index < mm_->num_prompt) return mm_->positions[static_cast<size_t>(index)];
  return index + mm_->rope_delta;
}

int32_t draft_budget(const Sequence& seq, int32_t k, int32_t max_model_len) {
  if (seq.embed || seq.num_output_tokens() == 0 || seq.params().grammar) return 0;
  int64_t d = k;
  if (seq.params().max_tokens) d = std::min<int64_t>(d, *seq.params().max_tokens - seq.num_output_tokens() - 1);
  d = std::min<int64_t>(d, max_model_len - seq.num_tokens() - 1);
  return static_cast<int32_t>(std::max<int64_t>(d, 0));
}

}  // namespace pagoda
