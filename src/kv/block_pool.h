// The pool of physical KV cache blocks (DESIGN.md §5). A block holds the K/V of `block_size`
// consecutive tokens of one sequence in every full-attention layer; the pool only hands out ids.
// Running out of blocks is normal operation: allocate() reports it, it never throws for it.
// Blocks are reference counted so that a prefix cache can later share one block between
// sequences; today every block has one owner.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace pagoda {

class KvBlockPool {
 public:
  // Throws pagoda::Error for num_blocks < 0 or block_size < 1.
  KvBlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  // Fraction of blocks in use, in [0, 1] (0 for an empty pool).
  double usage() const;

  bool can_allocate(int32_t n) const { return n >= 0 && n <= num_free(); }
  // Appends `n` fresh blocks (ref count 1) to `out` and returns true, or returns false and changes
  // nothing when fewer than `n` are free. All or nothing.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // Adds an owner to an allocated block (prefix sharing).
  void share(int32_t block);
  // Drops one owner of each block; a block with no owner left returns to the free list.
  // Freeing a block that is not allocated is a bug: throws std::logic_error.
  void free(std::span<const int32_t> blocks);
  int32_t ref_count(int32_t block) const;

 private:
  void check_id(int32_t block) const;

  int32_t block_size_;
  std::vector<int32_t> ref_counts_;  // [num_blocks], 0 = free
  std::deque<int32_t> free_;         // FIFO: the least recently freed block is reused first
};

}  // namespace pagoda
