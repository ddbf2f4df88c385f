#include "engine/worker.h"

#include "model/vision_encoder.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "backend/devices.h"
#include "backend/timed_backend.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/draft_model_proposer.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes of memory the OS could give us now (MemAvailable), or 0 when unknown.
int64_t available_host_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

}  // namespace

Worker::Worker(const std::string& model_dir, const ModelConfig& model_config, const ResolvedEngineConfig& config,
               const WorkerSpec& spec)
    : config_(config), spec_(spec) {
  backend_ = make_backend(config_.device, config_.num_threads, config_.dtype_flag, config_.device_ordinal(spec_.index));
  // --profile-steps: the driver's ops go through a timing wrapper (engine/step_profiler.h).
  if (config_.profile_steps > 0 && spec_.driver) backend_ = std::make_unique<TimedBackend>(std::move(backend_));
  // A bf16 model on the CPU: prefill GEMMs take x rounded to bf16 (as CUDA's bf16 activations);
  // --dtype float32 keeps every product exact.
  backend_->set_bf16_prefill(config_.model_dtype == DType::BF16);
  check_invariant(backend_->activation_dtype() == config_.activation_dtype,
                  "the backend computes in " + std::string(dtype_name(backend_->activation_dtype())) +
                      ", not the resolved activation dtype " + dtype_name(config_.activation_dtype));
  const auto start = Clock::now();
  const Checkpoint ckpt = Checkpoint::open_dir(model_dir);
  ShardSpec shard = spec_.shard;
  std::vector<LoraAdapter> startup;  // --lora-modules: read and checked before anything loads
  if (config_.lora.enabled) {
    const LoraConfig& l = config_.lora;
    check_invariant(spec_.loras != nullptr, "Worker: a LoRA engine's worker needs the adapter catalog");
    lora_ = std::make_unique<LoraSet>(*backend_, l.max_loras, l.max_lora_rank,
                                      l.max_cpu_loras > 0 ? l.max_cpu_loras : l.max_loras, l.runtime_updates);
    for (const LoraEntry& e : spec_.loras->served()) {
      startup.push_back(load_lora_adapter(e.name, e.path, l.max_lora_rank));
      lora_->expect(e.id, startup.back());
    }
    shard.lora = lora_.get();
  }
  model_ = load_model(model_config, ckpt, *backend_, shard);
  for (const LoraAdapter& a : startup) lora_->validate(a);
  if (config_.images) {
    vision_ = load_vision_encoder(ckpt, *backend_);
    check(vision_ != nullptr && vision_->out_hidden() == model_config.hidden_size,
          "the checkpoint's vision_config does not fit its decoder (out_hidden_size != hidden_size)");
  }
  const SpeculativeConfig& spec_cfg = config_.speculative;
  if (spec_.driver && spec_cfg.enabled() && spec_cfg.method == SpeculativeMethod::Mtp)
    draft_ = std::make_unique<DraftModelProposer>(model_->load_mtp_head(ckpt), *model_, *backend_);
  if (spec_.driver && spec_cfg.enabled() && spec_cfg.method == SpeculativeMethod::Eagle3) {
    Eagle3Head head = load_eagle3_head(spec_cfg.model, *model_, *backend_);
    model_->set_aux_hidden_layers(head.aux_layers);  // before plan() reserves the target's workspace
    draft_ = std::make_unique<DraftModelProposer>(std::move(head), *model_, *backend_);
  }
  if (spec_.driver && spec_cfg.enabled() && spec_cfg.method == SpeculativeMethod::DraftModel) {
    draft_ = std::make_unique<DraftModelProposer>(spec_cfg.model, model_config, *backend_);
    check(draft_->config().max_position_embeddings >= config_.max_model_len,
          "--speculative-config: the draft model's max_position_embeddings (" +
              std::to_string(draft_->config().max_position_embeddings) + ") is below --max-model-len " +
              std::to_string(config_.max_model_len));
  }
  const double secs = seconds_since(start);
  if (secs > 1.0) LOG_INFO("weights loaded in " << secs << " s");  // the progress lines said how far
}

Worker::~Worker() = default;

MemoryPlan Worker::plan(const SchedulerConfig& sc) {
  const ModelConfig& mc = model_->rank_config();
  const int32_t max_blocks_per_seq = (sc.max_model_len + sc.block_size - 1) / sc.block_size;
  // The runner's workspace is measured before the plan: it is one of its inputs.
  // Each draft adds a logits row to its sequence's one.
  const int32_t max_rows = static_cast<int32_t>(std::min<int64_t>(
      sc.max_num_batched_tokens, static_cast<int64_t>(sc.max_num_seqs) * (1 + sc.num_speculative_tokens)));
  runner_ = std::make_unique<ModelRunner>(*backend_, *model_, sc.max_num_batched_tokens, sc.max_num_seqs,
                                          max_blocks_per_seq, max_rows);
  runner_->set_lora(lora_.get());
  if (auto* timed = dynamic_cast<TimedBackend*>(backend_.get())) {  // before the KV cache takes the memory
    profiler_ = std::make_unique<StepProfiler>(*timed, config_.profile_steps);
    runner_->set_profiler(profiler_.get());
  }
  runner_->set_vision(vision_.get(), config_.multimodal.encoder_cache_tokens);

  MemoryPlanInputs in;
  in.weight_bytes = static_cast<int64_t>(model_->weight_bytes()) +
                    (vision_ ? static_cast<int64_t>(vision_->weight_bytes()) : 0);
  in.activation_bytes = static_cast<int64_t>(runner_->workspace_bytes());
  if (draft_) {
    // Its own runner and KV pools (as many blocks as the target's: they share the block tables,
    // plus lookahead room for the drafts past a sequence's last block).
    const int32_t lookahead_blocks = (sc.num_speculative_tokens + sc.block_size - 1) / sc.block_size + 1;
    in.weight_bytes += static_cast<int64_t>(draft_->weight_bytes());
    in.activation_bytes += static_cast<int64_t>(
        draft_->reserve(sc.max_num_batched_tokens, sc.max_num_seqs, max_blocks_per_seq + lookahead_blocks));
  }
  // The conv state is kept in the activation dtype of the backend (docs/design.md §5).
  in.state_bytes_per_seq = mc.state_bytes_per_sequence(config_.activation_dtype, config_.ssm_state_dtype);
  // Decode graphs pad a step with sequences that need a state slot of their own: one more slot,
  // never handed to a sequence (the scheduler's pool has max_num_seqs).
  const bool graphs = !config_.enforce_eager && backend_->supports_graphs();
  state_slots_ = sc.max_num_seqs + (graphs && sc.use_state_slots ? 1 : 0);
  // Speculative decoding on a hybrid model: a copy of each sequence's state from before its
  // verification step, restored when a draft is rejected (the state went past it).
  spec_slots_ = sc.use_state_slots && sc.num_speculative_tokens > 0 ? sc.max_num_seqs : 0;
  in.max_num_seqs = state_slots_ + spec_slots_;
  in.kv_bytes_per_token = mc.kv_bytes_per_token(config_.kv_cache_dtype) +
                          (draft_ ? draft_->kv_bytes_per_token(config_.kv_cache_dtype) : 0);
  in.block_size = sc.block_size;
  in.max_model_len = sc.max_model_len;
  in.num_blocks_override = config_.num_gpu_blocks_override;
  in.kv_cache_memory_bytes = config_.kv_cache_memory_bytes;
  in.snapshot_fraction = sc.use_state_slots ? config_.state_snapshot_memory_fraction : 0.0;
  if (const int64_t most = max_tensor_elements(backend_->device()); most > 0) {
    // One layer's K (or V) cache is [blocks, block_size, kv heads, head_dim]; its recurrent state
    // [slots, v heads, key dim, value dim] and conv state [slots, conv dim, width].
    in.max_blocks = most / std::max<int64_t>(int64_t{sc.block_size} * mc.num_kv_heads * mc.head_dim, 1);
    const RecurrentStateShape st =
        RecurrentStateShape::for_model(mc, 1, config_.activation_dtype, config_.ssm_state_dtype);
    const int64_t per_slot = std::max(st.num_v_heads * st.key_dim * st.value_dim, st.conv_dim * st.conv_width);
    if (per_slot > 0) in.max_state_slots = most / per_slot;
  }
  // The CPU, and a device whose memory is the host's (Vulkan on lavapipe, integrated GPUs, Apple:
  // total_memory() 0), have no device memory to fill.
  const bool host_memory = backend_->device() == Device::CPU || backend_->total_memory() == 0;
  if (host_memory) {
    // By default the KV cache gets what max_num_seqs sequences of max_model_len could use, but
    // never more than a quarter of free memory.
    in.total_bytes = available_host_memory();
    in.utilization = 1.0;
    if (in.kv_cache_memory_bytes == 0 && in.num_blocks_override == 0) {
      // Whole blocks: a sequence of max_model_len tokens takes ceil(len / block_size) of them.
      const int64_t want = in.kv_bytes_per_token * max_blocks_per_seq * sc.block_size * sc.max_num_seqs;
      in.kv_cache_memory_bytes = std::min(want, in.total_bytes / 4);
    }
  } else {
    in.total_bytes = backend_->total_memory();
    in.utilization = config_.gpu_memory_utilization;
  }
  return plan_memory(in);
}

void Worker::allocate(const MemoryPlan& plan, const SchedulerConfig& sc) {
  const ModelConfig& mc = model_->rank_config();
  KvCacheShape shape;
  shape.num_layers = static_cast<int32_t>(mc.num_layers_of(LayerKind::FullAttention));
  shape.num_blocks = static_cast<int32_t>(plan.num_blocks);
  shape.block_size = sc.block_size;
  shape.num_kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  shape.head_dim = static_cast<int32_t>(mc.head_dim);
  shape.dtype = config_.kv_cache_dtype;
  kv_ = std::make_unique<PagedKvCache>(*backend_, shape);
  if (draft_) draft_->allocate(shape.num_blocks, shape.block_size, shape.dtype);
  if (sc.use_state_slots) {
    // One slot per schedulable sequence, then the prefix cache's snapshots: exactly
    // plan.state_bytes + plan.snapshot_bytes.
    spec_base_ = state_slots_;
    snapshot_base_ = state_slots_ + spec_slots_;
    const auto slots = static_cast<int32_t>(snapshot_base_ + plan.num_snapshots);
    state_ = std::make_unique<RecurrentState>(*backend_,
                                              RecurrentStateShape::for_model(mc, slots, config_.activation_dtype,
                                                                             config_.ssm_state_dtype));
    check_invariant(static_cast<int64_t>(state_->bytes()) == plan.state_bytes + plan.snapshot_bytes,
                    "the recurrent state allocation differs from the memory plan");
  }
  if (!config_.enforce_eager && backend_->supports_graphs()) {
    const auto t0 = Clock::now();
    const int n = runner_->capture_decode_graphs(*kv_, state_.get(), sc.use_state_slots ? sc.max_num_seqs : -1);
    LOG_INFO("captured " + std::to_string(n) + " decode graphs (batch buckets up to " +
             std::to_string(std::min(sc.max_num_seqs, sc.max_num_batched_tokens)) + ") in " +
             std::to_string(static_cast<int>(seconds_since(t0) * 1000)) + " ms");
  }
}

void Worker::before_forward(const SchedulerOutput& sched) {
  // Device copies in stream order, no host wait.
  for (const ScheduledSequence& s : sched.scheduled) {
    if (s.restore_snapshot >= 0) state_->copy_slot(snapshot_base_ + s.restore_snapshot, s.seq->state_slot);
    if (s.num_drafts > 0 && state_) state_->copy_slot(s.seq->state_slot, spec_base_ + s.seq->state_slot);
  }
}

const StepLogits& Worker::execute(const StepBatch& batch, std::span<const uint8_t> host_rows,
                                  std::span<const uint8_t> hidden_rows, const RowMaskSource& masks, bool profiled) {
  for (const auto& [slot, id] : batch.lora_loads) {
    const std::optional<LoraEntry> e = spec_.loras ? spec_.loras->get(id) : std::nullopt;
    check_invariant(lora_ && e.has_value(), "Worker: LoRA adapter " + std::to_string(id) + " is not in the catalog");
    lora_->load(slot, id, e->name, e->path);
  }
  return runner_->execute_greedy(batch, *kv_, state_.get(), host_rows, hidden_rows, masks, profiled);
}

void Worker::after_forward(const SchedulerOutput& sched) {
  for (const ScheduledSequence& s : sched.scheduled)
    if (s.take_snapshot >= 0) state_->copy_slot(s.seq->state_slot, snapshot_base_ + s.take_snapshot);
}

void Worker::restore_pre_step_state(int32_t slot) {
  if (state_) state_->copy_slot(spec_base_ + slot, slot);
}

Proposer* Worker::draft_proposer() { return draft_.get(); }

size_t Worker::kv_cache_bytes() const { return (kv_ ? kv_->bytes() : 0) + (draft_ ? draft_->kv_bytes() : 0); }

}  // namespace pagoda
