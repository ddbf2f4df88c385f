// The pool of physical KV cache blocks (docs/design.md §5). A block holds the K/V of `block_size`
// consecutive tokens of one sequence in every full-attention layer; the pool only hands out ids.
// Running out of blocks is normal operation: allocate() reports it, it never throws for it.
//
// Blocks are reference counted: a prefix-cache hit shares a block between sequences. A block with
// no owner is free, but it may still hold a cached prefix: the free list is kept in LRU order
// (least recently freed first) so that allocate() reuses the coldest block, and touch() can take a
// cached free block back out of the middle of the list. The pool does not know which free blocks
// are cached; the caller forgets a cached block when allocate() hands it out again.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

class KvBlockPool {
 public:
  // Throws pagoda::Error for num_blocks < 0 or block_size < 1.
  KvBlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return num_free_; }
  int32_t num_used() const { return num_blocks() - num_free(); }
  // Fraction of blocks in use, in [0, 1] (0 for an empty pool).
  double usage() const;

  bool can_allocate(int32_t n) const { return n >= 0 && n <= num_free(); }
  // Appends `n` blocks from the cold end of the free list (ref count 1) to `out` and returns true,
  // or returns false and changes nothing when fewer than `n` are free. All or nothing.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // Adds an owner to a block, free or not (a prefix-cache hit): a free block leaves the free list.
  void touch(int32_t block);
  // Adds an owner to an allocated block. Sharing a free block is a bug: throws std::logic_error.
  void share(int32_t block);
  // Drops one owner of each block, in order; a block with no owner left goes to the hot end of the
  // free list (the last one freed is the last one reused). Freeing a block that is not allocated
  // is a bug: throws std::logic_error and changes nothing.
  void free(std::span<const int32_t> blocks);
  int32_t ref_count(int32_t block) const;
  bool is_free(int32_t block) const { return ref_count(block) == 0; }

 private:
  void check_id(int32_t block) const;
  void push_hot(int32_t block);
  void unlink(int32_t block);

  int32_t block_size_;
  std::vector<int32_t> ref_counts_;  // [num_blocks], 0 = free
  // The free list, doubly linked through the block ids (-1 ends it): O(1) removal from the middle.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1;  // head: coldest
  int32_t num_free_ = 0;
};

}  // namespace pagoda
