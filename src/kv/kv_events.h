// What the prefix cache tells the world (vLLM's KV cache events, --kv-events-config): a full block
// became cached (its hash, its parent's, its token ids), a cached block was evicted, or every block
// was dropped at once. The prefix cache appends to the log as it registers and forgets blocks; the
// engine's owner takes the log after each step and hands it to a publisher (server/kv_events_*).
// Plain bookkeeping on the engine thread: a step appends at most its own blocks, and take()
// empties it, so it never grows past a step's worth.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace pagoda {

struct KvEvent {
  enum class Kind : uint8_t { Stored, Removed, AllCleared };
  Kind kind = Kind::Stored;
  uint64_t hash = 0;                    // Stored, Removed
  std::optional<uint64_t> parent_hash;  // Stored: the block before it; none for a prompt's first block
  std::vector<int32_t> token_ids;       // Stored: the block's tokens
};

class KvEventLog {
 public:
  void stored(uint64_t hash, std::optional<uint64_t> parent_hash, std::vector<int32_t> token_ids) {
    events_.push_back({KvEvent::Kind::Stored, hash, parent_hash, std::move(token_ids)});
  }
  void removed(uint64_t hash) { events_.push_back({KvEvent::Kind::Removed, hash, std::nullopt, {}}); }
  void all_cleared() { events_.push_back({KvEvent::Kind::AllCleared, 0, std::nullopt, {}}); }
  bool empty() const { return events_.empty(); }
  std::vector<KvEvent> take() { return std::exchange(events_, {}); }

 private:
  std::vector<KvEvent> events_;
};

}  // namespace pagoda
