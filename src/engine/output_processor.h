// OutputProcessor: token ids → what a client sees (vLLM v1's OutputProcessor, docs/design.md §1, §7).
// Per request it detokenizes incrementally, finds stop strings and builds the RequestOutput of
// each step (text delta, token ids, logprob samples, finish). A stop string finishes the request
// here, not in the core: process() returns its id in reqs_to_abort, and the driver aborts it in
// the core (freeing its blocks); the core's later abort output for it is dropped.
//
// Stop strings, as vLLM's:
//  - the output ends just before the earliest stop string found, or just after it with
//    include_stop_str_in_output;
//  - while a stop string may still be completing, the text that could be its beginning is held
//    back (the longest tail of the text that is a prefix of some stop string), so a stop string
//    never reaches the client; with include_stop_str_in_output nothing is held back;
//  - when the request finishes, whatever was held back is sent.
//
// Not thread-safe: used by the thread that drives the EngineCore.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_core.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

// What one step produced for one request.
struct RequestOutput {
  int64_t id = 0;
  std::vector<int32_t> new_token_ids;
  std::vector<SampleResult> samples;  // one per new token (logprobs when asked for)
  std::string new_text;               // detokenized delta (when the model has a tokenizer)
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  int32_t stop_token = -1;            // the EOS / stop token id that finished it
  std::string stop_string;            // the stop string that finished it
  std::string finish_detail;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  int32_t num_cached_tokens = 0;      // prompt tokens the prefix cache had (usage's cached_tokens)
  // An embedding request's one output (finished): see EngineCoreOutput::embedding.
  std::vector<float> embedding;
};

class OutputProcessor {
 public:
  // `tokenizer` may be null (a model directory without tokenizer.json): no text, no stop strings.
  explicit OutputProcessor(const Tokenizer* tokenizer);
  ~OutputProcessor();

  // Throws pagoda::Error when the parameters need what this processor cannot do (stop strings
  // without a tokenizer). Call before the request goes to the core.
  void validate(const SamplingParams& params) const;
  // Starts tracking request `id` (already added to the core).
  void add_request(int64_t id, const SamplingParams& params);
  // Stops tracking `id` (the caller took it back from the core): its later outputs are dropped.
  void remove_request(int64_t id);
  size_t num_requests() const { return requests_.size(); }

  struct Result {
    std::vector<RequestOutput> outputs;  // in the order of the core's outputs
    std::vector<int64_t> reqs_to_abort;  // finished here by a stop string: abort them in the core
  };
  Result process(std::vector<EngineCoreOutput>& core_outputs);

 private:
  struct RequestState;
  // Appends the new tokens' text and fills out.new_text / out.stop_string.
  void emit_text(RequestState& rs, RequestOutput& out);

  const Tokenizer* tokenizer_;
  std::unordered_map<int64_t, std::unique_ptr<RequestState>> requests_;
};

}  // namespace pagoda
