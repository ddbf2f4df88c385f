#include "engine/sequence.h"

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

}  // namespace pagoda
