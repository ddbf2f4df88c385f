#include "backend/attention_plan.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda {

AttentionPlan plan_attention_tiles(const AttentionShape& shape, int32_t num_tokens, int32_t num_seqs,
                                   int32_t block_size, int32_t max_seq_len, int32_t max_query_len,
                                   const AttentionLengths& lengths, int32_t max_tile_rows) {
  AttentionPlan p;
  p.shape = shape;
  p.num_tokens = num_tokens;
  p.num_seqs = num_seqs;
  p.block_size = block_size;
  p.max_context = max_seq_len;
  const int32_t tile = std::max(1, max_tile_rows);
  if (!lengths.cu_seqlens_q || !lengths.seq_lens) {
    // Worst case from the maxima: every token sees max_seq_len keys.
    p.query_key_pairs = static_cast<double>(num_tokens) * std::max(max_seq_len, 1);
    (void)max_query_len;
    return p;
  }
  p.from_lengths = true;
  p.max_context = 0;
  const int32_t* cu = lengths.cu_seqlens_q;
  check(cu[0] >= 0 && cu[num_seqs] <= num_tokens,
        "internal: attention plan: cu_seqlens_q outside the step's tokens");
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t q_len = cu[s + 1] - cu[s], ctx = lengths.seq_lens[s];
    check(q_len >= 0 && ctx >= q_len, "internal: attention plan: a sequence has fewer context tokens than new ones");
    p.max_context = std::max(p.max_context, ctx);
    // Causal: query i of the chunk sees ctx - q_len + i + 1 keys.
    p.query_key_pairs += static_cast<double>(q_len) * (ctx - q_len) + 0.5 * q_len * (q_len + 1.0);
    for (int32_t r = cu[s]; r < cu[s + 1]; r += tile) {
      AttentionTile t;
      t.seq = s;
      t.row_begin = r;
      t.row_end = std::min(cu[s + 1], r + tile);
      t.first_pos = ctx - q_len + (r - cu[s]);
      t.context = ctx;
      p.tiles.push_back(t);
    }
  }
  return p;
}

}  // namespace pagoda
