#include "engine/lora_slots.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace pagoda {

LoraSlotTable::LoraSlotTable(int32_t slots)
    : adapter_(static_cast<size_t>(std::max(slots, 0)), -1), last_use_(adapter_.size(), 0) {}

int32_t LoraSlotTable::slot_of(int32_t adapter) const {
  const auto it = std::find(adapter_.begin(), adapter_.end(), adapter);
  return it == adapter_.end() ? -1 : static_cast<int32_t>(it - adapter_.begin());
}

std::vector<LoraSlotTable::Load> LoraSlotTable::assign(std::span<int32_t> token_adapters) {
  ++clock_;
  std::vector<int32_t> needed;
  for (const int32_t a : token_adapters)
    if (a >= 0 && std::find(needed.begin(), needed.end(), a) == needed.end()) needed.push_back(a);
  check_invariant(needed.size() <= adapter_.size(), "a step needs " + std::to_string(needed.size()) +
                                                        " LoRA adapters and there are " +
                                                        std::to_string(adapter_.size()) + " slots (--max-loras)");
  // Those resident stay where they are (and are marked, so that none of them is evicted below).
  for (const int32_t a : needed)
    if (const int32_t s = slot_of(a); s >= 0) last_use_[static_cast<size_t>(s)] = clock_;
  std::vector<Load> loads;
  for (const int32_t a : needed) {
    if (slot_of(a) >= 0) continue;
    // A free slot first, else the least recently used one this step does not need.
    size_t best = adapter_.size();
    for (size_t s = 0; s < adapter_.size(); ++s) {
      if (last_use_[s] == clock_) continue;
      if (best == adapter_.size() || (adapter_[s] < 0) > (adapter_[best] < 0) ||
          ((adapter_[s] < 0) == (adapter_[best] < 0) && last_use_[s] < last_use_[best]))
        best = s;
    }
    adapter_[best] = a;
    last_use_[best] = clock_;
    loads.push_back({static_cast<int32_t>(best), a});
  }
  for (int32_t& a : token_adapters)
    if (a >= 0) a = slot_of(a);
  return loads;
}

}  // namespace pagoda
