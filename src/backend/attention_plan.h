// Attention planned once per step (FlashInfer's plan/run; docs/design.md §3). The work partition of a
// step's paged attention — query tiles of each sequence, how the GQA group and the keys are split —
// depends only on the step's lengths and the model's attention shape, not on the layer, so the
// ModelRunner asks the backend for it once (Backend::plan_attention), stores it in
// StepMeta::attention_plan, and every attention layer of the step reuses it.
//
// The CPU backend partitions its work from the tiles and head_splits. The CUDA backend keeps its
// kernels unchanged and takes their launch shape (decode or prefill tiling, grid, split-KV factor)
// from the plan, computed on the host. Under CUDA graphs a plan is made once at capture from the
// padded step's maxima (from_lengths false: the worst case, every replay valid); plans that live in
// device buffers, so that replays follow the real lengths, come with the GPU issue.
// C++17-clean: included by .cu files through backend.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace pagoda {

// The attention shape a plan is made for. Every attention layer of the models we serve shares one;
// a call of another shape plans for itself.
struct AttentionShape {
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  DType q_dtype = DType::F32;   // the activation dtype
  DType kv_dtype = DType::F32;  // the KV cache dtype
  bool same_as(const AttentionShape& o) const {
    return num_q_heads == o.num_q_heads && num_kv_heads == o.num_kv_heads && head_dim == o.head_dim &&
           q_dtype == o.q_dtype && kv_dtype == o.kv_dtype;
  }
};

// Rows [row_begin, row_end) of the flat batch, all of sequence `seq` (context `context` tokens
// after the step); row_begin sits at context position first_pos, the next rows follow it.
struct AttentionTile {
  int32_t seq = 0;
  int32_t row_begin = 0;
  int32_t row_end = 0;
  int32_t first_pos = 0;
  int32_t context = 0;
};

// Host copies of the step's lengths (the StepBatch's): cu_seqlens_q [S+1] and seq_lens [S]. Null
// pointers: not known (graph capture) — the plan is then made from StepMeta's host maxima.
struct AttentionLengths {
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* seq_lens = nullptr;
};

struct AttentionPlan {
  // What it was made for: paged_attention uses it only for a call of this shape and step.
  AttentionShape shape;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t block_size = 0;
  bool from_lengths = false;  // false: planned from max_query_len / max_seq_len alone (worst case)

  // The work partition: query tiles of every sequence with new tokens, in row order (empty when
  // planned without lengths). Sliding windows are not in the plan (they differ per layer).
  std::vector<AttentionTile> tiles;
  int32_t max_context = 0;       // longest context (real, or the StepMeta maximum)
  double query_key_pairs = 0;    // causal (query, key) pairs of the step, per query head
  // CPU: each (tile, kv head) runs its GQA group as this many parts (more items where there are
  // too few tiles to keep every thread busy).
  int32_t head_splits = 1;
  // Split-KV (flash-decoding): each CTA's keys cut into this many parts, merged afterwards (CUDA).
  int32_t kv_splits = 1;
  // The CUDA launch shape: decode tiling (16 query rows per CTA) or prefill (64), and grid.x.
  bool decode_tiling = false;
  int32_t rows_per_cta = 0;
  int64_t grid_x = 0;

  bool made_for(const AttentionShape& s, int32_t tokens, int32_t seqs, int32_t block) const {
    return shape.same_as(s) && num_tokens == tokens && num_seqs == seqs && block_size == block;
  }
};

// The backend-independent part of a plan: identity, tiles of at most max_tile_rows rows (from the
// lengths where given) and the pair count. `meta_*`: StepMeta's host scalars.
AttentionPlan plan_attention_tiles(const AttentionShape& shape, int32_t num_tokens, int32_t num_seqs,
                                   int32_t block_size, int32_t max_seq_len, int32_t max_query_len,
                                   const AttentionLengths& lengths, int32_t max_tile_rows);

}  // namespace pagoda
