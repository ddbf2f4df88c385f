// Per-sequence KV block tables over a KvBlockPool, and the pool of recurrent-state slots of hybrid
// models (docs/design.md §5). Sequences are named by their id; the manager knows nothing else of them.
//
// A sequence's tokens 0, 1, 2, ... live in its blocks in order: token i is in logical block
// i / block_size at offset i % block_size, so its pool slot is
// block_table[i / block_size] * block_size + i % block_size.
//
// With prefix caching on, full computed blocks are registered in the PrefixCache; a new sequence
// may start with a run of cached blocks (adopt_prefix) and compute only the rest. A cached block
// with no owner stays in the pool's LRU free list until a fresh block is needed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/prefix_cache.h"

namespace pagoda {

class KvCacheManager {
 public:
  KvCacheManager(int32_t num_blocks, int32_t block_size);
  // With a prefix cache: `num_snapshots` state-snapshot slots (hybrid models; else 0);
  // `hash_bits` < 64 is a test hook (see PrefixCache).
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t num_snapshots,
                 int hash_bits = 64);

  int32_t block_size() const { return pool_.block_size(); }
  const KvBlockPool& pool() const { return pool_; }
  int32_t num_free_blocks() const { return pool_.num_free(); }
  double usage() const { return pool_.usage(); }

  // Tokens of `seq` that have a slot (0 for an unknown sequence).
  int32_t num_tokens(int64_t seq) const;
  // Blocks of `seq`, in logical order (empty for an unknown sequence).
  const std::vector<int32_t>& block_table(int64_t seq) const;
  bool has(int64_t seq) const { return tables_.count(seq) != 0; }

  // New blocks that appending `num_new_tokens` tokens to `seq` would take.
  int32_t blocks_needed(int64_t seq, int32_t num_new_tokens) const;
  bool can_append(int64_t seq, int32_t num_new_tokens) const;
  // How many tokens `seq` could append now: the room left in its last block plus the free blocks.
  int32_t max_appendable(int64_t seq) const;
  // Gives the next `num_new_tokens` tokens of `seq` their slots, allocating blocks as needed, and
  // appends the slot ids to `slots` (when not null). All or nothing: returns false and changes
  // nothing when the pool has too few free blocks.
  bool append_slots(int64_t seq, int32_t num_new_tokens, std::vector<int32_t>* slots = nullptr);
  // Keeps only the first `num_tokens` slots of `seq` (speculative decoding: rejected drafts' slots
  // are dropped); blocks past them go back to the pool. Never drops a registered (cached) block.
  void truncate(int64_t seq, int32_t num_tokens);
  // Returns every block of `seq` to the pool and forgets it (cached blocks stay cached, the last
  // block of the sequence coldest). Unknown ids are ignored.
  void free(int64_t seq);

  // --- prefix caching (all no-ops / empty when it is off) ---
  bool prefix_caching() const { return cache_.has_value(); }
  PrefixCache* prefix_cache() { return cache_ ? &*cache_ : nullptr; }
  const PrefixCache* prefix_cache() const { return cache_ ? &*cache_ : nullptr; }
  // Blocks a new sequence that adopts `hit` and then appends `num_new_tokens` would take from the
  // free list (cached blocks with no owner count: adopting takes them out of it).
  int32_t blocks_needed_after(std::span<const int32_t> hit, int32_t num_new_tokens) const;
  // Starts the table of the new sequence `seq` with the cached blocks `hit` (shared, not copied).
  void adopt_prefix(int64_t seq, std::span<const int32_t> hit);
  // Registers every block of `seq` that is full within its first `num_computed` tokens and not yet
  // registered. `hashes` covers at least those blocks (PrefixCache::extend_hashes).
  void cache_full_blocks(int64_t seq, std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                         const std::string& salt, int32_t num_computed);
  // The registered block that holds full block `index` of `seq` (its own or an equal one found
  // when registering), or -1.
  int32_t cached_block(int64_t seq, int32_t index) const;

 private:
  struct Table {
    std::vector<int32_t> blocks;
    int32_t num_tokens = 0;
    std::vector<int32_t> chain;  // the registered block of each full block registered so far
  };
  void forget_reused(std::span<const int32_t> fresh);

  KvBlockPool pool_;
  std::optional<PrefixCache> cache_;
  std::unordered_map<int64_t, Table> tables_;
};

// Fixed pool of recurrent-state slots (conv + delta-rule state of every Gated DeltaNet layer), one
// per live sequence. Sized max_num_seqs; used only by models with GDN layers.
class StateSlotPool {
 public:
  explicit StateSlotPool(int32_t num_slots);

  int32_t num_slots() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  // A free slot, or -1 when none is free.
  int32_t allocate();
  // Returns a slot; freeing a slot that is not in use is a bug: throws std::logic_error.
  void free(int32_t slot);
  bool in_use(int32_t slot) const;

 private:
  std::vector<uint8_t> in_use_;
  std::vector<int32_t> free_;  // stack; the lowest slot ids are handed out first
};

}  // namespace pagoda
