#include "structured/automaton.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace pagoda::structured {
namespace {

// Bounds on the automaton's memory for a hostile grammar: distinct stacks and expansion depth.
constexpr size_t kMaxStacks = 4u << 20;
constexpr size_t kMaxPool = 64u << 20;
constexpr int kMaxExpandDepth = 4096;

uint64_t pack(uint32_t begin, size_t len) { return (uint64_t{begin} << 20) | (len + 1); }
std::pair<uint32_t, uint32_t> unpack(uint64_t v) {
  const auto begin = static_cast<uint32_t>(v >> 20);
  return {begin, begin + static_cast<uint32_t>((v & 0xFFFFF) - 1)};
}

}  // namespace

Automaton::Automaton(Grammar g, ParserBudget budget) : g_(std::move(g)), budget_(budget) {
  alt_starts_.resize(g_.rule_start.size());
  for (size_t r = 0; r < g_.rule_start.size(); ++r) {
    uint32_t p = g_.rule_start[r];
    alt_starts_[r].push_back(p);
    for (; g_.elements[p].kind != Element::kEnd; ++p)
      if (g_.elements[p].kind == Element::kAlt) alt_starts_[r].push_back(p + 1);
  }
  compute_suffix_lengths();
  for (int i = 0; i < 2; ++i) {  // the empty stack and the hole
    nodes_.push_back({0, 0});
    expanded_.push_back(0);
    steps_.emplace_back();
  }
}

void Automaton::charge(size_t bytes) {
  bytes_ += bytes;
  if (bytes_ > budget_.max_bytes)
    throw Error("structured output: the grammar's parser needs more than " + std::to_string(budget_.max_bytes >> 20) +
                " MiB of state (" + std::to_string(nodes_.size()) +
                " stacks); it is too ambiguous or too large: make its alternatives differ in their first bytes");
}

void Automaton::check_state_size(size_t n) const {
  if (n > budget_.max_state_stacks)
    throw Error("structured output: the grammar is too ambiguous: the parser would track " + std::to_string(n) +
                " ways to continue the same text (at most " + std::to_string(budget_.max_state_stacks) +
                "); alternatives that share a prefix should part before their nested rules: x ::= \"a\" x \"b\" | "
                "\"a\" x \"c\" tracks 2^n ways after n bytes, x ::= \"a\" x (\"b\" | \"c\") one");
}

void Automaton::release() {
  // Swapped with empties: clear() would keep the capacity.
  std::vector<Node>().swap(nodes_);
  std::unordered_map<uint64_t, StackId>().swap(index_);
  std::vector<uint64_t>().swap(expanded_);
  std::vector<std::unique_ptr<std::array<uint64_t, 256>>>().swap(steps_);
  std::vector<StackId>().swap(pool_);
  std::vector<StackId>().swap(scratch_);
  std::vector<uint32_t>().swap(remaining_);
  std::vector<StackId>().swap(chain_);
  bytes_ = 0;
}

StackId Automaton::push(uint32_t pos, StackId parent) {
  // A position at the end of an alternative is its rule's return: the caller's continuation.
  if (g_.ends_alternative(pos)) return parent;
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = index_.emplace(key, static_cast<StackId>(nodes_.size()));
  if (inserted) {
    check(nodes_.size() < kMaxStacks, "structured output: the grammar's state space is too large "
                                      "(over 4M parser stacks); simplify the schema or grammar");
    // A node, its index entry (a hash node) and its memo slots.
    charge(sizeof(Node) + 48 + sizeof(uint64_t) + sizeof(void*));
    nodes_.push_back({pos, parent});
    expanded_.push_back(0);
    steps_.emplace_back();
  }
  return it->second;
}

void Automaton::expand(StackId s, std::vector<StackId>& out, int depth) {
  check(depth < kMaxExpandDepth, "structured output: grammar nesting deeper than 4096 rules");
  if (s == 0 || s == kHole) {
    out.push_back(s);
    return;
  }
  const Node n = nodes_[s];
  const Element e = g_.elements[n.pos];
  if (e.kind == Element::kBytes) {
    out.push_back(s);
    return;
  }
  const StackId cont = push(n.pos + 1, n.parent);
  for (uint32_t a : alt_starts_[e.value]) expand(push(a, cont), out, depth + 1);
}

std::pair<uint32_t, uint32_t> Automaton::expanded(StackId s) {
  if (expanded_[s] == 0) {
    scratch_.clear();
    expand(s, scratch_, 0);
    std::sort(scratch_.begin(), scratch_.end());
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
    check_state_size(scratch_.size());
    charge(scratch_.size() * sizeof(StackId));
    check(pool_.size() + scratch_.size() < kMaxPool && scratch_.size() < 0xFFFFF,
          "structured output: the grammar's state space is too large; simplify it");
    const auto begin = static_cast<uint32_t>(pool_.size());
    pool_.insert(pool_.end(), scratch_.begin(), scratch_.end());
    expanded_[s] = pack(begin, scratch_.size());
  }
  return unpack(expanded_[s]);
}

State Automaton::initial() {
  State out;
  // The root rule as a one-element call: expand each of its alternatives.
  for (uint32_t a : alt_starts_[g_.root]) {
    auto [b, e] = expanded(push(a, 0));
    out.insert(out.end(), pool_.begin() + b, pool_.begin() + e);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  check_state_size(out.size());
  return out;
}

std::pair<uint32_t, uint32_t> Automaton::step_stack(StackId s, uint8_t b) {
  if (!steps_[s]) {
    charge(sizeof(std::array<uint64_t, 256>));
    steps_[s] = std::make_unique<std::array<uint64_t, 256>>();
  }
  uint64_t& slot = (*steps_[s])[b];
  if (slot == 0) {
    const Node n = nodes_[s];
    if (s == 0 || s == kHole || !g_.byte_sets[g_.elements[n.pos].value].has(b)) {
      slot = pack(0, 0);
    } else {
      auto r = expanded(push(n.pos + 1, n.parent));
      slot = pack(r.first, r.second - r.first);
    }
  }
  return unpack(slot);
}

void Automaton::step(const State& from, uint8_t b, State& out) {
  out.clear();
  for (StackId s : from) {
    auto [begin, end] = step_stack(s, b);
    out.insert(out.end(), pool_.begin() + begin, pool_.begin() + end);
  }
  if (from.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  check_state_size(out.size());
}

// Shortest derivations as a fixpoint (values only fall, each the length of a real derivation, so
// a pass limit leaves safe over-estimates); bounded for a hostile grammar by total work.
void Automaton::compute_suffix_lengths() {
  const size_t n = g_.elements.size();
  suffix_min_.assign(n, kNoCompletion);
  std::vector<uint32_t> rule_min(g_.rule_start.size(), kNoCompletion);
  const size_t max_passes = std::max<size_t>(2, (size_t{1} << 26) / std::max<size_t>(n, 1));
  for (size_t pass = 0; pass < max_passes; ++pass) {
    bool changed = false;
    for (size_t r = 0; r < g_.rule_start.size(); ++r) {
      uint32_t best = kNoCompletion;
      for (uint32_t a : alt_starts_[r]) {
        uint32_t end = a;
        while (!g_.ends_alternative(end)) ++end;
        uint32_t v = 0;
        suffix_min_[end] = 0;
        for (uint32_t p = end; p-- > a;) {
          const Element e = g_.elements[p];
          const uint32_t cost = e.kind == Element::kBytes ? 1 : rule_min[e.value];
          v = std::min(kNoCompletion, v + cost);
          suffix_min_[p] = v;
        }
        best = std::min(best, v);
      }
      if (best < rule_min[r]) {
        rule_min[r] = best;
        changed = true;
      }
    }
    if (!changed) break;
  }
}

uint32_t Automaton::remaining(StackId s) {
  if (remaining_.size() < nodes_.size()) remaining_.resize(nodes_.size(), kNoCompletion + 1);
  remaining_[0] = 0;
  remaining_[kHole] = 0;
  // Up the parent chain to a known stack, then back down (no recursion: stacks can be deep).
  chain_.clear();
  while (remaining_[s] > kNoCompletion) {
    chain_.push_back(s);
    s = nodes_[s].parent;
  }
  uint32_t v = remaining_[s];
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    v = std::min(kNoCompletion, v + suffix_min_[nodes_[*it].pos]);
    remaining_[*it] = v;
  }
  return v;
}

uint32_t Automaton::shortest(const State& s) {
  uint32_t best = kNoCompletion;
  for (StackId id : s) best = std::min(best, remaining(id));
  return best;
}

StackId Automaton::hole_stack(StackId s, int depth, StackId* rest) {
  uint32_t pos[64];
  check(depth > 0 && depth <= 64, "hole_stack: depth out of range");
  StackId cur = s;
  int n = 0;
  for (; n < depth && cur != 0; ++n, cur = nodes_[cur].parent) pos[n] = nodes_[cur].pos;
  *rest = cur;
  if (cur == 0) return s;
  StackId h = kHole;
  while (n-- > 0) h = push(pos[n], h);
  return h;
}

std::string Automaton::shape(StackId s, size_t limit) {
  std::string out;
  std::unordered_map<uint32_t, uint32_t> local;  // rule -> its number in order of first use
  std::vector<uint32_t> queue;
  const auto put_u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  const auto put = [&](Element e) {
    out += static_cast<char>(e.kind);
    if (e.kind == Element::kBytes) {
      out.append(reinterpret_cast<const char*>(g_.byte_sets[e.value].bits.data()), sizeof(ByteSet::bits));
    } else if (e.kind == Element::kRef) {
      auto [it, inserted] = local.emplace(e.value, static_cast<uint32_t>(local.size()));
      if (inserted) queue.push_back(e.value);
      put_u32(it->second);
    }
  };
  for (; s != 0 && s != kHole; s = nodes_[s].parent) {
    out += 'P';
    for (uint32_t p = nodes_[s].pos; !g_.ends_alternative(p); ++p) put(g_.elements[p]);
    if (out.size() > limit) return {};
  }
  out += s == kHole ? 'H' : 'Z';
  for (size_t q = 0; q < queue.size(); ++q) {
    out += 'R';
    for (uint32_t p = g_.rule_start[queue[q]]; g_.elements[p].kind != Element::kEnd; ++p) put(g_.elements[p]);
    if (out.size() > limit) return {};
  }
  return out;
}

}  // namespace pagoda::structured
