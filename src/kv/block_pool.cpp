#include "kv/block_pool.h"

#include <stdexcept>
#include <string>

#include "core/error.h"

namespace pagoda {

KvBlockPool::KvBlockPool(int32_t num_blocks, int32_t block_size) : block_size_(block_size) {
  check(num_blocks >= 0, "KV block pool: num_blocks must be >= 0, got " + std::to_string(num_blocks));
  check(block_size >= 1, "KV block pool: block_size must be >= 1, got " + std::to_string(block_size));
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  prev_.assign(static_cast<size_t>(num_blocks), -1);
  next_.assign(static_cast<size_t>(num_blocks), -1);
  for (int32_t b = 0; b < num_blocks; ++b) push_hot(b);
}

double KvBlockPool::usage() const {
  if (num_blocks() == 0) return 0.0;
  return static_cast<double>(num_used()) / static_cast<double>(num_blocks());
}

void KvBlockPool::push_hot(int32_t b) {
  const auto i = static_cast<size_t>(b);
  prev_[i] = tail_;
  next_[i] = -1;
  if (tail_ >= 0) next_[static_cast<size_t>(tail_)] = b;
  else head_ = b;
  tail_ = b;
  ++num_free_;
}

void KvBlockPool::unlink(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (prev_[i] >= 0) next_[static_cast<size_t>(prev_[i])] = next_[i];
  else head_ = next_[i];
  if (next_[i] >= 0) prev_[static_cast<size_t>(next_[i])] = prev_[i];
  else tail_ = prev_[i];
  prev_[i] = next_[i] = -1;
  --num_free_;
}

bool KvBlockPool::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n < 0) throw std::logic_error("KvBlockPool::allocate: negative count");
  if (n > num_free()) return false;
  out.reserve(out.size() + static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = head_;
    unlink(b);
    ref_counts_[static_cast<size_t>(b)] = 1;
    out.push_back(b);
  }
  return true;
}

void KvBlockPool::check_id(int32_t block) const {
  if (block < 0 || block >= num_blocks()) {
    throw std::logic_error("KvBlockPool: block id " + std::to_string(block) + " out of range [0, " +
                           std::to_string(num_blocks()) + ")");
  }
}

void KvBlockPool::touch(int32_t block) {
  check_id(block);
  int32_t& rc = ref_counts_[static_cast<size_t>(block)];
  if (rc == 0) unlink(block);
  ++rc;
}

void KvBlockPool::share(int32_t block) {
  check_id(block);
  int32_t& rc = ref_counts_[static_cast<size_t>(block)];
  if (rc == 0) throw std::logic_error("KvBlockPool::share: block " + std::to_string(block) + " is free");
  ++rc;
}

void KvBlockPool::free(std::span<const int32_t> blocks) {
  // Drop the owners first and hand blocks back only when all drops were valid, so that a bad
  // call (a bug) changes nothing.
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int32_t b = blocks[i];
    if (b < 0 || b >= num_blocks() || ref_counts_[static_cast<size_t>(b)] == 0) {
      for (size_t j = 0; j < i; ++j) ++ref_counts_[static_cast<size_t>(blocks[j])];
      check_id(b);
      throw std::logic_error("KvBlockPool::free: block " + std::to_string(b) + " is already free");
    }
    --ref_counts_[static_cast<size_t>(b)];
  }
  for (int32_t b : blocks) {
    if (ref_counts_[static_cast<size_t>(b)] == 0) {
      ref_counts_[static_cast<size_t>(b)] = -1;  // mark: queued once even if listed twice
      push_hot(b);
    }
  }
  for (int32_t b : blocks) {
    if (ref_counts_[static_cast<size_t>(b)] == -1) ref_counts_[static_cast<size_t>(b)] = 0;
  }
}

int32_t KvBlockPool::ref_count(int32_t block) const {
  check_id(block);
  return ref_counts_[static_cast<size_t>(block)];
}

}  // namespace pagoda
