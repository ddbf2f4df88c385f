// `pagoda bench serve`'s requests: random prompts of fixed (or ranged) lengths, lengths drawn from
// a ShareGPT-like distribution, prompts read from a JSONL file, or the prefix-cache datasets:
// prefix_repetition (vLLM's: N prefixes of L tokens, each followed by unique suffixes) and
// multi-turn (conversations whose every turn resends the last one's prompt, reply and a new message). Random prompts are made as vLLM's
// random dataset makes them: a run of consecutive ids of the vocabulary (special tokens left out)
// from a random offset, decoded to text and re-encoded until the text is the asked-for number of
// tokens; with no way to decode, the ids themselves are the prompt. Seeded, and the same on every
// platform (the generator's arithmetic is our own, not the standard library's distributions, whose
// results differ between implementations).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::bench {

struct BenchRequest {
  std::vector<int32_t> prompt_ids;  // token-id prompt (random, sharegpt-like, or a JSONL id list)
  std::string prompt_text;          // text prompt (JSONL); used when prompt_ids is empty
  int32_t prompt_len = 0;           // tokens, when known (0 for text: the server's usage tells)
  int32_t output_len = 0;           // max_tokens
  int32_t after = -1;               // multi-turn: sent only once this request (an earlier index) is done
};

struct DatasetOptions {
  std::string name = "random";  // random | sharegpt-like | jsonl | prefix_repetition | multi-turn
  int32_t num_prompts = 1000;
  int32_t input_len = 1024, output_len = 128;  // random: the lengths; jsonl: output_len default
  double range_ratio = 0.0;                    // random: lengths uniform in len·[1-r, 1+r]
  int32_t vocab_size = 0;  // > 0: token-id prompts from [0, V), no tokenizer; 0: a PromptVocabulary's
  std::string path;                            // jsonl
  uint64_t seed = 0;
  // prefix_repetition (vLLM's flags and defaults): num_prompts spread over the prefixes in turn.
  int32_t prefix_len = 256, suffix_len = 256, num_prefixes = 10, prefix_output_len = 128;
  // multi-turn: num_prompts / turns conversations; turn 1 is input_len tokens, every next turn adds
  // the previous reply (output_len tokens, synthetic) and a user message of user_len tokens.
  int32_t turns = 5, user_len = 64;
};

// Draws from a seeded splitmix64 stream: uniform integers and doubles, and normals (Box-Muller).
class BenchRng {
 public:
  explicit BenchRng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                          // [0, 1)
  int64_t uniform_int(int64_t lo, int64_t hi);  // [lo, hi]
  double normal();                           // mean 0, sd 1
  double exponential(double rate);           // mean 1/rate

 private:
  uint64_t state_;
};

// ShareGPT-like lengths: log-normal input (median 120 tokens) and output (median 140) lengths,
// kept in [4, 1024] for the input and [4, 2048 - input] for the output, as vLLM filters ShareGPT.
// An approximation of the conversations' shape, not data from them.
struct SharegptLikeShape {
  double input_median = 120, input_sigma = 1.1;
  double output_median = 140, output_sigma = 0.9;
};

// What random prompts are made of: the ids they may use and, where it can, the text those ids are
// (bench serve's --tokenizer DIR, or the server's /tokenize and /detokenize).
class PromptVocabulary {
 public:
  virtual ~PromptVocabulary() = default;
  virtual int32_t size() const = 0;                   // ids in [0, size)
  virtual bool usable(int32_t id) const = 0;          // false: left out (special tokens, holes)
  virtual bool has_text() const = 0;                  // decode / encode work
  virtual std::string decode(const std::vector<int32_t>& ids) = 0;
  virtual std::vector<int32_t> encode(const std::string& text) = 0;  // no special tokens added
  virtual std::string describe() const = 0;           // where it came from, for the log
};

// What making the dataset found.
struct DatasetStats {
  // Prompt tokens more (+) or fewer (-) than asked, summed: decoding and re-encoding cannot always
  // hit the length exactly (vLLM warns of the same).
  int64_t token_mismatch = 0;
};

// Random / sharegpt-like prompts need a vocabulary: `vocab`, or token ids from [0,
// opt.vocab_size) when opt.vocab_size > 0 (then `vocab` is not used). JSONL needs neither.
std::vector<BenchRequest> make_dataset(const DatasetOptions& opt, PromptVocabulary* vocab = nullptr,
                                       DatasetStats* stats = nullptr);

}  // namespace pagoda::bench
