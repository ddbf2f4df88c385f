#include "engine/model_runner.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda {

ModelRunner::ModelRunner(Backend& backend, Model& model, int32_t max_tokens, int32_t max_seqs,
                         int32_t max_blocks_per_seq)
    : be_(backend), model_(model), max_tokens_(max_tokens), max_seqs_(max_seqs),
      max_blocks_per_seq_(max_blocks_per_seq) {
  const int64_t vocab = model.config().vocab_size;
  const size_t ints = static_cast<size_t>(4 * max_tokens + 5 * max_seqs + 1 +
                                          static_cast<int64_t>(max_seqs) * max_blocks_per_seq);
  meta_buf_ = be_.alloc(ints * sizeof(int32_t));
  logits_buf_ = be_.alloc(static_cast<size_t>(max_seqs) * vocab * sizeof(float));
  workspace_bytes_ = model.reserve(max_tokens, max_seqs) + meta_buf_.bytes() + logits_buf_.bytes();
}

StepMeta ModelRunner::upload(const StepBatch& b) {
  const int32_t T = b.num_tokens(), S = b.num_seqs();
  const int32_t R = static_cast<int32_t>(b.logits_rows.size());
  check(T > 0 && T <= max_tokens_ && S <= max_seqs_ && R <= max_seqs_ &&
            b.state_slots.size() == static_cast<size_t>(S) &&
            b.has_initial_state.size() == static_cast<size_t>(S) &&
            b.max_blocks_per_seq <= max_blocks_per_seq_,
        "internal: step batch exceeds the runner's reserved sizes");
  // One packed int32 array, one host-to-device copy.
  staging_.clear();
  auto append = [&](const std::vector<int32_t>& v) {
    const size_t at = staging_.size();
    staging_.insert(staging_.end(), v.begin(), v.end());
    return at;
  };
  const size_t o_ids = append(b.token_ids), o_pos = append(b.positions),
               o_cu = append(b.cu_seqlens_q), o_lens = append(b.seq_lens),
               o_bt = append(b.block_tables), o_slot = append(b.slot_mapping),
               o_rows = append(b.logits_rows), o_slots = append(b.state_slots);
  const size_t o_init = staging_.size();
  for (uint8_t f : b.has_initial_state) staging_.push_back(f);
  be_.copy_to_device(meta_buf_.data(), staging_.data(), staging_.size() * sizeof(int32_t));

  auto* base = static_cast<int32_t*>(meta_buf_.data());
  const Device dev = be_.device();
  StepMeta m;
  m.token_ids = Tensor(base + o_ids, DType::I32, dev, {T});
  m.positions = Tensor(base + o_pos, DType::I32, dev, {T});
  m.cu_seqlens_q = Tensor(base + o_cu, DType::I32, dev, {S + 1});
  m.seq_lens = Tensor(base + o_lens, DType::I32, dev, {S});
  m.block_tables = Tensor(base + o_bt, DType::I32, dev, {S, b.max_blocks_per_seq});
  m.slot_mapping = Tensor(base + o_slot, DType::I32, dev, {T});
  m.logits_rows = Tensor(base + o_rows, DType::I32, dev, {R});
  m.state_slots = Tensor(base + o_slots, DType::I32, dev, {S});
  m.has_initial_state = Tensor(base + o_init, DType::I32, dev, {S});
  m.num_tokens = T;
  m.num_seqs = S;
  m.num_logits_rows = R;
  m.block_size = b.block_size;
  m.max_blocks_per_seq = b.max_blocks_per_seq;
  for (int32_t s = 0; s < S; ++s) {
    m.max_query_len = std::max(m.max_query_len, b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s]);
    m.max_seq_len = std::max(m.max_seq_len, b.seq_lens[s]);
  }
  return m;
}

const std::vector<float>& ModelRunner::execute(const StepBatch& batch, PagedKvCache& kv,
                                               RecurrentState* recurrent) {
  const StepMeta meta = upload(batch);
  const int64_t vocab = model_.config().vocab_size;
  Tensor logits = logits_buf_.tensor(DType::F32, {meta.num_logits_rows, vocab});
  model_.forward(meta, ModelState{kv, recurrent}, logits);
  host_logits_.resize(static_cast<size_t>(meta.num_logits_rows * vocab));
  if (!host_logits_.empty())
    be_.copy_to_host(host_logits_.data(), logits.data, host_logits_.size() * sizeof(float));
  return host_logits_;
}

}  // namespace pagoda

