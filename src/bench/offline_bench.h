// `pagoda bench offline`: fixed batches through one engine, as llama.cpp's llama-batched-bench
// (B prompts of P tokens, G generated tokens each) and llama-bench (pp512, tg128) measure them,
// so the numbers line up (docs/performance.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pagoda {

struct OfflineBenchPoint {
  std::string name;  // "pp512", "tg128", "B=16 P=256 G=256"
  int32_t batch = 1, prompt_len = 0, gen_len = 0;
  double prefill_s = 0, decode_s = 0;  // until every request has its first token; the rest
  // The decode phase per engine step: steps, and the host's share of their time (everything but
  // waiting for the device: scheduling, metadata, launches, sampling, detokenizing).
  int64_t decode_steps = 0;
  double decode_host_s = 0;
  // Speculative decoding during the point (0 when off): sequences that brought drafts to a step,
  // drafts, accepted drafts.
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted = 0;
  double mean_acceptance_length() const { return spec_drafts > 0 ? 1.0 + double(spec_accepted) / double(spec_drafts) : 0; }
  double step_ms() const { return decode_steps > 0 ? 1e3 * decode_s / double(decode_steps) : 0; }
  double host_ms() const { return decode_steps > 0 ? 1e3 * decode_host_s / double(decode_steps) : 0; }
  double prefill_tok_s() const { return prefill_s > 0 ? batch * double(prompt_len) / prefill_s : 0; }
  // Tokens after each request's first, over the decode time (llama-batched-bench's S_TG).
  double decode_tok_s() const {
    return decode_s > 0 ? batch * double(gen_len - 1) / decode_s : 0;
  }
  double total_tok_s() const {
    const double t = prefill_s + decode_s;
    return t > 0 ? batch * double(prompt_len + gen_len) / t : 0;
  }
};

// Runs B requests of `prompt_len` random token ids (seeded) generating exactly `gen_len` tokens
// each (ignore_eos, greedy) and times the two phases. With `prompt` given, every request's prompt
// is that one instead (prompt_len is its length). With `grammar`, every request is constrained by
// it (structured output; the budget steering of the mask still gives exactly gen_len tokens).
OfflineBenchPoint run_offline_point(Engine& engine, const std::string& name, int32_t batch,
                                    int32_t prompt_len, int32_t gen_len, uint64_t seed,
                                    const std::vector<int32_t>* prompt = nullptr,
                                    std::shared_ptr<structured::GrammarRuntime> grammar = nullptr);

std::string offline_table(const std::vector<OfflineBenchPoint>& points);
std::string offline_json(const std::vector<OfflineBenchPoint>& points, const std::string& model,
                         const std::string& device);

}  // namespace pagoda
