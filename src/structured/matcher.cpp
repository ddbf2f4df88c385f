#include "structured/matcher.h"

#include <algorithm>

namespace pagoda::structured {
namespace {
constexpr size_t kMaskCacheEntries = 512;  // × vocab/8 bytes (19 KB at 151,936 tokens)
}

GrammarRuntime::GrammarRuntime(Grammar g, std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> eos_ids)
    : automaton_(std::move(g)), trie_(std::move(trie)), eos_ids_(std::move(eos_ids)) {
  per_depth_.resize(trie_->max_depth() + 1);
}

State GrammarRuntime::initial() {
  std::lock_guard lock(mu_);
  return automaton_.initial();
}

State GrammarRuntime::advance(const State& s, int32_t token) {
  std::lock_guard lock(mu_);
  State cur = s, next;
  for (char c : trie_->bytes(token)) {
    automaton_.step(cur, static_cast<uint8_t>(c), next);
    if (next.empty()) return {};
    cur.swap(next);
  }
  if (trie_->bytes(token).empty()) return {};
  return cur;
}

void GrammarRuntime::fill_mask(const State& s, TokenMask& mask) {
  std::lock_guard lock(mu_);
  auto it = cache_.find(s);
  if (it != cache_.end()) {
    mask = it->second;
    return;
  }
  compute_mask(s, mask);
  if (cache_.size() >= kMaskCacheEntries) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  cache_.emplace(s, mask);
  cache_order_.push_back(s);
}

void GrammarRuntime::compute_mask(const State& s, TokenMask& mask) {
  mask.assign((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  const auto& nodes = trie_->nodes();
  const auto& ids = trie_->token_ids();
  const std::vector<StackId>& pool = automaton_.pool();
  per_depth_[0] = s;
  const size_t n = nodes.size();
  for (size_t i = 0; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    const State& parent = per_depth_[node.depth - 1];
    State& cur = per_depth_[node.depth];
    cur.clear();
    for (StackId st : parent) {
      auto [b, e] = automaton_.step_stack(st, node.byte);
      cur.insert(cur.end(), pool.begin() + b, pool.begin() + e);
    }
    if (cur.empty()) {
      i = node.subtree_end;
      continue;
    }
    if (parent.size() > 1) {
      std::sort(cur.begin(), cur.end());
      cur.erase(std::unique(cur.begin(), cur.end()), cur.end());
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
      const auto id = static_cast<size_t>(ids[t]);
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  if (Automaton::accepting(s)) {
    for (int32_t id : eos_ids_) {
      if (id >= 0 && id < trie_->vocab_size()) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
  }
}

Matcher::Matcher(std::shared_ptr<GrammarRuntime> runtime) : runtime_(std::move(runtime)), state_(runtime_->initial()) {}

bool Matcher::accept(int32_t token) {
  if (finished_) return false;
  if (std::find(runtime_->eos_ids().begin(), runtime_->eos_ids().end(), token) != runtime_->eos_ids().end()) {
    if (!accepting()) return false;
    finished_ = true;
    return true;
  }
  State next = runtime_->advance(state_, token);
  if (next.empty()) return false;
  state_ = std::move(next);
  return true;
}

void Matcher::fill_mask(TokenMask& mask) const {
  if (finished_) {
    mask.assign((static_cast<size_t>(runtime_->vocab_size()) + 63) / 64, 0);
    return;
  }
  runtime_->fill_mask(state_, mask);
}

}  // namespace pagoda::structured
