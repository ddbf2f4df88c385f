// The engine's choice of device slot per LoRA adapter (engine/lora_slots.h): adapters keep their
// slots while steps need them, free slots go first, then the least recently used one no adapter of
// the step needs; each token's id becomes its slot.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "engine/lora_slots.h"

namespace pagoda {
namespace {

TEST(LoraSlotTable, ResidentAdaptersStayFreeSlotsFillThenTheLeastRecentlyUsedGoes) {
  LoraSlotTable t(2);
  std::vector<int32_t> step = {7, -1, 7, 9};
  auto loads = t.assign(step);
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(step, (std::vector<int32_t>{loads[0].slot, -1, loads[0].slot, loads[1].slot}));
  EXPECT_EQ(loads[0].adapter, 7);
  EXPECT_EQ(loads[1].adapter, 9);
  EXPECT_NE(loads[0].slot, loads[1].slot);
  const int32_t slot7 = t.slot_of(7), slot9 = t.slot_of(9);

  step = {9};  // 9 used again: 7 is now the least recently used
  EXPECT_TRUE(t.assign(step).empty());
  EXPECT_EQ(step[0], slot9);

  step = {4, 9};  // 4 takes 7's slot, 9 stays
  loads = t.assign(step);
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].slot, slot7);
  EXPECT_EQ(loads[0].adapter, 4);
  EXPECT_EQ(t.slot_of(7), -1);
  EXPECT_EQ(t.slot_of(9), slot9);
  EXPECT_EQ(step, (std::vector<int32_t>{slot7, slot9}));

  step = {-1, -1};  // the base model alone needs nothing
  EXPECT_TRUE(t.assign(step).empty());
  EXPECT_EQ(step, (std::vector<int32_t>{-1, -1}));
}

TEST(LoraSlotTable, AStepOfMoreAdaptersThanSlotsIsAnInvariantError) {
  LoraSlotTable t(2);
  std::vector<int32_t> step = {1, 2, 3};
  EXPECT_THROW(t.assign(step), InternalError);
}

}  // namespace
}  // namespace pagoda
