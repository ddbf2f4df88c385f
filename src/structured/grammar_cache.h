// Compiled grammars kept for reuse by the requests that ask for the same constraint: least
// recently used first out, bounded by entries and by bytes. A runtime grows while requests walk
// it (its automaton's memos, mask and class caches, up to its ParserBudget), so its weight is read
// again (GrammarRuntime::bytes, lock-free) whenever the cache is used, and a grammar past the
// bound on its own is not kept: the requests holding it finish with it and its memory goes back.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "structured/matcher.h"

namespace pagoda::structured {

class GrammarCache {
 public:
  explicit GrammarCache(size_t max_bytes, size_t max_entries = 64);

  // The runtime kept under `key`, now the most recent; null when there is none.
  std::shared_ptr<GrammarRuntime> find(const std::string& key);
  // Keeps `rt` under `key` as the most recent (replacing one there), then evicts past the bounds.
  void insert(const std::string& key, std::shared_ptr<GrammarRuntime> rt);
  void erase(const std::string& key);
  void clear();
  // Evicts the least recent entries until both bounds hold (the runtimes have grown since).
  void trim();
  void set_max_bytes(size_t max_bytes);

  size_t max_bytes() const;
  // What the entries weigh now (their runtimes and keys), and how many there are.
  size_t bytes() const;
  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<GrammarRuntime>>;
  static size_t weight(const Entry& e) { return e.first.size() + e.second->bytes(); }
  void trim_locked();

  mutable std::mutex mu_;
  size_t max_bytes_;
  size_t max_entries_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views of lru_'s keys
};

}  // namespace pagoda::structured
