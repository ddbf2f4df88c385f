#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "engine/sequence.h"

namespace pagoda {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

double uniform_from(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

int32_t argmax(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

std::vector<float> log_softmax(std::span<const float> row) {
  const float m = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - m);
  const double log_z = static_cast<double>(m) + std::log(sum);
  std::vector<float> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = static_cast<float>(static_cast<double>(row[i]) - log_z);
  return out;
}

void mask_stop_tokens_for_min_tokens(std::span<float> row, const SamplingParams& p,
                                     std::span<const int32_t> eos_token_ids, int32_t num_output_tokens) {
  if (num_output_tokens >= p.min_tokens) return;
  const auto mask = [&](int32_t id) {
    if (id >= 0 && static_cast<size_t>(id) < row.size()) row[static_cast<size_t>(id)] = kNegInf;
  };
  if (!p.ignore_eos) {
    for (int32_t id : eos_token_ids) mask(id);
  }
  for (int32_t id : p.stop_token_ids) mask(id);
}

void apply_penalties(std::span<float> row, const SamplingParams& p, std::span<const int32_t> prompt,
                     std::span<const int32_t> output) {
  const auto in_vocab = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < row.size(); };
  if (p.repetition_penalty != 1.0) {
    const auto r = static_cast<float>(p.repetition_penalty);
    std::vector<uint8_t> seen(row.size(), 0);
    for (auto history : {prompt, output}) {
      for (int32_t id : history) {
        if (!in_vocab(id) || seen[static_cast<size_t>(id)]) continue;
        seen[static_cast<size_t>(id)] = 1;
        float& v = row[static_cast<size_t>(id)];
        v = v > 0.0f ? v / r : v * r;
      }
    }
  }
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t id : output) {
      if (in_vocab(id)) ++counts[id];
    }
    for (const auto& [id, count] : counts) {
      row[static_cast<size_t>(id)] -= static_cast<float>(p.frequency_penalty * count + p.presence_penalty);
    }
  }
}

void apply_token_mask(std::span<float> row, const std::vector<uint64_t>& allowed) {
  for (size_t i = 0; i < row.size(); ++i) {
    const size_t w = i >> 6;
    if (w >= allowed.size() || !((allowed[w] >> (i & 63)) & 1)) row[i] = kNegInf;
  }
}

void apply_logit_bias(std::span<float> row, const SamplingParams& p) {
  if (!p.logit_bias) return;
  for (const auto& [id, bias] : *p.logit_bias)
    if (id >= 0 && static_cast<size_t>(id) < row.size()) row[static_cast<size_t>(id)] += bias;
}

void apply_allowed_token_ids(std::span<float> row, const SamplingParams& p) {
  if (p.allowed_token_ids.empty()) return;
  const std::vector<int32_t>& allowed = p.allowed_token_ids.list();  // sorted
  size_t next = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    while (next < allowed.size() && static_cast<size_t>(allowed[next]) < i) ++next;
    if (next == allowed.size() || static_cast<size_t>(allowed[next]) != i) row[i] = kNegInf;
  }
}

void apply_bad_words(std::span<float> row, const SamplingParams& p, std::span<const int32_t> output) {
  if (!p.bad_words_token_ids) return;
  for (const std::vector<int32_t>& word : *p.bad_words_token_ids) {
    if (word.empty() || word.size() > output.size() + 1) continue;
    const size_t prefix = word.size() - 1;
    if (!std::equal(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(prefix), output.end() - static_cast<std::ptrdiff_t>(prefix)))
      continue;
    const int32_t last = word.back();
    if (last >= 0 && static_cast<size_t>(last) < row.size()) row[static_cast<size_t>(last)] = kNegInf;
  }
}

bool has_token_masks(const SamplingParams& p) {
  return !p.allowed_token_ids.empty() || (p.bad_words_token_ids && !p.bad_words_token_ids->empty());
}

void apply_temperature(std::span<float> row, double temperature) {
  if (temperature == 1.0) return;
  const auto inv = static_cast<float>(1.0 / temperature);
  for (float& v : row) v *= inv;
}

void apply_top_k(std::span<float> row, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= row.size()) return;
  std::vector<float> copy(row.begin(), row.end());
  std::nth_element(copy.begin(), copy.begin() + (k - 1), copy.end(), std::greater<float>());
  const float threshold = copy[static_cast<size_t>(k - 1)];
  for (float& v : row) {
    if (v < threshold) v = kNegInf;
  }
}

void apply_top_p(std::span<float> row, double p) {
  if (p >= 1.0) return;
  std::vector<int32_t> cand;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] != kNegInf) cand.push_back(static_cast<int32_t>(i));
  }
  if (cand.empty()) return;
  const auto before = [&](int32_t a, int32_t b) {
    const float la = row[static_cast<size_t>(a)], lb = row[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  const float m = *std::max_element(row.begin(), row.end());
  double z = 0.0;
  for (int32_t i : cand) z += std::exp(static_cast<double>(row[static_cast<size_t>(i)]) - m);
  // Keep a token while the mass ranked above it is below p: the smallest top set reaching p.
  // The nucleus is usually a small part of the vocabulary: sort a growing head, not everything.
  size_t head = std::min<size_t>(256, cand.size());
  size_t keep = cand.size();
  for (;;) {
    std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(head - 1), cand.end(), before);
    std::sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(head), before);
    double above = 0.0;
    size_t i = 0;
    for (; i < head && above < p; ++i) above += std::exp(static_cast<double>(row[static_cast<size_t>(cand[i])]) - m) / z;
    if (above >= p) {
      keep = i;
      break;
    }
    if (head == cand.size()) break;  // rounding: the whole mass stays just under p; keep all
    head = std::min(head * 4, cand.size());
  }
  for (size_t i = keep; i < cand.size(); ++i) row[static_cast<size_t>(cand[i])] = kNegInf;
}

void apply_min_p(std::span<float> row, double min_p) {
  if (min_p <= 0.0) return;
  const float m = *std::max_element(row.begin(), row.end());
  for (float& v : row) {
    // prob / max_prob = exp(v - m)
    if (v != kNegInf && std::exp(static_cast<double>(v) - m) < min_p) v = kNegInf;
  }
}

int32_t sample_from_logits(std::span<const float> row, double u) {
  const float m = *std::max_element(row.begin(), row.end());
  if (m == kNegInf) return 0;  // everything masked: nothing to draw from
  double z = 0.0;
  for (float v : row) z += std::exp(static_cast<double>(v) - m);
  const double target = u * z;
  double cum = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] == kNegInf) continue;
    cum += std::exp(static_cast<double>(row[i]) - m);
    last = static_cast<int32_t>(i);
    if (cum > target) return last;
  }
  return last;  // rounding left target at the very top
}

Sampler::Sampler(std::vector<int32_t> eos_token_ids) : eos_token_ids_(std::move(eos_token_ids)) {}

bool Sampler::needs_logits(const Sequence& seq) const {
  const SamplingParams& p = seq.params();
  // A grammar alone does not: its mask is applied on the device before the argmax.
  if (!p.greedy() || p.logprobs) return true;
  if (p.repetition_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) return true;
  if (p.logit_bias && !p.logit_bias->empty()) return true;
  if (has_token_masks(p)) return true;
  // mask_stop_tokens_for_min_tokens would change the row.
  const bool masks = !p.stop_token_ids.empty() || (!p.ignore_eos && !eos_token_ids_.empty());
  return masks && static_cast<int32_t>(seq.output().size()) < p.min_tokens;
}

void Sampler::process_row(std::vector<float>& row, const SamplingParams& params, std::span<const int32_t> prompt,
                          std::span<const int32_t> output) const {
  // The request's own masks first (vLLM applies allowed_token_ids and bad_words before the others).
  apply_allowed_token_ids(row, params);
  apply_bad_words(row, params, output);
  mask_stop_tokens_for_min_tokens(row, params, eos_token_ids_, static_cast<int32_t>(output.size()));
  apply_logit_bias(row, params);
  apply_penalties(row, params, prompt, output);
  if (params.greedy()) return;  // temperature, top-k, top-p and min-p all keep the largest logit
  apply_temperature(row, params.temperature);
  if (params.top_k_enabled()) apply_top_k(row, params.top_k);
  apply_top_p(row, params.top_p);
  apply_min_p(row, params.min_p);
}

namespace {

void fill_logprobs(SampleResult& result, std::span<const float> logits, const SamplingParams& params) {
  if (!params.logprobs) return;
  const std::vector<float> lp = log_softmax(logits);
  result.logprob = lp[static_cast<size_t>(result.token)];
  const auto n = std::min<size_t>(static_cast<size_t>(*params.logprobs), lp.size());
  if (n == 0) return;
  std::vector<int32_t> idx(lp.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), [&](int32_t a, int32_t b) {
    const float la = lp[static_cast<size_t>(a)], lb = lp[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (size_t i = 0; i < n; ++i) result.top_logprobs.emplace_back(idx[i], lp[static_cast<size_t>(idx[i])]);
}

}  // namespace

int32_t masked_argmax(std::span<const float> row, const std::vector<uint64_t>& allowed) {
  int32_t best = -1;
  float best_value = kNegInf;
  const size_t words = std::min(allowed.size(), (row.size() + 63) / 64);
  for (size_t w = 0; w < words; ++w) {
    const size_t base = w * 64;
    if (allowed[w] == ~uint64_t{0} && base + 64 <= row.size()) {
      for (size_t i = base; i < base + 64; ++i) {
        const float v = row[i];
        if (v != v) return -1;
        if (v > best_value) best_value = v, best = static_cast<int32_t>(i);
      }
      continue;
    }
    for (uint64_t bits = allowed[w]; bits; bits &= bits - 1) {
      const size_t i = base + static_cast<size_t>(__builtin_ctzll(bits));
      if (i >= row.size()) break;
      const float v = row[i];
      if (v != v) return -1;
      if (v > best_value) best_value = v, best = static_cast<int32_t>(i);
    }
  }
  return best_value > kNegInf ? best : -1;
}

bool Sampler::plain_greedy(const SamplingParams& p, size_t num_output_tokens) const {
  if (!p.greedy() || p.logprobs) return false;
  if (p.repetition_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) return false;
  if (p.logit_bias && !p.logit_bias->empty()) return false;
  if (has_token_masks(p)) return false;
  const bool masks = !p.stop_token_ids.empty() || (!p.ignore_eos && !eos_token_ids_.empty());
  return !(masks && static_cast<int32_t>(num_output_tokens) < p.min_tokens);
}

SampleResult Sampler::sample_row(std::span<const float> logits, const SamplingParams& params,
                                 std::span<const int32_t> prompt, std::span<const int32_t> output,
                                 std::mt19937_64& rng, const std::vector<uint64_t>* allowed) const {
  if (logits.empty()) throw std::logic_error("Sampler: empty logits row");
  // Greedy under a grammar with nothing else to apply: the argmax over the allowed tokens, read
  // in place (no copy of the row, no pass over the masked-out part).
  if (allowed && plain_greedy(params, output.size()))
    if (const int32_t t = masked_argmax(logits, *allowed); t >= 0) return SampleResult{t, 0.0f, {}};
  std::vector<float> row(logits.begin(), logits.end());
  if (allowed) apply_token_mask(row, *allowed);
  process_row(row, params, prompt, output);
  SampleResult result;
  result.token = params.greedy() ? argmax(row) : sample_from_logits(row, uniform_from(rng));
  fill_logprobs(result, logits, params);
  return result;
}

std::vector<SampleResult> Sampler::sample_with_drafts(std::span<const float> logits, size_t vocab,
                                                      std::span<const int32_t> drafts, const SamplingParams& params,
                                                      std::span<const int32_t> prompt,
                                                      std::span<const int32_t> output, std::mt19937_64& rng) const {
  if (vocab == 0 || logits.size() != (drafts.size() + 1) * vocab)
    throw std::logic_error("Sampler::sample_with_drafts: logits size does not match (drafts + 1) × vocab");
  // The history grows with each accepted draft: penalties and min_tokens see it as the plain
  // sampler would have, one token at a time.
  std::vector<int32_t> history(output.begin(), output.end());
  std::vector<SampleResult> out;
  std::vector<float> row;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const std::span<const float> raw = logits.subspan(j * vocab, vocab);
    row.assign(raw.begin(), raw.end());
    process_row(row, params, prompt, history);
    SampleResult& r = out.emplace_back();
    const bool has_draft = j < drafts.size();
    const int32_t d = has_draft ? drafts[j] : -1;
    if (params.greedy()) {
      r.token = argmax(row);
    } else if (has_draft && d >= 0 && static_cast<size_t>(d) < vocab &&
               uniform_from(rng) < probability_of(row, d)) {
      // A one-hot draft q is accepted with probability min(1, p(d) / q(d)) = p(d) ...
      r.token = d;
    } else {
      // ... and on rejection the token comes from the residual max(0, p - q), normalised: p
      // without d. Accept-or-residual together draw exactly from p (Leviathan et al. 2023).
      if (has_draft && d >= 0 && static_cast<size_t>(d) < vocab) row[static_cast<size_t>(d)] = kNegInf;
      r.token = sample_from_logits(row, uniform_from(rng));
    }
    fill_logprobs(r, raw, params);
    if (!has_draft || r.token != d) break;
    history.push_back(d);
  }
  return out;
}

double probability_of(std::span<const float> row, int32_t token) {
  const float m = *std::max_element(row.begin(), row.end());
  const float v = row[static_cast<size_t>(token)];
  if (m == kNegInf || v == kNegInf) return 0.0;
  double z = 0.0;
  for (float x : row) z += std::exp(static_cast<double>(x) - m);
  return std::exp(static_cast<double>(v) - m) / z;
}

std::vector<SampleResult> Sampler::sample(std::span<const float> logits, int64_t vocab,
                                          std::span<Sequence* const> seqs) const {
  if (vocab <= 0 || logits.size() != seqs.size() * static_cast<size_t>(vocab)) {
    throw std::logic_error("Sampler::sample: logits size does not match rows × vocab");
  }
  std::vector<SampleResult> out;
  out.reserve(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence* seq = seqs[i];
    out.push_back(sample_row(logits.subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab)),
                             seq->params(), seq->prompt(), seq->output(), seq->rng(),
                             seq->matcher ? &seq->grammar_mask : nullptr));
  }
  return out;
}

}  // namespace pagoda
