// --speculative-config, as vLLM takes it (a JSON object):
//   {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": a, "prompt_lookup_max": b}
//   {"method": "mtp", "num_speculative_tokens": k}
//   {"model": DIR, "num_speculative_tokens": k}        (a draft model; method "draft_model")
//   {"method": "eagle3", "model": DIR, "num_speculative_tokens": k}   (an EAGLE-3 head, model/eagle3_head.h)
// and with any of them "disable_by_batch_size": n (vLLM's: no drafts past n running sequences) and
// "adaptive": false (ours: k drafts every step; by default the engine picks 0..k each step from the
// measured acceptance and step times, engine/speculation_controller.h).
// Drafts are verified by the target model in the same varlen step as every other sequence; the
// acceptance rule (greedy, or rejection sampling against one-hot drafts) keeps the output
// distribution exactly the target's, so a config changes speed, never results.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda {

enum class SpeculativeMethod { None, Ngram, Mtp, DraftModel, Eagle3 };

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::None;
  int32_t num_speculative_tokens = 0;  // k: drafts per sequence per step
  int32_t prompt_lookup_min = 1;       // ngram: shortest suffix looked up
  int32_t prompt_lookup_max = 0;       // ngram: longest suffix looked up (0 = prompt_lookup_min)
  std::string model;                   // draft model / EAGLE-3 head directory
  // Drafts per step chosen from measurements (speculation_controller.h). The flag turns it on
  // unless "adaptive": false; a config built in code gets the static k unless it sets this.
  bool adaptive = false;
  int32_t disable_by_batch_size = 0;   // no drafts past this many running sequences (0: never)

  bool enabled() const { return method != SpeculativeMethod::None && num_speculative_tokens > 0; }
  // "ngram k=4 lookup 2..5 adaptive", "mtp k=2", "draft_model DIR k=4", "eagle3 DIR k=3", "off"
  std::string describe() const;
};

// Drafts per step past which verification costs more than it can save (vLLM allows any k; its
// docs use 2..5): also bounds the logits rows a step can have.
inline constexpr int32_t kMaxSpeculativeTokens = 16;
// Longest n-gram looked up (vLLM's default prompt_lookup_max is 5).
inline constexpr int32_t kMaxPromptLookup = 64;

// Parses the flag's JSON; "" = off. Throws pagoda::Error naming the field and what is allowed.
SpeculativeConfig parse_speculative_config(const std::string& json);

const char* speculative_method_name(SpeculativeMethod m);

}  // namespace pagoda
