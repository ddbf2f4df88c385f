// moe_permute's index part: the T*k slots sorted by expert, stably (within an expert by slot):
// offsets[E + 1], sorted_slots[R] and its inverse slot_rows[R]. One invocation, in order: a
// counting sort, O(R + E); the rows themselves are gathered by gather_rows afterwards. A slot whose
// expert id lies outside [0, E) is left out of every expert (its slot_rows entry is -1).
#version 450
#include "common.glsl"
layout(local_size_x = 1) in;
layout(push_constant) uniform P {
  uint64_t expert_ids, offsets, sorted_slots, slot_rows;
  uint R, E;
} p;
const uint MAX_E = 1024u;
shared int cursor[MAX_E];

void main() {
  for (uint e = 0u; e <= p.E; ++e) sti(p.offsets, e, 0);
  for (uint s = 0u; s < p.R; ++s) {
    const int e = ldi(p.expert_ids, s);
    if (e >= 0 && uint(e) < p.E) sti(p.offsets, uint(e) + 1u, ldi(p.offsets, uint(e) + 1u) + 1);
  }
  for (uint e = 0u; e < p.E; ++e) sti(p.offsets, e + 1u, ldi(p.offsets, e + 1u) + ldi(p.offsets, e));
  for (uint s = 0u; s < p.R; ++s) sti(p.slot_rows, s, -1);
  for (uint e = 0u; e < p.E; ++e) cursor[e] = ldi(p.offsets, e);
  for (uint s = 0u; s < p.R; ++s) {
    const int e = ldi(p.expert_ids, s);
    if (e < 0 || uint(e) >= p.E) continue;
    const int r = cursor[e]++;
    sti(p.sorted_slots, uint(r), int(s));
    sti(p.slot_rows, s, r);
  }
}
