// logits[rows[m], j] = -inf where bit j of mask row m is clear (bit j % 32 of word j / 32): the
// token masks of structured output, applied where the logits are.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t logits, mask, rows;
  uint M, V, stride, words;
} p;

void main() {
  const uint n = p.M * p.V;
  for (uint i = grid_start(); i < n; i += grid_stride()) {
    const uint m = i / p.V, j = i % p.V;
    const uint bits = uint(ldi(p.mask, m * p.words + (j >> 5)));
    if (((bits >> (j & 31u)) & 1u) == 0u) stf(p.logits, uint(ldi(p.rows, m)) * p.stride + j, uintBitsToFloat(0xff800000u));
  }
}
