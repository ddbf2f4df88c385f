#include "engine/model_runner.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "model/vision_encoder.h"

namespace pagoda {
namespace {

// Offsets (in int32s) of the graph-mode decode layout for max_seqs sequences.
struct DecodeLayout {
  size_t ids, pos, cu, lens, slot, rows, slots, init, bt;
  explicit DecodeLayout(size_t m)
      : ids(0), pos(m), cu(2 * m), lens(3 * m + 1), slot(4 * m + 1), rows(5 * m + 1),
        slots(6 * m + 1), init(7 * m + 1), bt(8 * m + 1) {}
};

}  // namespace

ModelRunner::ModelRunner(Backend& backend, Model& model, int32_t max_tokens, int32_t max_seqs,
                         int32_t max_blocks_per_seq, int32_t max_logits_rows)
    : be_(backend), model_(model), max_tokens_(max_tokens), max_seqs_(max_seqs),
      max_blocks_per_seq_(max_blocks_per_seq), max_rows_(std::max(max_logits_rows, max_seqs)) {
  const int64_t vocab = model.config().vocab_size;
  const size_t bt = static_cast<size_t>(max_seqs) * static_cast<size_t>(max_blocks_per_seq);
  // 5 per token, 3 more for a step with images' rotary rows.
  const size_t eager_ints = static_cast<size_t>(8 * max_tokens + 4 * max_seqs + max_rows_ + 1) + bt;
  const size_t graph_ints = DecodeLayout(static_cast<size_t>(max_seqs)).bt + bt;
  meta_buf_ = be_.alloc(std::max(eager_ints, graph_ints) * sizeof(int32_t));
  logits_buf_ = be_.alloc(static_cast<size_t>(max_rows_) * vocab * sizeof(float));
  argmax_buf_ = be_.alloc(static_cast<size_t>(max_rows_) * sizeof(int32_t));
  // Masked rows sample no drafts: one per sequence at most.
  mask_words_ = static_cast<size_t>((vocab + 63) / 64);
  mask_buf_ = be_.alloc(static_cast<size_t>(max_seqs) * (mask_words_ * sizeof(uint64_t) + sizeof(int32_t)));
  workspace_bytes_ = model.reserve(max_tokens, max_rows_) + meta_buf_.bytes() +
                     logits_buf_.bytes() + argmax_buf_.bytes() + mask_buf_.bytes();
}

ModelRunner::~ModelRunner() {
  for (const auto& [bucket, g] : graphs_) be_.destroy_graph(g);
}

StepMeta ModelRunner::upload(const StepBatch& b) {
  const int32_t T = b.num_tokens(), S = b.num_seqs();
  const int32_t R = static_cast<int32_t>(b.logits_rows.size());
  check_invariant(T > 0 && T <= max_tokens_ && S <= max_seqs_ && R <= max_rows_ &&
                      b.state_slots.size() == static_cast<size_t>(S) &&
                      b.has_initial_state.size() == static_cast<size_t>(S) &&
                      (b.hidden_rows.empty() || b.hidden_rows.size() == static_cast<size_t>(T)) &&
                      b.max_blocks_per_seq <= max_blocks_per_seq_,
                  "step batch exceeds the runner's reserved sizes");
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
               o_rows = append(b.logits_rows), o_slots = append(b.state_slots), o_hid = append(b.hidden_rows),
               o_mrope = append(b.mrope_positions);
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
  if (!b.hidden_rows.empty()) m.hidden_rows = Tensor(base + o_hid, DType::I32, dev, {T});
  check_invariant(b.mrope_positions.empty() || b.mrope_positions.size() == 3 * static_cast<size_t>(T),
                  "a step's multimodal positions must be [3, T]");
  if (!b.mrope_positions.empty()) m.mrope_positions = Tensor(base + o_mrope, DType::I32, dev, {3, T});
  if (!b.image_rows.empty()) prepare_images(b, m);
  m.num_tokens = T;
  m.num_seqs = S;
  m.num_logits_rows = R;
  m.block_size = b.block_size;
  m.max_blocks_per_seq = b.max_blocks_per_seq;
  for (int32_t s = 0; s < S; ++s) {
    m.max_query_len = std::max(m.max_query_len, b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s]);
    m.max_seq_len = std::max(m.max_seq_len, b.seq_lens[s]);
  }
  if (lora_) {
    lora_slots_.assign(static_cast<size_t>(T), -1);
    if (b.lora_slots.size() == static_cast<size_t>(T)) lora_slots_ = b.lora_slots;
    lora_->set_step(lora_slots_);
  }
  return m;
}

void ModelRunner::set_vision(VisionEncoder* vision, int64_t cache_tokens) {
  vision_ = vision;
  encoder_cache_tokens_ = cache_tokens;
}

void ModelRunner::prepare_images(const StepBatch& b, StepMeta& m) {
  check(vision_ != nullptr, "a step holds image tokens but this model's vision tower is not loaded");
  ++step_counter_;
  const int64_t hidden = vision_->out_hidden();
  const DType act = be_.activation_dtype();
  for (const StepBatch::ImageRows& r : b.image_rows) {  // mark the step's images as in use
    if (auto it = encoded_.find(r.image->hash); it != encoded_.end()) it->second.last_step = step_counter_;
  }
  for (const StepBatch::ImageRows& r : b.image_rows) {
    const ImageInput& img = *r.image;
    if (encoded_.count(img.hash) > 0) continue;
    // Room first: the least recently used images of earlier steps go.
    while (encoded_tokens_ + img.num_tokens > encoder_cache_tokens_) {
      auto victim = encoded_.end();
      for (auto it = encoded_.begin(); it != encoded_.end(); ++it)
        if (it->second.last_step < step_counter_ && (victim == encoded_.end() || it->second.last_step < victim->second.last_step))
          victim = it;
      if (victim == encoded_.end()) break;  // everything cached is this step's: go over the budget for now
      encoded_tokens_ -= victim->second.rows.size(0);
      encoded_.erase(victim);
    }
    EncodedImage e;
    e.buffer = be_.alloc(static_cast<size_t>(img.num_tokens * hidden) * dtype_size(act));
    e.rows = e.buffer.tensor(act, {img.num_tokens, hidden});
    vision_->encode(img.grid_t, img.grid_h, img.grid_w, img.pixel_values, e.rows);
    e.last_step = step_counter_;
    encoded_tokens_ += img.num_tokens;
    ++images_encoded_;
    encoded_.emplace(img.hash, std::move(e));
  }
  overrides_.clear();
  for (const StepBatch::ImageRows& r : b.image_rows)
    overrides_.push_back({r.row, encoded_.at(r.image->hash).rows.rows(r.first, r.first + r.count)});
  m.embedding_overrides = &overrides_;
}

void ModelRunner::set_lora(LoraSet* lora) {
  lora_ = lora;
  if (lora_) lora_->reserve(std::max(max_tokens_, max_seqs_));
}

StepMeta ModelRunner::upload_padded_decode(const StepBatch* b, int32_t bucket) {
  const int32_t S = b ? b->num_seqs() : 0, NB = max_blocks_per_seq_;
  if (lora_) {  // the padding rows (and a capture's) run the base model
    lora_slots_.assign(static_cast<size_t>(bucket), -1);
    if (b && b->lora_slots.size() == static_cast<size_t>(S)) std::copy(b->lora_slots.begin(), b->lora_slots.end(), lora_slots_.begin());
    lora_->set_step(lora_slots_);
  }
  const DecodeLayout L(static_cast<size_t>(max_seqs_));
  staging_.assign(L.bt + static_cast<size_t>(bucket) * static_cast<size_t>(NB), 0);
  int32_t* st = staging_.data();
  for (int32_t s = 0; s < bucket; ++s) {
    const bool real = s < S;
    st[L.ids + s] = real ? b->token_ids[s] : 0;
    st[L.pos + s] = real ? b->positions[s] : 0;
    st[L.cu + s] = s;
    st[L.lens + s] = real ? b->seq_lens[s] : 1;
    st[L.slot + s] = real ? b->slot_mapping[s] : -1;
    st[L.rows + s] = s;
    st[L.slots + s] = real ? b->state_slots[s] : dummy_state_slot_;
    st[L.init + s] = real ? b->has_initial_state[s] : 0;
    if (real)
      std::copy_n(b->block_tables.begin() + static_cast<ptrdiff_t>(s) * b->max_blocks_per_seq,
                  b->max_blocks_per_seq, st + L.bt + static_cast<size_t>(s) * NB);
  }
  st[L.cu + bucket] = bucket;
  be_.copy_to_device(meta_buf_.data(), staging_.data(), staging_.size() * sizeof(int32_t));

  auto* base = static_cast<int32_t*>(meta_buf_.data());
  const Device dev = be_.device();
  StepMeta m;
  m.token_ids = Tensor(base + L.ids, DType::I32, dev, {bucket});
  m.positions = Tensor(base + L.pos, DType::I32, dev, {bucket});
  m.cu_seqlens_q = Tensor(base + L.cu, DType::I32, dev, {bucket + 1});
  m.seq_lens = Tensor(base + L.lens, DType::I32, dev, {bucket});
  m.block_tables = Tensor(base + L.bt, DType::I32, dev, {bucket, NB});
  m.slot_mapping = Tensor(base + L.slot, DType::I32, dev, {bucket});
  m.logits_rows = Tensor(base + L.rows, DType::I32, dev, {bucket});
  m.state_slots = Tensor(base + L.slots, DType::I32, dev, {bucket});
  m.has_initial_state = Tensor(base + L.init, DType::I32, dev, {bucket});
  m.num_tokens = bucket;
  m.num_seqs = bucket;
  m.num_logits_rows = bucket;
  m.max_query_len = 1;
  m.block_size = block_size_;
  m.max_blocks_per_seq = NB;
  m.max_seq_len = NB * block_size_;  // the plan must not depend on this step's contexts
  return m;
}

void ModelRunner::plan_attention(StepMeta& meta, const StepBatch* batch, const PagedKvCache& kv) {
  const auto& cfg = model_.config();
  const KvCacheShape& ks = kv.shape();
  if (ks.num_layers == 0 || cfg.num_heads <= 0) return;  // no attention layer
  AttentionShape shape;
  shape.num_q_heads = static_cast<int32_t>(cfg.num_heads);
  shape.num_kv_heads = ks.num_kv_heads;
  shape.head_dim = ks.head_dim;
  shape.q_dtype = be_.activation_dtype();
  shape.kv_dtype = ks.dtype;
  AttentionLengths lengths;
  if (batch) {
    lengths.cu_seqlens_q = batch->cu_seqlens_q.data();
    lengths.seq_lens = batch->seq_lens.data();
  }
  attn_plan_ = be_.plan_attention(meta, shape, lengths);
  meta.attention_plan = &attn_plan_;
}

void ModelRunner::forward_and_argmax(const StepMeta& meta, PagedKvCache& kv, RecurrentState* recurrent) {
  const int64_t vocab = model_.config().vocab_size;
  Tensor logits = logits_buf_.tensor(DType::F32, {meta.num_logits_rows, vocab});
  model_.forward(meta, ModelState{kv, recurrent}, logits);
  Tensor ids = argmax_buf_.tensor(DType::I32, {meta.num_logits_rows});
  if (meta.num_logits_rows > 0) be_.argmax_rows(logits, ids);
}

const std::vector<float>& ModelRunner::execute(const StepBatch& batch, PagedKvCache& kv,
                                               RecurrentState* recurrent) {
  StepMeta meta = upload(batch);
  plan_attention(meta, &batch, kv);
  const int64_t vocab = model_.config().vocab_size;
  Tensor logits = logits_buf_.tensor(DType::F32, {meta.num_logits_rows, vocab});
  model_.forward(meta, ModelState{kv, recurrent}, logits);
  host_logits_.resize(static_cast<size_t>(meta.num_logits_rows * vocab));
  if (!host_logits_.empty())
    be_.copy_to_host(host_logits_.data(), logits.data, host_logits_.size() * sizeof(float));
  return host_logits_;
}

StepFloor ModelRunner::step_floor(const StepBatch& batch, const PagedKvCache& kv, const RecurrentState* recurrent) const {
  const ModelConfig& cfg = model_.config();
  StepFloor f;
  f.weights = static_cast<double>(model_.weight_bytes());
  // An untied embedding table is read a row a token, not whole.
  if (!cfg.tie_word_embeddings)
    f.weights -= static_cast<double>(cfg.vocab_size * cfg.hidden_size) * static_cast<double>(dtype_size(cfg.dtype));
  const KvCacheShape& ks = kv.shape();
  double context = 0;
  for (int32_t len : batch.seq_lens) context += len;
  f.kv = 2.0 * context * ks.num_layers * ks.num_kv_heads * ks.head_dim * static_cast<double>(dtype_size(ks.dtype));
  if (recurrent != nullptr && recurrent->shape().num_slots > 0)
    f.state = 2.0 * batch.num_seqs() * static_cast<double>(recurrent->shape().total_bytes()) /
              recurrent->shape().num_slots;
  return f;
}

const StepLogits& ModelRunner::execute_greedy(const StepBatch& batch, PagedKvCache& kv,
                                              RecurrentState* recurrent,
                                              std::span<const uint8_t> host_rows,
                                              std::span<const uint8_t> hidden_rows,
                                              const RowMaskSource& masks, bool profiled) {
  const int32_t S = batch.num_seqs(), R = static_cast<int32_t>(batch.logits_rows.size());
  check_invariant(host_rows.empty() || host_rows.size() == static_cast<size_t>(R),
                  "host_rows must have one flag per logits row");
  check_invariant(hidden_rows.empty() || hidden_rows.size() == static_cast<size_t>(R),
                  "hidden_rows must have one flag per logits row");
  // A decode step: one new token per sequence, every sequence samples, rows in order.
  // (A one-token chunk of image placeholders is not: its embedding comes from the encoder.)
  bool one_token_each = batch.num_tokens() == S && R == S && S > 0 && batch.image_rows.empty();
  for (int32_t i = 0; one_token_each && i < R; ++i) one_token_each = batch.logits_rows[static_cast<size_t>(i)] == i;
  // A profiled step runs eagerly (a graph replay is one opaque launch) on every rank: a graph
  // all-reduces its padded batch, the eager step its real one, and ranks must sum one size.
  const bool timed = profiled && profiler_ != nullptr;
  const bool decode = !profiled && one_token_each && !graphs_.empty() && batch.max_blocks_per_seq <= max_blocks_per_seq_;
  auto bucket = decode ? graphs_.lower_bound(S) : graphs_.end();
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if (timed) profiler_->begin();
  if (bucket != graphs_.end()) {
    upload_padded_decode(&batch, bucket->first);
    be_.replay(bucket->second);
  } else {
    StepMeta meta = upload(batch);
    plan_attention(meta, &batch, kv);
    forward_and_argmax(meta, kv, recurrent);
  }
  if (masks) {
    const RowMasks& m = masks();
    if (!m.rows.empty()) apply_masks(m, R);
  }
  step_.argmax.resize(static_cast<size_t>(R));
  step_.host_row_of.assign(static_cast<size_t>(R), -1);
  int32_t n_host = 0;
  for (size_t i = 0; i < host_rows.size(); ++i)
    if (host_rows[i]) step_.host_row_of[i] = n_host++;
  const int64_t vocab = model_.config().vocab_size;
  step_.host_logits.resize(static_cast<size_t>(n_host) * static_cast<size_t>(vocab));
  const auto t1 = clock::now();
  if (R > 0) be_.copy_to_host(step_.argmax.data(), argmax_buf_.data(), static_cast<size_t>(R) * sizeof(int32_t));
  if (timed) profiler_->end(one_token_each, batch.num_tokens(), S, step_floor(batch, kv, recurrent));
  times_.prepare_s += std::chrono::duration<double>(t1 - t0).count();
  times_.gpu_wait_s += std::chrono::duration<double>(clock::now() - t1).count();
  const size_t row_bytes = static_cast<size_t>(vocab) * sizeof(float);
  for (int32_t i = 0; i < R; ++i) {
    const int32_t h = step_.host_row_of[static_cast<size_t>(i)];
    if (h < 0) continue;
    // Consecutive host rows come back in one copy.
    int32_t j = i + 1;
    while (j < R && step_.host_row_of[static_cast<size_t>(j)] == h + (j - i)) ++j;
    be_.copy_to_host(step_.host_logits.data() + static_cast<size_t>(h) * static_cast<size_t>(vocab),
                     static_cast<const char*>(logits_buf_.data()) + static_cast<size_t>(i) * row_bytes,
                     static_cast<size_t>(j - i) * row_bytes);
    i = j - 1;
  }
  copy_hidden_rows(hidden_rows);
  return step_;
}

void ModelRunner::apply_masks(const RowMasks& masks, int32_t R) {
  const auto M = static_cast<int64_t>(masks.rows.size());
  check_invariant(M <= max_seqs_ && masks.words.size() == static_cast<size_t>(M) * mask_words_,
                  "token masks must be one row of ceil(vocab / 64) words per masked row, at most max_seqs");
  for (int32_t r : masks.rows) check_invariant(r >= 0 && r < R, "a token mask names a row the step does not have");
  // Enqueued behind the forward pass (stream order): the host does not wait here.
  const size_t bits_bytes = masks.words.size() * sizeof(uint64_t);
  char* base = static_cast<char*>(mask_buf_.data());
  be_.copy_to_device(base, masks.words.data(), bits_bytes);
  be_.copy_to_device(base + bits_bytes, masks.rows.data(), masks.rows.size() * sizeof(int32_t));
  Tensor bits = mask_buf_.tensor(DType::I32, {M, static_cast<int64_t>(2 * mask_words_)});
  const Tensor rows(base + bits_bytes, DType::I32, bits.device, {M});
  const int64_t vocab = model_.config().vocab_size;
  Tensor logits = logits_buf_.tensor(DType::F32, {R, vocab});
  be_.apply_token_mask(logits, bits, rows);
  Tensor ids = argmax_buf_.tensor(DType::I32, {R});
  be_.argmax_rows(logits, ids);
}

void ModelRunner::copy_hidden_rows(std::span<const uint8_t> hidden_rows) {
  const auto R = static_cast<int32_t>(hidden_rows.size());
  step_.hidden_row_of.assign(static_cast<size_t>(R), -1);
  int32_t n = 0;
  for (int32_t i = 0; i < R; ++i)
    if (hidden_rows[static_cast<size_t>(i)]) step_.hidden_row_of[static_cast<size_t>(i)] = n++;
  const int64_t H = model_.config().hidden_size;
  step_.hidden.resize(static_cast<size_t>(n) * static_cast<size_t>(H));
  if (n == 0) return;
  const Tensor rows = model_.last_hidden_rows(R);
  const DType dt = rows.dtype;
  check_invariant(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
                  "hidden rows of an unexpected dtype " + std::string(dtype_name(dt)));
  const size_t row_bytes = static_cast<size_t>(H) * dtype_size(dt);
  hidden_staging_.resize(dt == DType::F32 ? 0 : static_cast<size_t>(H));
  for (int32_t i = 0; i < R; ++i) {
    const int32_t h = step_.hidden_row_of[static_cast<size_t>(i)];
    if (h < 0) continue;
    float* dst = step_.hidden.data() + static_cast<size_t>(h) * static_cast<size_t>(H);
    const void* src = rows.row(i);
    if (dt == DType::F32) {
      be_.copy_to_host(dst, src, row_bytes);
      continue;
    }
    be_.copy_to_host(hidden_staging_.data(), src, row_bytes);
    for (int64_t k = 0; k < H; ++k)
      dst[k] = dt == DType::BF16 ? bf16_to_f32(hidden_staging_[static_cast<size_t>(k)])
                                 : f16_to_f32(hidden_staging_[static_cast<size_t>(k)]);
  }
}

std::vector<int32_t> ModelRunner::decode_buckets(int32_t max) {
  std::vector<int32_t> out;
  for (int32_t b = 1; b <= max;) {
    out.push_back(b);
    b = b < 8 ? b * 2 : b < 64 ? b + 8 : b < 128 ? b + 16 : b + 32;
  }
  if (max > 0 && (out.empty() || out.back() != max)) out.push_back(max);
  return out;
}

int ModelRunner::capture_decode_graphs(PagedKvCache& kv, RecurrentState* recurrent,
                                       int32_t dummy_state_slot) {
  if (!be_.supports_graphs()) return 0;
  if (recurrent && dummy_state_slot < 0) return 0;  // padding would need a state slot
  if (kv.shape().num_blocks < 1 && kv.shape().num_layers > 0) return 0;
  dummy_state_slot_ = dummy_state_slot;
  block_size_ = kv.shape().block_size;
  for (int32_t bucket : decode_buckets(std::min(max_seqs_, max_tokens_))) {
    if (graphs_.count(bucket)) continue;
    // An eager run first (GEMM plans, kernel attributes), then the capture. Padding sequences
    // write no cache and only the dummy state slot, so these runs leave live state untouched.
    // The plan from the layout's maxima: the captured launches must hold for every replay.
    StepMeta meta = upload_padded_decode(nullptr, bucket);
    plan_attention(meta, nullptr, kv);
    forward_and_argmax(meta, kv, recurrent);
    be_.synchronize();
    be_.begin_capture();
    try {
      forward_and_argmax(meta, kv, recurrent);
    } catch (...) {
      try {
        be_.end_capture();
      } catch (...) {
      }
      throw;
    }
    graphs_[bucket] = be_.end_capture();
  }
  be_.synchronize();
  return static_cast<int>(graphs_.size());
}

}  // namespace pagoda
