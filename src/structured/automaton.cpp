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

Automaton::Automaton(Grammar g) : g_(std::move(g)) {
  alt_starts_.resize(g_.rule_start.size());
  for (size_t r = 0; r < g_.rule_start.size(); ++r) {
    uint32_t p = g_.rule_start[r];
    alt_starts_[r].push_back(p);
    for (; g_.elements[p].kind != Element::kEnd; ++p)
      if (g_.elements[p].kind == Element::kAlt) alt_starts_[r].push_back(p + 1);
  }
  nodes_.push_back({0, 0});  // the empty stack
  expanded_.push_back(0);
  steps_.emplace_back();
}

StackId Automaton::push(uint32_t pos, StackId parent) {
  // A position at the end of an alternative is its rule's return: the caller's continuation.
  if (g_.ends_alternative(pos)) return parent;
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = index_.emplace(key, static_cast<StackId>(nodes_.size()));
  if (inserted) {
    check(nodes_.size() < kMaxStacks, "structured output: the grammar's state space is too large "
                                      "(over 4M parser stacks); simplify the schema or grammar");
    nodes_.push_back({pos, parent});
    expanded_.push_back(0);
    steps_.emplace_back();
  }
  return it->second;
}

void Automaton::expand(StackId s, std::vector<StackId>& out, int depth) {
  check(depth < kMaxExpandDepth, "structured output: grammar nesting deeper than 4096 rules");
  if (s == 0) {
    out.push_back(0);
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
  return out;
}

std::pair<uint32_t, uint32_t> Automaton::step_stack(StackId s, uint8_t b) {
  if (!steps_[s]) steps_[s] = std::make_unique<std::array<uint64_t, 256>>();
  uint64_t& slot = (*steps_[s])[b];
  if (slot == 0) {
    const Node n = nodes_[s];
    if (s == 0 || !g_.byte_sets[g_.elements[n.pos].value].has(b)) {
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
}

}  // namespace pagoda::structured
