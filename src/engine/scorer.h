// Teacher-forced logits of one token sequence at every position: perplexity and parity checks
// against transformers. Runs the model directly in prefill chunks (no scheduler), with a KV cache
// and state slot of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/model_runner.h"
#include "kv/paged_kv_cache.h"
#include "kv/recurrent_state.h"
#include "model/model.h"

namespace pagoda {

class Scorer {
 public:
  // Sequences of up to `max_len` tokens, fed `chunk` tokens per forward pass.
  Scorer(Backend& backend, Model& model, int32_t max_len, int32_t chunk, DType kv_dtype);
  ~Scorer();

  // Feeds ids[0..n) and calls on_row(p, logits) for every position p: the distribution of the
  // token after ids[p]. Each call starts a fresh sequence.
  void score(const std::vector<int32_t>& ids,
             const std::function<void(int32_t, std::span<const float>)>& on_row);

 private:
  Backend& be_;
  Model& model_;
  int32_t max_len_, chunk_, block_size_ = 16;
  std::unique_ptr<PagedKvCache> kv_;
  std::unique_ptr<RecurrentState> state_;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace pagoda
