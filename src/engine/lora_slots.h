// Which LoRA adapter each of the --max-loras device slots holds, decided once per step for every
// worker (as the KV block tables are): an adapter a step needs keeps its slot while it stays; one
// that has none takes a free slot or the least recently used one no sequence of the step needs. The
// scheduler never puts more distinct adapters in a step than there are slots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

class LoraSlotTable {
 public:
  explicit LoraSlotTable(int32_t slots);

  struct Load {
    int32_t slot = 0;
    int32_t adapter = 0;  // LoraCatalog id
  };
  // Rewrites each adapter id of `token_adapters` (-1: the base model) to its slot, giving slots to
  // those without; returns the loads each worker makes before the step. Throws (an engine invariant)
  // when the step needs more adapters than there are slots.
  std::vector<Load> assign(std::span<int32_t> token_adapters);
  // The slot holding `adapter`, or -1.
  int32_t slot_of(int32_t adapter) const;
  int32_t num_slots() const { return static_cast<int32_t>(adapter_.size()); }

 private:
  std::vector<int32_t> adapter_;    // per slot, -1 while empty
  std::vector<uint64_t> last_use_;  // per slot, the step that last needed it
  uint64_t clock_ = 0;
};

}  // namespace pagoda
