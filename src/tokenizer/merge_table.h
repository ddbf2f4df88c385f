// BPE merge lookup: (left id, right id) -> (rank, merged id), in an open-addressing table. It is
// probed for every adjacent pair of every uncached piece, so it avoids std::unordered_map's nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pagoda {

struct MergeValue {
  int32_t rank;
  int32_t merged_id;
};

class MergeTable {
 public:
  void reserve(size_t count) {
    size_t cap = 16;
    while (cap < count * 2) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = 0;
  }

  // Later inserts of the same pair overwrite earlier ones, as Hugging Face's HashMap collect does.
  void insert(int32_t left, int32_t right, MergeValue value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const uint64_t key = pack(left, right);
    size_t i = slot_of(key);
    while (slots_[i].used && slots_[i].key != key) i = (i + 1) & mask_;
    if (!slots_[i].used) ++size_;
    slots_[i] = Slot{key, value, true};
  }

  const MergeValue* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    MergeValue value{0, 0};
    bool used = false;
  };

  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t slot_of(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    reserve(old.empty() ? 8 : old.size());
    for (const Slot& s : old) {
      if (s.used) insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace pagoda
