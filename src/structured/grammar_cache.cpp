#include "structured/grammar_cache.h"

#include <vector>

namespace pagoda::structured {

GrammarCache::GrammarCache(size_t max_bytes, size_t max_entries) : max_bytes_(max_bytes), max_entries_(max_entries) {}

std::shared_ptr<GrammarRuntime> GrammarCache::find(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  std::shared_ptr<GrammarRuntime> rt = it->second->second;
  trim_locked();  // it may have grown past the bound itself: the caller still gets it
  return rt;
}

void GrammarCache::insert(const std::string& key, std::shared_ptr<GrammarRuntime> rt) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.emplace_front(key, std::move(rt));
  index_.emplace(lru_.front().first, lru_.begin());
  trim_locked();
}

void GrammarCache::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
}

void GrammarCache::clear() {
  std::lock_guard lock(mu_);
  index_.clear();
  lru_.clear();
}

void GrammarCache::trim() {
  std::lock_guard lock(mu_);
  trim_locked();
}

void GrammarCache::trim_locked() {
  // Weighed once: runtimes in use grow meanwhile.
  std::vector<size_t> weights;
  size_t total = 0;
  for (const Entry& e : lru_) total += weights.emplace_back(weight(e));
  while (!lru_.empty() && (total > max_bytes_ || lru_.size() > max_entries_)) {
    total -= weights.back();
    weights.pop_back();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

void GrammarCache::set_max_bytes(size_t max_bytes) {
  std::lock_guard lock(mu_);
  max_bytes_ = max_bytes;
  trim_locked();
}

size_t GrammarCache::max_bytes() const {
  std::lock_guard lock(mu_);
  return max_bytes_;
}

size_t GrammarCache::bytes() const {
  std::lock_guard lock(mu_);
  size_t total = 0;
  for (const Entry& e : lru_) total += weight(e);
  return total;
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace pagoda::structured
