#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "core/fault_injection.h"

namespace pagoda {

namespace {
int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }
const std::vector<int32_t> kNoBlocks;
}  // namespace

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size)
    : pool_(num_blocks, block_size) {}

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                               int32_t num_snapshots, int hash_bits)
    : pool_(num_blocks, block_size) {
  if (enable_prefix_caching) cache_.emplace(num_blocks, block_size, num_snapshots, hash_bits);
}

void KvCacheManager::forget_reused(std::span<const int32_t> fresh) {
  if (!cache_) return;
  for (int32_t b : fresh) cache_->forget(b);
}

int32_t KvCacheManager::blocks_needed_after(std::span<const int32_t> hit, int32_t num_new_tokens) const {
  int32_t taken = 0;
  for (int32_t b : hit) taken += pool_.is_free(b) ? 1 : 0;
  const auto have = static_cast<int32_t>(hit.size());
  const int32_t need = ceil_div(have * block_size() + num_new_tokens, block_size()) - have;
  return taken + (need > 0 ? need : 0);
}

void KvCacheManager::adopt_prefix(int64_t seq, std::span<const int32_t> hit) {
  if (hit.empty()) return;
  if (tables_.count(seq) != 0) throw std::logic_error("KvCacheManager::adopt_prefix: the sequence has blocks");
  Table& t = tables_[seq];
  for (int32_t b : hit) pool_.touch(b);
  t.blocks.assign(hit.begin(), hit.end());
  t.chain = t.blocks;
  t.num_tokens = static_cast<int32_t>(hit.size()) * block_size();
}

void KvCacheManager::cache_full_blocks(int64_t seq, std::span<const int32_t> tokens,
                                       std::span<const uint64_t> hashes, const std::string& salt,
                                       int32_t num_computed) {
  if (!cache_) return;
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  Table& t = it->second;
  const auto full = static_cast<size_t>(std::min(num_computed, t.num_tokens) / block_size());
  if (hashes.size() < full) throw std::logic_error("KvCacheManager::cache_full_blocks: block hashes missing");
  for (size_t i = t.chain.size(); i < full; ++i) {
    const int32_t parent = i == 0 ? -1 : t.chain[i - 1];
    t.chain.push_back(cache_->insert(t.blocks[i], parent, static_cast<int32_t>(i), tokens, hashes[i], salt,
                                     i == 0 ? std::nullopt : std::optional<uint64_t>(hashes[i - 1])));
  }
}

int32_t KvCacheManager::cached_block(int64_t seq, int32_t index) const {
  auto it = tables_.find(seq);
  if (it == tables_.end() || index < 0 || static_cast<size_t>(index) >= it->second.chain.size()) return -1;
  return it->second.chain[static_cast<size_t>(index)];
}

int32_t KvCacheManager::num_tokens(int64_t seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? 0 : it->second.num_tokens;
}

const std::vector<int32_t>& KvCacheManager::block_table(int64_t seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? kNoBlocks : it->second.blocks;
}

int32_t KvCacheManager::blocks_needed(int64_t seq, int32_t num_new_tokens) const {
  if (num_new_tokens < 0) throw std::logic_error("KvCacheManager: negative token count");
  auto it = tables_.find(seq);
  const int32_t have_tokens = it == tables_.end() ? 0 : it->second.num_tokens;
  const int32_t have_blocks = it == tables_.end() ? 0 : static_cast<int32_t>(it->second.blocks.size());
  const int32_t need = ceil_div(have_tokens + num_new_tokens, block_size()) - have_blocks;
  return need > 0 ? need : 0;
}

bool KvCacheManager::can_append(int64_t seq, int32_t num_new_tokens) const {
  return pool_.can_allocate(blocks_needed(seq, num_new_tokens));
}

int32_t KvCacheManager::max_appendable(int64_t seq) const {
  auto it = tables_.find(seq);
  int32_t room = 0;
  if (it != tables_.end()) {
    room = static_cast<int32_t>(it->second.blocks.size()) * block_size() - it->second.num_tokens;
  }
  return room + pool_.num_free() * block_size();
}

bool KvCacheManager::append_slots(int64_t seq, int32_t num_new_tokens, std::vector<int32_t>* slots) {
  fault_point(FaultSite::KvAllocation);
  const int32_t need = blocks_needed(seq, num_new_tokens);
  if (!pool_.can_allocate(need)) return false;
  Table& t = tables_[seq];
  const size_t first_new = t.blocks.size();
  const bool ok = pool_.allocate(need, t.blocks);
  if (!ok) throw std::logic_error("KvCacheManager: allocation failed after can_allocate");
  forget_reused(std::span<const int32_t>(t.blocks).subspan(first_new));
  const int32_t bs = block_size();
  if (slots != nullptr) {
    slots->reserve(slots->size() + static_cast<size_t>(num_new_tokens));
    for (int32_t i = t.num_tokens; i < t.num_tokens + num_new_tokens; ++i) {
      slots->push_back(t.blocks[static_cast<size_t>(i / bs)] * bs + i % bs);
    }
  }
  t.num_tokens += num_new_tokens;
  return true;
}

void KvCacheManager::truncate(int64_t seq, int32_t num_tokens) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  Table& t = it->second;
  if (num_tokens > t.num_tokens || num_tokens < static_cast<int32_t>(t.chain.size()) * block_size())
    throw std::logic_error("KvCacheManager::truncate: " + std::to_string(num_tokens) + " tokens is outside [" +
                           std::to_string(t.chain.size() * static_cast<size_t>(block_size())) + ", " +
                           std::to_string(t.num_tokens) + "]");
  t.num_tokens = num_tokens;
  const auto keep = static_cast<size_t>(ceil_div(num_tokens, block_size()));
  if (keep >= t.blocks.size()) return;
  std::vector<int32_t> tail(t.blocks.rbegin(), t.blocks.rend() - static_cast<std::ptrdiff_t>(keep));
  pool_.free(tail);
  t.blocks.resize(keep);
}

void KvCacheManager::free(int64_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  // free() appends to the hot end in order: handing the blocks back last first leaves the first
  // blocks (a shared prefix, the likeliest to be reused) hottest and the tail evicted first.
  std::vector<int32_t> reversed(it->second.blocks.rbegin(), it->second.blocks.rend());
  pool_.free(reversed);
  tables_.erase(it);
}

StateSlotPool::StateSlotPool(int32_t num_slots) {
  check(num_slots >= 0, "state slot pool: num_slots must be >= 0, got " + std::to_string(num_slots));
  in_use_.assign(static_cast<size_t>(num_slots), 0);
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

int32_t StateSlotPool::allocate() {
  if (free_.empty()) return -1;
  const int32_t s = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(s)] = 1;
  return s;
}

void StateSlotPool::free(int32_t slot) {
  if (!in_use(slot)) {
    throw std::logic_error("StateSlotPool::free: slot " + std::to_string(slot) + " is not in use");
  }
  in_use_[static_cast<size_t>(slot)] = 0;
  free_.push_back(slot);
}

bool StateSlotPool::in_use(int32_t slot) const {
  return slot >= 0 && slot < num_slots() && in_use_[static_cast<size_t>(slot)] != 0;
}

}  // namespace pagoda
