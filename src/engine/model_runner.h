// Runs one StepBatch through the model: uploads the batch's index arrays in one copy, calls the
// forward pass, and either brings every logits row back to the host (execute) or takes the argmax
// of every row on the device and brings back only the token ids plus the rows that the host
// sampler needs (execute_greedy).
//
// Decode steps (every sequence one new token) may run as CUDA graphs (docs/design.md §3): one graph per
// batch-size bucket, captured by capture_decode_graphs(). A step is padded to its bucket with
// harmless sequences (token 0 at position 0, context of one key read from block 0, slot -1: no
// cache write, the reserved dummy state slot with no initial state); their rows are discarded.
// In graph mode every decode step uses one fixed layout of the metadata buffer (block tables
// [max_seqs, max_blocks_per_seq]) and plans attention for max_blocks_per_seq * block_size keys,
// so that the captured launches stay valid for every replay.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "engine/step_batch.h"
#include "kv/paged_kv_cache.h"
#include "kv/recurrent_state.h"
#include "model/lora.h"
#include "engine/step_profiler.h"
#include "model/model.h"

namespace pagoda {

class VisionEncoder;

// What execute_greedy returns: the device argmax of every logits row, the full fp32 logits of
// the rows that asked for them (host_rows[i] != 0), and the fp32 final-norm hidden state of the
// rows that asked for it (hidden_rows[i] != 0: embedding requests), each packed in order.
struct StepLogits {
  std::vector<int32_t> argmax;        // [R]
  std::vector<float> host_logits;     // [number of host rows, vocab]
  std::vector<int32_t> host_row_of;   // [R]: row of host_logits holding row i, or -1
  std::vector<float> hidden;          // [number of hidden rows, hidden_size]
  std::vector<int32_t> hidden_row_of; // [R]: row of hidden holding row i, or -1
};

// Structured output's token masks of one step, applied on the device before the argmax
// (Backend::apply_token_mask): the logits rows to mask and their bits, ceil(vocab / 64) 64-bit
// words each (bit j = token j allowed). Rows masked here need not come back to the host.
struct RowMasks {
  std::vector<int32_t> rows;
  std::vector<uint64_t> words;  // [rows.size(), ceil(vocab / 64)]
};
// Called once the step's forward pass is enqueued: the masks are computed while it runs.
using RowMaskSource = std::function<const RowMasks&()>;

// Where the wall time of the steps went, summed since construction (docs/performance.md: the host's share of
// a decode step is what CUDA graphs and overlap are for).
struct StepTimes {
  int64_t steps = 0;
  double total_s = 0;     // Engine::step from call to return
  double prepare_s = 0;   // metadata upload and the forward pass enqueued (graph replay or eager)
  double gpu_wait_s = 0;  // blocked in the copy of the step's results (the device still working)
  double host_s() const { return total_s - gpu_wait_s; }
};

class ModelRunner {
 public:
  // Reserves the model's workspace and the metadata buffer for steps of up to `max_tokens` new
  // tokens over `max_seqs` sequences, each with at most `max_blocks_per_seq` blocks, and up to
  // `max_logits_rows` logits rows (0 = max_seqs: one per sequence; speculative decoding needs
  // more). Constructed before the KV cache: its workspace is an input of the memory plan.
  ModelRunner(Backend& backend, Model& model, int32_t max_tokens, int32_t max_seqs,
              int32_t max_blocks_per_seq, int32_t max_logits_rows = 0);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Returns logits [batch.logits_rows.size(), vocab] row-major, fp32, on the host. `recurrent`:
  // the state slots of a hybrid model (null for dense models). Always eager.
  const std::vector<float>& execute(const StepBatch& batch, PagedKvCache& kv,
                                    RecurrentState* recurrent = nullptr);
  // Runs the step (as a graph replay when the step is a decode step of a captured bucket) and
  // returns the argmax token of every logits row; rows with host_rows[i] != 0 also come back in
  // full. host_rows may be empty (no row needed on the host); so may hidden_rows. `masks`, when
  // given, is asked for the step's token masks after the forward pass is enqueued; they are
  // applied to the logits on the device before the argmax (a host row comes back unmasked).
  // `profiled`: the step the profiler times (Executor::execute decides it once for every rank): it
  // runs eagerly, its ops timed where this runner has the profiler.
  const StepLogits& execute_greedy(const StepBatch& batch, PagedKvCache& kv,
                                   RecurrentState* recurrent, std::span<const uint8_t> host_rows,
                                   std::span<const uint8_t> hidden_rows = {},
                                   const RowMaskSource& masks = {}, bool profiled = false);

  // Captures one decode graph per bucket up to min(max_seqs, max_tokens) when the backend can.
  // `dummy_state_slot`: a recurrent-state slot that no sequence uses (hybrid models), else -1.
  // Returns the number of graphs captured.
  int capture_decode_graphs(PagedKvCache& kv, RecurrentState* recurrent, int32_t dummy_state_slot);
  size_t workspace_bytes() const { return workspace_bytes_; }
  // The model's LoRA adapters (model/lora.h): each step then tells them every token's adapter
  // (StepBatch::lora_slots; padded decode rows and graph capture: the base model). Reserves their
  // workspace for this runner's largest step.
  void set_lora(LoraSet* lora);
  // The vision tower that encodes a step's images (StepBatch::image_rows) before the decoder reads
  // them; their outputs stay in an encoder cache of up to `cache_tokens` merged tokens, by image
  // hash, least recently used out (never an image of the step being run), so an image is encoded once
  // however many chunks or requests read it.
  void set_vision(VisionEncoder* vision, int64_t cache_tokens);
  int64_t images_encoded() const { return images_encoded_; }
  // The profiler that times the `profiled` steps' ops (engine/step_profiler.h).
  void set_profiler(StepProfiler* profiler) { profiler_ = profiler; }
  // prepare_s and gpu_wait_s of every execute_greedy so far (steps and total_s are the Engine's).
  const StepTimes& times() const { return times_; }
  int num_graphs() const { return static_cast<int>(graphs_.size()); }
  // The batch-size buckets of decode graphs up to `max`: 1, 2, 4, 8, 16, 24, ... 64, 80, ... 128,
  // 160, ... (every bucket <= max, and max itself).
  static std::vector<int32_t> decode_buckets(int32_t max);

 private:
  StepMeta upload(const StepBatch& batch);
  // Graph-mode decode layout: the batch padded to `bucket` sequences, uploaded at fixed offsets.
  StepMeta upload_padded_decode(const StepBatch* batch, int32_t bucket);
  // The step's attention plan (attention_plan.h), made once and stored in meta.attention_plan for
  // every attention layer. `batch` null: the graph-mode layout, planned from meta's maxima.
  void plan_attention(StepMeta& meta, const StepBatch* batch, const PagedKvCache& kv);
  void forward_and_argmax(const StepMeta& meta, PagedKvCache& kv, RecurrentState* recurrent);
  // Uploads the masks, applies them to the first R logits rows and takes those rows' argmax again.
  void apply_masks(const RowMasks& masks, int32_t R);
  // Encodes the step's images not in the encoder cache and points the step's embedding overrides
  // at their rows.
  void prepare_images(const StepBatch& batch, StepMeta& meta);
  // Brings the flagged rows of the model's last hidden rows to the host as fp32.
  void copy_hidden_rows(std::span<const uint8_t> hidden_rows);
  // What a profiled step had to move at least (engine/step_profiler.h).
  StepFloor step_floor(const StepBatch& batch, const PagedKvCache& kv, const RecurrentState* recurrent) const;

  Backend& be_;
  Model& model_;
  StepProfiler* profiler_ = nullptr;
  int32_t max_tokens_, max_seqs_, max_blocks_per_seq_, max_rows_;
  int32_t dummy_state_slot_ = -1;
  int32_t block_size_ = 16;
  Buffer meta_buf_, logits_buf_, argmax_buf_;
  Buffer mask_buf_;  // [max_seqs, words] mask bits, then [max_seqs] row ids
  size_t mask_words_ = 0;  // 64-bit words per mask row: ceil(vocab / 64)
  std::vector<int32_t> staging_;
  std::vector<float> host_logits_;
  std::vector<uint16_t> hidden_staging_;  // 16-bit hidden rows before widening
  StepLogits step_;
  AttentionPlan attn_plan_;
  StepTimes times_;
  std::map<int32_t, int64_t> graphs_;  // bucket → graph handle
  LoraSet* lora_ = nullptr;
  std::vector<int32_t> lora_slots_;  // a padded decode step's
  VisionEncoder* vision_ = nullptr;
  struct EncodedImage {
    Buffer buffer;
    Tensor rows;  // [num_tokens, hidden]
    uint64_t last_step = 0;
  };
  std::unordered_map<uint64_t, EncodedImage> encoded_;
  int64_t encoded_tokens_ = 0, encoder_cache_tokens_ = 0, images_encoded_ = 0;
  uint64_t step_counter_ = 0;
  std::vector<EmbeddingOverride> overrides_;
  size_t workspace_bytes_ = 0;
};

}  // namespace pagoda
