#include "bench/serve_dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::bench {

uint64_t BenchRng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double BenchRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int64_t BenchRng::uniform_int(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span);
}

double BenchRng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double BenchRng::exponential(double rate) { return -std::log(1.0 - uniform()) / rate; }

namespace {

// Token ids only, [0, V): no specials known, no text.
class IdVocabulary final : public PromptVocabulary {
 public:
  explicit IdVocabulary(int32_t size) : size_(size) {}
  int32_t size() const override { return size_; }
  bool usable(int32_t) const override { return true; }
  bool has_text() const override { return false; }
  std::string decode(const std::vector<int32_t>&) override { return {}; }
  std::vector<int32_t> encode(const std::string&) override { return {}; }
  std::string describe() const override { return "token ids [0, " + std::to_string(size_) + ")"; }

 private:
  int32_t size_;
};

constexpr int kMaxRetries = 10;  // vLLM's gen_prompt_decode_to_target_len max_retry

// vLLM's random prompt: `len` consecutive allowed ids from `offset + index`, then (with text)
// decode -> encode, padding with random allowed ids or truncating, until the text re-encodes to
// `len` tokens or the retries run out. Returns the mismatch left.
int64_t make_prompt(BenchRequest& r, BenchRng& rng, PromptVocabulary& vocab, const std::vector<int32_t>& allowed,
                    int64_t offset, size_t index) {
  const auto n = static_cast<int64_t>(allowed.size());
  const auto target = static_cast<size_t>(r.prompt_len);
  std::vector<int32_t> ids(target);
  for (size_t k = 0; k < target; ++k)
    ids[k] = allowed[static_cast<size_t>((offset + static_cast<int64_t>(index + k)) % n)];
  if (!vocab.has_text()) {
    r.prompt_ids = std::move(ids);
    return 0;
  }
  std::string text;
  for (int attempt = 0;; ++attempt) {
    text = vocab.decode(ids);
    ids = vocab.encode(text);
    if (ids.size() == target || attempt == kMaxRetries) break;
    if (ids.size() > target) ids.resize(target);
    while (ids.size() < target) ids.push_back(allowed[static_cast<size_t>(rng.uniform_int(0, n - 1))]);
  }
  r.prompt_text = std::move(text);
  r.prompt_len = static_cast<int32_t>(ids.size());
  return static_cast<int64_t>(ids.size()) - static_cast<int64_t>(target);
}

int32_t ranged(BenchRng& rng, int32_t len, double ratio) {
  const auto lo = static_cast<int64_t>(std::floor(len * (1.0 - ratio)));
  const auto hi = static_cast<int64_t>(std::ceil(len * (1.0 + ratio)));
  return static_cast<int32_t>(std::max<int64_t>(1, rng.uniform_int(std::max<int64_t>(1, lo), hi)));
}

int32_t lognormal_len(BenchRng& rng, double median, double sigma, int32_t lo, int32_t hi) {
  const double v = median * std::exp(sigma * rng.normal());
  return static_cast<int32_t>(std::clamp<double>(std::round(v), lo, std::max(lo, hi)));
}

std::vector<BenchRequest> read_jsonl(const DatasetOptions& opt) {
  std::ifstream in(opt.path);
  check(static_cast<bool>(in), "bench serve: cannot read --dataset-path '" + opt.path + "'");
  std::vector<BenchRequest> out;
  int line_no = 0;
  for (std::string line; std::getline(in, line) && static_cast<int32_t>(out.size()) < opt.num_prompts;) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    const std::string where = opt.path + ":" + std::to_string(line_no);
    check(j.is_object(), "bench serve: " + where + " is not a JSON object");
    const nlohmann::json* p = j.contains("prompt") ? &j["prompt"] : j.contains("text") ? &j["text"] : nullptr;
    check(p != nullptr, "bench serve: " + where + " has no \"prompt\" (or \"text\")");
    BenchRequest r;
    if (p->is_string()) {
      r.prompt_text = p->get<std::string>();
    } else {
      check(p->is_array() && !p->empty(), "bench serve: " + where + ": \"prompt\" must be text or token ids");
      for (const auto& t : *p) {
        check(t.is_number_integer(), "bench serve: " + where + ": token ids must be integers");
        r.prompt_ids.push_back(t.get<int32_t>());
      }
      r.prompt_len = static_cast<int32_t>(r.prompt_ids.size());
    }
    r.output_len = opt.output_len;
    for (const char* key : {"output_len", "max_tokens"})
      if (j.contains(key) && j[key].is_number_integer()) r.output_len = j[key].get<int32_t>();
    out.push_back(std::move(r));
  }
  check(!out.empty(), "bench serve: no prompts in '" + opt.path + "'");
  return out;
}

// A piece of prompt: random ids (and their text when the vocabulary has text), appended to `r`.
// Pieces are joined as ids, or as text when there is text (the server tokenizes it again; a piece
// boundary may merge two tokens, which moves a cache hit by at most one block).
int64_t append_piece(BenchRequest& r, int32_t len, BenchRng& rng, PromptVocabulary& vocab,
                     const std::vector<int32_t>& allowed) {
  BenchRequest piece;
  piece.prompt_len = len;
  const int64_t offset = rng.uniform_int(0, static_cast<int64_t>(allowed.size()) - 1);
  const int64_t mismatch = make_prompt(piece, rng, vocab, allowed, offset, 0);
  r.prompt_ids.insert(r.prompt_ids.end(), piece.prompt_ids.begin(), piece.prompt_ids.end());
  r.prompt_text += piece.prompt_text;
  r.prompt_len += piece.prompt_len;
  return mismatch;
}

int64_t prefix_repetition(const DatasetOptions& opt, BenchRng& rng, PromptVocabulary& v,
                          const std::vector<int32_t>& allowed, std::vector<BenchRequest>& out) {
  check(opt.prefix_len > 0 && opt.suffix_len >= 0 && opt.num_prefixes > 0 && opt.prefix_output_len > 0,
        "bench serve: --prefix-repetition-* lengths must be > 0 (the suffix >= 0)");
  int64_t mismatch = 0;
  std::vector<BenchRequest> prefixes(static_cast<size_t>(opt.num_prefixes));
  for (BenchRequest& p : prefixes) mismatch += append_piece(p, opt.prefix_len, rng, v, allowed);
  for (size_t i = 0; i < out.size(); ++i) {
    BenchRequest& r = out[i];
    r = prefixes[i % prefixes.size()];
    if (opt.suffix_len > 0) mismatch += append_piece(r, opt.suffix_len, rng, v, allowed);
    r.output_len = opt.prefix_output_len;
  }
  return mismatch;
}

// Conversations in rounds (every conversation's turn 1, then every turn 2, ...), so that a turn
// waits only for its own previous turn, which was sent a round earlier.
int64_t multi_turn(const DatasetOptions& opt, BenchRng& rng, PromptVocabulary& v, const std::vector<int32_t>& allowed,
                   std::vector<BenchRequest>& out) {
  check(opt.turns > 0 && opt.user_len > 0 && opt.input_len > 0 && opt.output_len > 0,
        "bench serve: --multi-turn-turns, --multi-turn-user-len and the random lengths must be > 0");
  const int32_t conversations = std::max(1, opt.num_prompts / opt.turns);
  out.assign(static_cast<size_t>(conversations) * static_cast<size_t>(opt.turns), {});
  int64_t mismatch = 0;
  for (int32_t t = 0; t < opt.turns; ++t)
    for (int32_t c = 0; c < conversations; ++c) {
      const size_t i = static_cast<size_t>(t) * static_cast<size_t>(conversations) + static_cast<size_t>(c);
      BenchRequest& r = out[i];
      if (t == 0) {
        mismatch += append_piece(r, opt.input_len, rng, v, allowed);
      } else {
        const size_t prev = i - static_cast<size_t>(conversations);
        r = out[prev];
        r.after = static_cast<int32_t>(prev);
        mismatch += append_piece(r, opt.output_len, rng, v, allowed);  // the reply, as the client resends it
        mismatch += append_piece(r, opt.user_len, rng, v, allowed);
      }
      r.output_len = opt.output_len;
    }
  return mismatch;
}

}  // namespace

std::vector<BenchRequest> make_dataset(const DatasetOptions& opt, PromptVocabulary* vocab, DatasetStats* stats) {
  check(opt.num_prompts > 0, "bench serve: --num-prompts must be > 0");
  check(opt.vocab_size >= 0, "bench serve: --vocab-size must be > 0");
  if (opt.name == "jsonl") {
    check(!opt.path.empty(), "bench serve: --dataset-name jsonl needs --dataset-path");
    return read_jsonl(opt);
  }
  BenchRng rng(opt.seed);
  std::vector<BenchRequest> out(static_cast<size_t>(opt.num_prompts));
  if (opt.name == "random") {
    check(opt.input_len > 0 && opt.output_len > 0, "bench serve: --random-input-len/--random-output-len must be > 0");
    check(opt.range_ratio >= 0 && opt.range_ratio < 1, "bench serve: --random-range-ratio must be in [0, 1)");
    for (auto& r : out) {
      r.prompt_len = ranged(rng, opt.input_len, opt.range_ratio);
      r.output_len = ranged(rng, opt.output_len, opt.range_ratio);
    }
  } else if (opt.name == "sharegpt-like") {
    const SharegptLikeShape s;
    for (auto& r : out) {
      r.prompt_len = lognormal_len(rng, s.input_median, s.input_sigma, 4, 1024);
      r.output_len = lognormal_len(rng, s.output_median, s.output_sigma, 4, 2048 - r.prompt_len);
    }
  } else if (opt.name != "prefix_repetition" && opt.name != "multi-turn") {
    throw Error("bench serve: --dataset-name must be random, sharegpt-like, jsonl, prefix_repetition or multi-turn "
                "(got '" + opt.name + "')");
  }

  IdVocabulary ids_only(opt.vocab_size);
  PromptVocabulary& v = opt.vocab_size > 0 || vocab == nullptr ? ids_only : *vocab;
  check(v.size() > 1, "bench serve: random prompts need the model's vocabulary: give --tokenizer DIR or "
                      "--vocab-size N");
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < v.size(); ++id)
    if (v.usable(id)) allowed.push_back(id);
  check(allowed.size() > 1, "bench serve: the vocabulary (" + v.describe() + ") has no ordinary tokens");
  if (opt.name == "prefix_repetition" || opt.name == "multi-turn") {
    const int64_t mismatch = opt.name == "prefix_repetition" ? prefix_repetition(opt, rng, v, allowed, out)
                                                             : multi_turn(opt, rng, v, allowed, out);
    if (stats) stats->token_mismatch = mismatch;
    return out;
  }
  std::vector<int64_t> offsets(out.size());
  for (auto& o : offsets) o = rng.uniform_int(0, static_cast<int64_t>(allowed.size()) - 1);
  int64_t mismatch = 0;
  for (size_t i = 0; i < out.size(); ++i) mismatch += make_prompt(out[i], rng, v, allowed, offsets[i], i);
  if (stats) stats->token_mismatch = mismatch;
  return out;
}

}  // namespace pagoda::bench
