#include "kv/kv_cache_manager.h"

#include <stdexcept>
#include <string>

#include "core/error.h"

namespace pagoda {

namespace {
int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }
const std::vector<int32_t> kNoBlocks;
}  // namespace

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size)
    : pool_(num_blocks, block_size) {}

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
  const int32_t need = blocks_needed(seq, num_new_tokens);
  if (!pool_.can_allocate(need)) return false;
  Table& t = tables_[seq];
  const bool ok = pool_.allocate(need, t.blocks);
  if (!ok) throw std::logic_error("KvCacheManager: allocation failed after can_allocate");
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

void KvCacheManager::free(int64_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  pool_.free(it->second.blocks);
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
