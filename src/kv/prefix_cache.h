// The prefix cache (docs/design.md §5): which physical KV blocks hold which full blocks of tokens, so
// that a request that starts with a cached prefix reuses those blocks instead of computing them.
//
// A full block is named by a hash chained over (parent block's hash, its token ids, extra keys:
// the request's cache_salt); the hash only finds candidates. A hit is decided by comparing what
// the block holds: its token ids, its parent (the physical block before it, checked against that
// block's generation so that a parent evicted and reused since cannot pass), and for the first
// block the salt. So a hash collision costs a lookup, never a wrong answer.
//
// Hybrid models also need, at the hit point, each Gated DeltaNet layer's state after exactly that
// many tokens: state snapshots live in their own pool of slots, each bound to the block that ends
// at its position and dropped with it; unbound snapshots are evicted least recently used first.
//
// The cache owns no memory of its own beyond this bookkeeping: blocks belong to the KvBlockPool,
// snapshot slots to the recurrent state. Single-threaded (the engine thread).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_events.h"

namespace pagoda {

class PrefixCache {
 public:
  // `hash_bits` < 64 truncates every hash (a test hook that makes collisions common).
  PrefixCache(int32_t num_blocks, int32_t block_size, int32_t num_snapshots, int hash_bits = 64);

  int32_t block_size() const { return block_size_; }
  int32_t num_snapshots() const { return static_cast<int32_t>(snap_block_.size()); }

  // Extends `hashes` (the chained hashes of a sequence's full blocks so far) to every full block
  // of `tokens`.
  void extend_hashes(std::span<const int32_t> tokens, const std::string& salt, std::vector<uint64_t>& hashes) const;

  // The longest run of cached blocks that holds tokens[0, n·block_size), at most `max_blocks`.
  // With `need_snapshot`, cut back to the deepest block of that run that has a snapshot (a hybrid
  // model can resume only there). `snapshot` gets that block's snapshot (or -1), `kv_blocks` the
  // length of the run before that cut.
  std::vector<int32_t> match(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                             const std::string& salt, int32_t max_blocks, bool need_snapshot,
                             int32_t* snapshot = nullptr, int32_t* kv_blocks = nullptr) const;

  // Registers `block` as holding full block `index` of `tokens` after `parent` (the registered
  // block of index - 1; -1 for index 0). When an equal block is already registered, `block` stays
  // uncached and that one is returned; otherwise `block`.
  // `parent_hash`: the chain's hash of block index - 1 (what KV cache events name as the parent;
  // `parent` itself may have left the cache since the sequence registered it).
  int32_t insert(int32_t block, int32_t parent, int32_t index, std::span<const int32_t> tokens,
                 uint64_t hash, const std::string& salt, std::optional<uint64_t> parent_hash = std::nullopt);
  // `block` is being reused for other tokens: it leaves the cache (and its snapshot is freed).
  void forget(int32_t block);
  bool is_cached(int32_t block) const { return entries_[static_cast<size_t>(block)].cached; }
  // Where registrations and evictions are told (--kv-events-config); null: nowhere.
  void set_event_log(KvEventLog* log) { events_ = log; }
  int32_t num_cached_blocks() const { return num_cached_; }
  // Distinct hashes among them (what KV cache events describe: a chain computed again after its
  // first copy lost its parent is cached twice under one hash).
  int32_t num_cached_hashes() const { return num_hashes_; }

  // A snapshot slot to write this step, or -1 when every slot is reserved: a free one, else the
  // least recently used bound one (unbound from its block). Reserved until bind or release.
  int32_t reserve_snapshot();
  // Binds a reserved snapshot to a registered block; when the block has one already, the new one
  // is released instead.
  void bind_snapshot(int32_t snapshot, int32_t block);
  void release_snapshot(int32_t snapshot);
  // Marks a snapshot as just used (LRU).
  void touch_snapshot(int32_t snapshot);
  int32_t snapshot_of(int32_t block) const { return entries_[static_cast<size_t>(block)].snapshot; }
  int32_t num_bound_snapshots() const;
  // Reserved by reserve_snapshot() and neither bound nor released yet (a step in flight, or one
  // that failed and must release it).
  bool is_reserved_snapshot(int32_t snapshot) const { return snap_block_[static_cast<size_t>(snapshot)] == kReserved; }
  int32_t num_reserved_snapshots() const;

 private:
  struct Entry {
    bool cached = false;
    uint64_t hash = 0;
    int32_t parent = -1;
    uint32_t parent_generation = 0;
    std::vector<int32_t> tokens;  // the block's token ids
    std::string salt;             // first blocks only (the chain carries it)
    int32_t snapshot = -1;
  };
  static constexpr int32_t kReserved = -2;

  uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens, uint64_t extra) const;
  // The registered block equal to (parent, tokens, salt) at `hash`, or -1.
  int32_t find(uint64_t hash, int32_t parent, std::span<const int32_t> tokens, const std::string& salt) const;
  void unbind(int32_t snapshot);

  int32_t block_size_;
  uint64_t mask_;
  std::vector<Entry> entries_;            // [num_blocks]
  std::vector<uint32_t> generation_;      // [num_blocks]: bumped every time a block is forgotten
  std::unordered_multimap<uint64_t, int32_t> index_;
  int32_t num_cached_ = 0;
  int32_t num_hashes_ = 0;
  std::vector<int32_t> snap_block_;       // [num_snapshots]: bound block, -1 free, kReserved
  std::vector<uint64_t> snap_last_use_;   // [num_snapshots]
  uint64_t clock_ = 0;
  KvEventLog* events_ = nullptr;
};

}  // namespace pagoda
