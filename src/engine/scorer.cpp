#include "engine/scorer.h"

#include "core/error.h"

namespace pagoda {

Scorer::Scorer(Backend& backend, Model& model, int32_t max_len, int32_t chunk, DType kv_dtype)
    : be_(backend), model_(model), max_len_(max_len), chunk_(chunk) {
  const ModelConfig& mc = model.config();
  const int32_t blocks = (max_len + block_size_ - 1) / block_size_;
  KvCacheShape shape;
  shape.num_layers = static_cast<int32_t>(mc.num_layers_of(LayerKind::FullAttention));
  shape.num_blocks = blocks;
  shape.block_size = block_size_;
  shape.num_kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  shape.head_dim = static_cast<int32_t>(mc.head_dim);
  shape.dtype = kv_dtype;
  kv_ = std::make_unique<PagedKvCache>(backend, shape);
  if (mc.num_layers_of(LayerKind::LinearAttention) > 0)
    state_ = std::make_unique<RecurrentState>(
        backend, RecurrentStateShape::for_model(mc, 1, backend.activation_dtype()));
  // Every row of a chunk produces logits, so the runner reserves `chunk` logits rows.
  runner_ = std::make_unique<ModelRunner>(backend, model, chunk, chunk, blocks);
}

Scorer::~Scorer() = default;

void Scorer::score(const std::vector<int32_t>& ids,
                   const std::function<void(int32_t, std::span<const float>)>& on_row) {
  const int32_t n = static_cast<int32_t>(ids.size());
  check(n > 0 && n <= max_len_, "scorer: sequence of " + std::to_string(n) +
                                    " tokens, expected 1.." + std::to_string(max_len_));
  const int64_t vocab = model_.config().vocab_size;
  for (int32_t start = 0; start < n; start += chunk_) {
    const int32_t len = std::min(chunk_, n - start);
    StepBatch b;
    b.block_size = block_size_;
    for (int32_t i = 0; i < len; ++i) {
      const int32_t pos = start + i;
      b.token_ids.push_back(ids[static_cast<size_t>(pos)]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(pos);  // block i of the sequence is pool block i
      b.logits_rows.push_back(i);
    }
    b.cu_seqlens_q = {0, len};
    b.seq_lens = {start + len};
    b.max_blocks_per_seq = (start + len + block_size_ - 1) / block_size_;
    for (int32_t blk = 0; blk < b.max_blocks_per_seq; ++blk) b.block_tables.push_back(blk);
    b.state_slots = {state_ ? 0 : -1};
    b.has_initial_state = {static_cast<uint8_t>(start > 0)};
    const std::vector<float>& logits = runner_->execute(b, *kv_, state_.get());
    for (int32_t i = 0; i < len; ++i)
      on_row(start + i, std::span<const float>(logits).subspan(static_cast<size_t>(i * vocab),
                                                               static_cast<size_t>(vocab)));
  }
}

}  // namespace pagoda
