// How one request samples its tokens and when it stops, as OpenAI and vLLM accept them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/multimodal.h"

namespace pagoda {

namespace structured {
class GrammarRuntime;
}

// A request's stop strings, shared (not copied) between the choices it fans out into: n x a long
// stop list must not become n long stop lists. Copy-on-write; reads like a vector of strings.
class StopStrings {
 public:
  using value_type = std::string;
  using List = std::vector<std::string>;
  using iterator = List::const_iterator;
  using const_iterator = List::const_iterator;

  StopStrings() = default;
  StopStrings(List strings) { assign(std::move(strings)); }
  StopStrings(std::initializer_list<std::string> strings) { assign(List(strings)); }

  const List& list() const { return list_ ? *list_ : empty_list(); }
  const_iterator begin() const { return list().begin(); }
  const_iterator end() const { return list().end(); }
  size_t size() const { return list().size(); }
  bool empty() const { return list().empty(); }
  const std::string& operator[](size_t i) const { return list()[i]; }
  int64_t total_bytes() const;

  void clear() { list_.reset(); }
  void erase(const_iterator first, const_iterator last);  // CLI11 empties containers so
  void push_back(std::string s);
  const_iterator insert(const_iterator, std::string s);  // appends (CLI11 fills containers so)

  friend bool operator==(const StopStrings& a, const StopStrings& b) { return a.list() == b.list(); }
  friend bool operator==(const StopStrings& a, const List& b) { return a.list() == b; }

 private:
  void assign(List strings);
  static const List& empty_list();
  std::shared_ptr<const List> list_;
};

// A request's stop_token_ids: sorted, without repeats, shared (not copied) between its choices, and
// looked up by binary search on every sampled token (the engine checks each one). Copy-on-write;
// reads like a sorted vector of ids.
class TokenIdSet {
 public:
  using value_type = int32_t;
  using List = std::vector<int32_t>;
  using iterator = List::const_iterator;
  using const_iterator = List::const_iterator;

  TokenIdSet() = default;
  TokenIdSet(List ids) { assign(std::move(ids)); }
  TokenIdSet(std::initializer_list<int32_t> ids) { assign(List(ids)); }

  const List& list() const { return list_ ? *list_ : empty_list(); }
  const_iterator begin() const { return list().begin(); }
  const_iterator end() const { return list().end(); }
  size_t size() const { return list().size(); }
  bool empty() const { return list().empty(); }
  int32_t operator[](size_t i) const { return list()[i]; }
  bool contains(int32_t id) const;

  void clear() { list_.reset(); }
  void erase(const_iterator first, const_iterator last);  // CLI11 empties containers so
  void push_back(int32_t id);
  const_iterator insert(const_iterator, int32_t id);  // adds (CLI11 fills containers so)

  friend bool operator==(const TokenIdSet& a, const TokenIdSet& b) { return a.list() == b.list(); }
  friend bool operator==(const TokenIdSet& a, const List& b) { return a.list() == b; }

 private:
  void assign(List ids);
  static const List& empty_list();
  std::shared_ptr<const List> list_;
};

struct SamplingParams {
  int32_t n = 1;                       // completions per prompt (fanned out by the engine)
  double temperature = 1.0;            // 0 = greedy
  int32_t top_k = 0;                   // 0 or -1 = off
  double top_p = 1.0;                  // (0, 1]; 1 = off
  double min_p = 0.0;                  // [0, 1]; 0 = off
  std::optional<uint64_t> seed;        // per-request seed; without it, derived from the engine seed
  double presence_penalty = 0.0;       // [-2, 2], over output tokens
  double frequency_penalty = 0.0;      // [-2, 2], over output tokens
  double repetition_penalty = 1.0;     // > 0, over prompt + output tokens; 1 = off
  std::optional<int32_t> max_tokens;   // >= 1; unset = until max_model_len
  int32_t min_tokens = 0;              // >= 0, <= max_tokens: no stop before this many tokens
  TokenIdSet stop_token_ids;           // sorted, unique, shared between the choices
  StopStrings stop;                    // stop strings, matched on detokenized text (OutputProcessor)
  bool include_stop_str_in_output = false;  // vLLM's: the text ends after the stop string, not before
  bool ignore_eos = false;
  std::optional<int32_t> logprobs;     // top-n logprobs per sampled token, >= 0
  // OpenAI's logit_bias: added to the raw logits of these token ids, in [-100, 100]. Shared between
  // the choices of a request like the stop strings.
  std::shared_ptr<const std::vector<std::pair<int32_t, float>>> logit_bias;
  // vLLM's allowed_token_ids: only these may be sampled (empty = every token). Shared, sorted.
  TokenIdSet allowed_token_ids;
  // vLLM's bad_words, tokenized by the server: a word's last token is masked whenever the tokens
  // before it are the last ones generated (a one-token word is always masked). Shared.
  std::shared_ptr<const std::vector<std::vector<int32_t>>> bad_words_token_ids;
  // vLLM's skip_special_tokens: the output text leaves special tokens out (false: they stay in).
  bool skip_special_tokens = true;
  // vLLM's priority (--scheduling-policy priority): lower values are scheduled first. Always 0 with
  // fcfs, which the server enforces.
  int32_t priority = 0;
  // Not sampling either: the LoRA adapter (its slot in the engine's --lora-modules order) the
  // request runs with; -1 the base model. Part of the prefix-cache key (Scheduler).
  int32_t lora = -1;
  // Not sampling, but per request and carried with it: vLLM's cache_salt. Requests share cached
  // prefix blocks only when their salts are equal (empty = the common pool).
  std::string cache_salt;
  // Prompt lengths (tokens) where earlier parts of the conversation end, e.g. the system prompt
  // and the previous turn (the chat route finds them). A hybrid model leaves a state snapshot at
  // the last full block before each, so the next request that shares that part resumes there.
  std::vector<int32_t> prefix_boundaries;
  // Not sampling: the prompt's images, in the order of their placeholder runs (multimodal.h;
  // docs/vision.md). Empty for a text prompt.
  std::vector<std::shared_ptr<ImageInput>> images;
  // Structured output: the compiled grammar (JSON schema, regex, choice, GBNF) bound to the
  // vocabulary; every sampled token is one it allows, EOS only where it accepts. Shared by the
  // choices of a request and by requests with the same constraint (the server's cache).
  std::shared_ptr<structured::GrammarRuntime> grammar;
  // The grammar applies only after this token has been sampled (-1: from the first token): a
  // thinking model's reasoning stays free until `</think>`, as vLLM's reasoning parsers do.
  int32_t grammar_after_token = -1;

  // Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS).
  static constexpr double kGreedyEpsilon = 1e-5;
  bool greedy() const { return temperature < kGreedyEpsilon; }
  bool top_k_enabled() const { return top_k > 0; }
};

// Longer salts buy no isolation (the salt is hashed) and cost memory per cached block.
inline constexpr size_t kMaxCacheSaltBytes = 1024;

// The first problem found, as a message naming the field and its valid range (vLLM's rules), or
// nullopt when the parameters are valid.
std::optional<std::string> validate_sampling_params(const SamplingParams& p);

}  // namespace pagoda
