#include "engine/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pagoda {

int64_t StopStrings::total_bytes() const {
  int64_t n = 0;
  for (const std::string& s : list()) n += static_cast<int64_t>(s.size());
  return n;
}

void StopStrings::push_back(std::string s) {
  List copy = list();
  copy.push_back(std::move(s));
  assign(std::move(copy));
}

StopStrings::const_iterator StopStrings::insert(const_iterator, std::string s) {
  push_back(std::move(s));
  return std::prev(end());
}

void StopStrings::assign(List strings) {
  if (strings.empty()) list_.reset();
  else list_ = std::make_shared<const List>(std::move(strings));
}

void StopStrings::erase(const_iterator first, const_iterator last) {
  List kept(begin(), first);
  kept.insert(kept.end(), last, end());
  assign(std::move(kept));
}

const StopStrings::List& StopStrings::empty_list() {
  static const List empty;
  return empty;
}

bool TokenIdSet::contains(int32_t id) const { return std::binary_search(begin(), end(), id); }

void TokenIdSet::push_back(int32_t id) {
  if (contains(id)) return;
  List copy = list();
  copy.push_back(id);
  assign(std::move(copy));
}

TokenIdSet::const_iterator TokenIdSet::insert(const_iterator, int32_t id) {
  push_back(id);
  return std::lower_bound(begin(), end(), id);
}

void TokenIdSet::assign(List ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) list_.reset();
  else list_ = std::make_shared<const List>(std::move(ids));
}

void TokenIdSet::erase(const_iterator first, const_iterator last) {
  List kept(begin(), first);
  kept.insert(kept.end(), last, end());
  assign(std::move(kept));
}

const TokenIdSet::List& TokenIdSet::empty_list() {
  static const List empty;
  return empty;
}

namespace {
template <typename T>
std::string fmt(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

std::optional<std::string> validate_sampling_params(const SamplingParams& p) {
  if (p.n < 1) return "n must be at least 1, got " + fmt(p.n) + ".";
  if (!std::isfinite(p.presence_penalty) || p.presence_penalty < -2.0 || p.presence_penalty > 2.0) {
    return "presence_penalty must be in [-2, 2], got " + fmt(p.presence_penalty) + ".";
  }
  if (!std::isfinite(p.frequency_penalty) || p.frequency_penalty < -2.0 || p.frequency_penalty > 2.0) {
    return "frequency_penalty must be in [-2, 2], got " + fmt(p.frequency_penalty) + ".";
  }
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0.0) {
    return "repetition_penalty must be greater than zero, got " + fmt(p.repetition_penalty) + ".";
  }
  if (!std::isfinite(p.temperature) || p.temperature < 0.0) {
    return "temperature must be non-negative, got " + fmt(p.temperature) + ".";
  }
  if (!std::isfinite(p.top_p) || p.top_p <= 0.0 || p.top_p > 1.0) {
    return "top_p must be in (0, 1], got " + fmt(p.top_p) + ".";
  }
  if (p.top_k < -1) {
    return "top_k must be 0 or -1 (disable), or at least 1, got " + fmt(p.top_k) + ".";
  }
  if (!std::isfinite(p.min_p) || p.min_p < 0.0 || p.min_p > 1.0) {
    return "min_p must be in [0, 1], got " + fmt(p.min_p) + ".";
  }
  if (p.max_tokens && *p.max_tokens < 1) {
    return "max_tokens must be at least 1, got " + fmt(*p.max_tokens) + ".";
  }
  if (p.min_tokens < 0) return "min_tokens must be greater than or equal to 0, got " + fmt(p.min_tokens) + ".";
  if (p.max_tokens && p.min_tokens > *p.max_tokens) {
    return "min_tokens must be less than or equal to max_tokens=" + fmt(*p.max_tokens) + ", got " +
           fmt(p.min_tokens) + ".";
  }
  if (p.logprobs && *p.logprobs < 0) return "logprobs must be non-negative, got " + fmt(*p.logprobs) + ".";
  for (int32_t id : p.stop_token_ids) {
    if (id < 0) return "stop_token_ids must be non-negative token ids, got " + fmt(id) + ".";
  }
  if (p.logit_bias) {
    for (const auto& [id, bias] : *p.logit_bias) {
      if (id < 0) return "logit_bias keys must be token ids, got " + fmt(id) + ".";
      if (!std::isfinite(bias) || bias < -100.0f || bias > 100.0f)
        return "logit_bias values must be in [-100, 100], got " + fmt(bias) + ".";
    }
  }
  for (int32_t id : p.allowed_token_ids) {
    if (id < 0) return "allowed_token_ids must be non-negative token ids, got " + fmt(id) + ".";
  }
  if (p.bad_words_token_ids) {
    for (const auto& word : *p.bad_words_token_ids) {
      if (word.empty()) return "bad_words cannot contain an empty word.";
      for (int32_t id : word)
        if (id < 0) return "bad_words must tokenize to non-negative token ids, got " + fmt(id) + ".";
    }
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) return "stop cannot contain an empty string.";
  }
  if (p.prefix_boundaries.size() > 8)
    return "at most 8 prefix boundaries, got " + fmt(static_cast<int64_t>(p.prefix_boundaries.size())) + ".";
  if (p.cache_salt.size() > kMaxCacheSaltBytes)
    return "cache_salt must be at most " + fmt(static_cast<int64_t>(kMaxCacheSaltBytes)) + " bytes, got " +
           fmt(static_cast<int64_t>(p.cache_salt.size())) + ".";
  return std::nullopt;
}

}  // namespace pagoda
