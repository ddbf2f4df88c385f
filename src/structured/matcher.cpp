#include "structured/matcher.h"

#include <algorithm>
#include <chrono>
#include <queue>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::structured {
namespace {
constexpr size_t kMaskCacheEntries = 512;  // × vocab/8 bytes (19 KB at 151,936 tokens)
constexpr size_t kClassEntries = 1024;     // token classes a grammar keeps (each about 19 KB)
constexpr size_t kMaxShapeBytes = 64u << 10;  // larger shapes are not shared across grammars

// Allows the tokens token_ids()[begin, end) (those whose bytes end at one trie node).
void allow_node_tokens(const std::vector<int32_t>& ids, uint32_t begin, uint32_t end, TokenMask& mask) {
  for (uint32_t t = begin; t < end; ++t) mask_allow(mask, static_cast<size_t>(ids[t]));
}
}

GrammarRuntime::GrammarRuntime(Grammar g, std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> eos_ids,
                               ParserBudget budget)
    : automaton_(std::move(g), budget), trie_(std::move(trie)), eos_ids_(std::move(eos_ids)), dfa_(automaton_) {
  per_depth_.resize(trie_->max_depth() + 1);
  update_bytes();
}

void GrammarRuntime::update_bytes() {
  const Grammar& g = automaton_.grammar();
  size_t n = sizeof(*this) + automaton_.bytes() + dfa_.bytes() + g.elements.size() * sizeof(Element) +
             g.byte_sets.size() * sizeof(ByteSet) + g.rule_start.size() * sizeof(uint32_t);
  for (const std::string& name : g.rule_names) n += sizeof(std::string) + name.size();
  const size_t mask_bytes = (static_cast<size_t>(trie_->vocab_size()) + 63) / 64 * 8;
  // Constant time (it runs after every call): a cached mask's state is taken as a few stacks, and
  // classes, shared with the trie's cross-grammar cache, count in full here (an upper bound).
  n += cache_.size() * (mask_bytes + 160) + classes_bytes_;
  bytes_.store(n, std::memory_order_relaxed);
}

// Called with mu_ held.
template <class F>
auto GrammarRuntime::guarded(F&& f) -> decltype(f()) {
  if (!failure_.empty()) throw Error(failure_);
  try {
    return f();
  } catch (const Error& e) {
    spend(e.what());
    throw;
  } catch (const std::bad_alloc&) {
    // A real memory limit hit while this grammar grew: its memory goes back at once (not kept
    // for reuse, close to the limit) and the requests using it end, as for a budget error.
    spend("the grammar's parser state ran out of memory (std::bad_alloc)");
    throw;
  }
}

void GrammarRuntime::spend(const std::string& why) {
  // The memory first: after a bad_alloc, the message may need some of it.
  automaton_.release();
  dfa_.clear();
  cache_.clear();
  cache_order_.clear();
  classes_.clear();
  classes_bytes_ = 0;
  for (State& s : per_depth_) State().swap(s);
  failure_ = why;
  update_bytes();
}

std::string GrammarRuntime::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

State GrammarRuntime::initial() {
  std::lock_guard lock(mu_);
  return guarded([&] {
    State s = automaton_.initial();
    update_bytes();
    return s;
  });
}

void GrammarRuntime::probe(size_t max_work, double max_ms) {
  std::lock_guard lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(max_ms);
  guarded([&] {
    struct Item {
      size_t size;
      State state;
      std::string prefix;  // for the error: the text that reached it
      bool operator<(const Item& o) const { return size < o.size; }
    };
    std::priority_queue<Item> queue;
    std::unordered_set<State, StateHash> seen;
    State start = automaton_.initial();
    seen.insert(start);
    queue.push({start.size(), std::move(start), ""});
    State next;
    for (size_t work = 0; !queue.empty() && work < max_work && std::chrono::steady_clock::now() < deadline;) {
      const Item item = queue.top();
      queue.pop();
      for (int b = 0; b < 256; ++b) {
        work += item.state.size();
        try {
          automaton_.step(item.state, static_cast<uint8_t>(b), next);
        } catch (const Error& e) {
          std::string shown = item.prefix + static_cast<char>(b);
          if (shown.size() > 48) shown = "..." + shown.substr(shown.size() - 45);
          throw Error(std::string(e.what()) + "; seen after the text " +
                      nlohmann::json(shown).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
        }
        if (next.empty() || !seen.insert(next).second) continue;
        queue.push({next.size(), next, item.prefix.size() < 256 ? item.prefix + static_cast<char>(b) : item.prefix});
      }
    }
    update_bytes();
  });
}

State GrammarRuntime::advance(const State& s, int32_t token) {
  std::lock_guard lock(mu_);
  return guarded([&]() -> State {
    struct Weigh {  // however the walk ends
      GrammarRuntime& rt;
      ~Weigh() { rt.update_bytes(); }
    } weigh{*this};
    State cur = s, next;
    for (char c : trie_->bytes(token)) {
      automaton_.step(cur, static_cast<uint8_t>(c), next);
      if (next.empty()) return {};
      cur.swap(next);
    }
    if (trie_->bytes(token).empty()) return {};
    return cur;
  });
}

void GrammarRuntime::fill_mask(const State& s, TokenMask& mask, int64_t tokens_left) {
  std::unique_lock lock(mu_);
  guarded([&] { fill_mask_locked(s, mask, tokens_left, lock); });
}

void GrammarRuntime::fill_mask_locked(const State& s, TokenMask& mask, int64_t tokens_left,
                                      std::unique_lock<std::mutex>& lock) {
  auto it = cache_.find(s);
  if (it == cache_.end()) {
    auto fresh = std::make_shared<CachedMask>();
    fresh->max_after = token_classes_ ? compute_mask_fast(s, fresh->mask) : compute_mask(s, fresh->mask, INT64_MAX);
    if (cache_.size() >= kMaskCacheEntries) {
      cache_.erase(cache_order_.front());
      cache_order_.pop_front();
    }
    it = cache_.emplace(s, std::move(fresh)).first;
    cache_order_.push_back(s);
    update_bytes();
  }
  const std::shared_ptr<const CachedMask> cached = it->second;
  // After this token, tokens_left - 1 remain: the completion's bytes and the EOS.
  const int64_t limit = tokens_left == INT64_MAX ? INT64_MAX : tokens_left - 2;
  if (static_cast<int64_t>(cached->max_after) <= limit) {
    lock.unlock();  // the copy needs no lock: rows of one grammar copy in parallel
    mask = cached->mask;
    return;
  }
  if (token_classes_) {
    compute_mask_dfa(s, mask, limit);
  } else {
    compute_mask(s, mask, limit);
  }
  if (std::none_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; })) mask = cached->mask;
  update_bytes();  // the lazy DFA grew
}

uint32_t GrammarRuntime::compute_mask_dfa(const State& s, TokenMask& mask, int64_t limit) {
  mask.assign((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  const auto& nodes = trie_->nodes();
  const auto& ids = trie_->token_ids();
  dfa_.bound();
  at_.resize(trie_->max_depth() + 1);
  at_[0] = dfa_.intern(s);
  uint32_t max_after = 0;
  for (size_t i = 0; i < nodes.size();) {
    const TokenTrie::Node& node = nodes[i];
    const uint32_t q = dfa_.next(at_[node.depth - 1], node.byte);
    if (q == StateDfa::kDead) {
      i = node.subtree_end;
      continue;
    }
    at_[node.depth] = q;
    if (node.tokens_begin < node.tokens_end) {
      const uint32_t after = dfa_.shortest(q);
      max_after = std::max(max_after, after);
      if (static_cast<int64_t>(after) <= limit) allow_node_tokens(ids, node.tokens_begin, node.tokens_end, mask);
    }
    ++i;
  }
  allow_eos(s, mask);
  return max_after;
}

void GrammarRuntime::reference_mask(const State& s, TokenMask& mask, int64_t tokens_left) {
  std::lock_guard lock(mu_);
  guarded([&] { reference_mask_locked(s, mask, tokens_left); });
}

void GrammarRuntime::reference_mask_locked(const State& s, TokenMask& mask, int64_t tokens_left) {
  TokenMask full;
  const uint32_t max_after = compute_mask(s, full, INT64_MAX);
  const int64_t limit = tokens_left == INT64_MAX ? INT64_MAX : tokens_left - 2;
  if (static_cast<int64_t>(max_after) <= limit) {
    mask = std::move(full);
    return;
  }
  compute_mask(s, mask, limit);
  if (std::none_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; })) mask = std::move(full);
}

const TokenClasses& GrammarRuntime::classes_of(StackId hole_stack) {
  auto it = classes_.find(hole_stack);
  if (it != classes_.end()) return *it->second;
  if (classes_.size() >= kClassEntries) {
    classes_.clear();
    classes_bytes_ = 0;
  }
  const std::string shape = automaton_.shape(hole_stack, kMaxShapeBytes);
  std::shared_ptr<const TokenClasses> c = shape.empty() ? nullptr : trie_->class_cache().find(shape);
  if (!c) {
    c = std::make_shared<const TokenClasses>(classify_tokens(dfa_, hole_stack, *trie_));
    if (!shape.empty()) trie_->class_cache().insert(shape, c);
  }
  classes_bytes_ += c->bytes() + 64;
  return *classes_.emplace(hole_stack, std::move(c)).first->second;
}

uint32_t GrammarRuntime::compute_mask_fast(const State& s, TokenMask& mask) {
  mask.assign((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  candidates_.clear();
  uint32_t max_after = 0;
  for (StackId st : s) {
    if (st == 0) continue;  // complete: EOS, below
    StackId rest = 0;
    const TokenClasses& c = classes_of(automaton_.hole_stack(st, kClassDepth, &rest));
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= c.accepted[w];
    if (c.any_accepted)
      max_after = std::max(max_after, std::min(Automaton::kNoCompletion, c.max_after + automaton_.shortest_stack(rest)));
    candidates_.insert(candidates_.end(), c.uncertain.begin(), c.uncertain.end());
  }
  if (!candidates_.empty()) {
    if (s.size() > 1) {
      std::sort(candidates_.begin(), candidates_.end());
      candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
    }
    walk_candidates(s, candidates_, mask, max_after);
  }
  allow_eos(s, mask);
  return max_after;
}

void GrammarRuntime::walk_candidates(const State& s, const std::vector<uint32_t>& candidates, TokenMask& mask,
                                     uint32_t& max_after) {
  // The trie walk from the real state, entering only subtrees that hold a candidate (candidates
  // are in the trie's token order, which is preorder).
  const auto& nodes = trie_->nodes();
  const auto& ids = trie_->token_ids();
  dfa_.bound();
  at_.resize(trie_->max_depth() + 1);
  at_[0] = dfa_.intern(s);
  size_t next = 0;  // the first candidate not yet passed
  for (size_t i = 0; i < nodes.size();) {
    while (next < candidates.size() && candidates[next] < trie_->tokens_before(i)) ++next;
    if (next == candidates.size()) break;
    const TokenTrie::Node& node = nodes[i];
    if (candidates[next] >= trie_->tokens_before(node.subtree_end)) {
      i = node.subtree_end;
      continue;
    }
    const uint32_t q = dfa_.next(at_[node.depth - 1], node.byte);
    if (q == StateDfa::kDead) {
      i = node.subtree_end;
      continue;
    }
    at_[node.depth] = q;
    if (candidates[next] < node.tokens_end && node.tokens_begin < node.tokens_end) {
      max_after = std::max(max_after, dfa_.shortest(q));
      for (; next < candidates.size() && candidates[next] < node.tokens_end; ++next)
        mask_allow(mask, static_cast<size_t>(ids[candidates[next]]));
    }
    ++i;
  }
}

void GrammarRuntime::allow_eos(const State& s, TokenMask& mask) const {
  if (!Automaton::accepting(s)) return;
  for (int32_t id : eos_ids_)
    if (id >= 0 && id < trie_->vocab_size()) mask_allow(mask, static_cast<size_t>(id));
}

uint32_t GrammarRuntime::compute_mask(const State& s, TokenMask& mask, int64_t limit) {
  mask.assign((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  const auto& nodes = trie_->nodes();
  const auto& ids = trie_->token_ids();
  const std::vector<StackId>& pool = automaton_.pool();
  per_depth_[0] = s;
  uint32_t max_after = 0;
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
      automaton_.check_state_size(cur.size());
    }
    if (node.tokens_begin < node.tokens_end) {
      const uint32_t after = automaton_.shortest(cur);
      max_after = std::max(max_after, after);
      if (static_cast<int64_t>(after) <= limit) allow_node_tokens(ids, node.tokens_begin, node.tokens_end, mask);
    }
    ++i;
  }
  allow_eos(s, mask);
  return max_after;
}

Matcher::Matcher(std::shared_ptr<GrammarRuntime> runtime) : runtime_(std::move(runtime)) {
  try {
    state_ = runtime_->initial();
  } catch (const Error& e) {
    error_ = e.what();
  }
}

bool Matcher::accept(int32_t token) {
  if (!error_.empty()) throw Error(error_);
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

void Matcher::fill_mask(TokenMask& mask, int64_t tokens_left) const {
  if (!error_.empty()) throw Error(error_);
  if (finished_) {
    mask.assign((static_cast<size_t>(runtime_->vocab_size()) + 63) / 64, 0);
    return;
  }
  runtime_->fill_mask(state_, mask, tokens_left);
}

void Matcher::reference_mask(TokenMask& mask, int64_t tokens_left) const {
  if (finished_) {
    mask.assign((static_cast<size_t>(runtime_->vocab_size()) + 63) / 64, 0);
    return;
  }
  runtime_->reference_mask(state_, mask, tokens_left);
}

}  // namespace pagoda::structured
