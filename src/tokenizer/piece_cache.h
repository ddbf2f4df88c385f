// Thread-safe cache of BPE results per piece. Text repeats its words, so most pieces are found
// here. Sharded so that concurrent encoders rarely meet on one lock; once a shard is full it stops
// taking entries (like Hugging Face's cache) rather than evicting.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/string_hash.h"

namespace pagoda {

class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 256;

  // Appends the cached ids of piece to out and returns true, or returns false.
  bool get(std::string_view piece, std::vector<int32_t>& out) const {
    const Shard& sh = shard(piece);
    std::shared_lock lock(sh.mu);
    auto it = sh.map.find(piece);
    if (it == sh.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void put(std::string_view piece, const int32_t* ids, size_t n) const {
    Shard& sh = shard(piece);
    std::unique_lock lock(sh.mu);
    if (sh.map.size() >= kEntriesPerShard) return;
    sh.map.try_emplace(std::string(piece), ids, ids + n);
  }

 private:
  static constexpr size_t kShards = 32;
  static constexpr size_t kEntriesPerShard = (1u << 18) / kShards;

  struct Shard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };

  Shard& shard(std::string_view piece) const {
    // A cheap hash of the ends and length picks the shard; the map does the real hashing.
    size_t h = piece.size() * 131;
    if (!piece.empty())
      h += static_cast<uint8_t>(piece.front()) * 31u + static_cast<uint8_t>(piece.back());
    return shards_[h % kShards];
  }

  mutable std::array<Shard, kShards> shards_;
};

}  // namespace pagoda
