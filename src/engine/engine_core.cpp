#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "backend/cpu/cpu_backend.h"
#include "core/device_error.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/draft_model_proposer.h"
#include "engine/grammar_masks.h"
#include "engine/ngram_proposer.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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

EngineCore::EngineCore(const std::string& model_dir, const EngineConfig& flags) {
  model_config_ = load_model_config(model_dir);
  config_ = resolve_engine_config(flags, model_config_);
  LOG_INFO("engine: " << config_.describe());
  backend_ = make_backend(config_.device, config_.num_threads, config_.dtype_flag);
  // A bf16 model on the CPU: prefill GEMMs take x rounded to bf16 (as CUDA's bf16 activations);
  // --dtype float32 keeps every product exact.
  if (auto* cpu = dynamic_cast<CpuBackend*>(backend_.get())) cpu->set_bf16_prefill(config_.model_dtype == DType::BF16);
  check_invariant(backend_->activation_dtype() == config_.activation_dtype,
                  "the backend computes in " + std::string(dtype_name(backend_->activation_dtype())) +
                      ", not the resolved activation dtype " + dtype_name(config_.activation_dtype));
  const auto start = Clock::now();
  const Checkpoint ckpt = Checkpoint::open_dir(model_dir);
  model_ = load_model(model_config_, ckpt, *backend_);
  if (config_.speculative.enabled() && config_.speculative.method == SpeculativeMethod::Mtp)
    draft_ = std::make_unique<DraftModelProposer>(model_->load_mtp_head(ckpt), *model_, *backend_);
  if (config_.speculative.enabled() && config_.speculative.method == SpeculativeMethod::DraftModel) {
    draft_ = std::make_unique<DraftModelProposer>(config_.speculative.model, model_config_, *backend_);
    check(draft_->config().max_position_embeddings >= config_.max_model_len,
          "--speculative-config: the draft model's max_position_embeddings (" +
              std::to_string(draft_->config().max_position_embeddings) + ") is below --max-model-len " +
              std::to_string(config_.max_model_len));
  }
  const double secs = seconds_since(start);
  if (secs > 1.0) LOG_INFO("weights loaded in " << secs << " s");  // the progress lines said how far
  plan_and_allocate();
}

EngineCore::~EngineCore() = default;

void EngineCore::plan_and_allocate() {
  const ModelConfig& mc = model_config_;
  SchedulerConfig sc;
  sc.max_num_seqs = config_.max_num_seqs;
  sc.max_num_batched_tokens = config_.max_num_batched_tokens;
  sc.max_model_len = config_.max_model_len;
  sc.block_size = config_.block_size;
  sc.use_state_slots = mc.num_layers_of(LayerKind::LinearAttention) > 0;
  for (int64_t id : mc.eos_token_ids) sc.eos_token_ids.push_back(static_cast<int32_t>(id));
  sc.seed = config_.seed;
  sc.enable_prefix_caching = config_.enable_prefix_caching;
  sc.state_checkpoint_interval = config_.state_checkpoint_interval;
  sc.prefix_hash_bits = config_.prefix_cache_hash_bits;
  const SpeculativeConfig& spec = config_.speculative;
  sc.num_speculative_tokens = spec.enabled() ? spec.num_speculative_tokens : 0;
  const int32_t max_blocks_per_seq = (sc.max_model_len + sc.block_size - 1) / sc.block_size;

  // The runner's workspace is measured before the plan: it is one of its inputs.
  // Each draft adds a logits row to its sequence's one.
  const int32_t max_rows = static_cast<int32_t>(std::min<int64_t>(
      sc.max_num_batched_tokens, static_cast<int64_t>(sc.max_num_seqs) * (1 + sc.num_speculative_tokens)));
  runner_ = std::make_unique<ModelRunner>(*backend_, *model_, sc.max_num_batched_tokens, sc.max_num_seqs,
                                          max_blocks_per_seq, max_rows);

  MemoryPlanInputs in;
  in.weight_bytes = static_cast<int64_t>(model_->weight_bytes());
  in.activation_bytes = static_cast<int64_t>(runner_->workspace_bytes());
  if (draft_) {
    // Its own runner and KV pools (as many blocks as the target's: they share the block tables,
    // plus lookahead room for the drafts past a sequence's last block).
    const int32_t lookahead_blocks = (sc.num_speculative_tokens + sc.block_size - 1) / sc.block_size + 1;
    in.weight_bytes += static_cast<int64_t>(draft_->weight_bytes());
    in.activation_bytes += static_cast<int64_t>(
        draft_->reserve(sc.max_num_batched_tokens, sc.max_num_seqs, max_blocks_per_seq + lookahead_blocks));
  }
  // The conv state is kept in the activation dtype of the backend (DESIGN.md §5).
  in.state_bytes_per_seq = mc.state_bytes_per_sequence(config_.activation_dtype);
  // Decode graphs pad a step with sequences that need a state slot of their own: one more slot,
  // never handed to a sequence (the scheduler's pool has max_num_seqs).
  const bool graphs = !config_.enforce_eager && backend_->supports_graphs();
  const int32_t state_slots = sc.max_num_seqs + (graphs && sc.use_state_slots ? 1 : 0);
  // Speculative decoding on a hybrid model: a copy of each sequence's state from before its
  // verification step, restored when a draft is rejected (the state went past it).
  const int32_t spec_slots = sc.use_state_slots && sc.num_speculative_tokens > 0 ? sc.max_num_seqs : 0;
  in.max_num_seqs = state_slots + spec_slots;
  in.kv_bytes_per_token = mc.kv_bytes_per_token(config_.kv_cache_dtype) +
                          (draft_ ? draft_->kv_bytes_per_token(config_.kv_cache_dtype) : 0);
  in.block_size = sc.block_size;
  in.max_model_len = sc.max_model_len;
  in.num_blocks_override = config_.num_gpu_blocks_override;
  in.kv_cache_memory_bytes = config_.kv_cache_memory_bytes;
  in.snapshot_fraction = sc.use_state_slots ? config_.state_snapshot_memory_fraction : 0.0;
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
  plan_ = plan_memory(in);
  std::istringstream plan_lines(plan_.describe());
  for (std::string line; std::getline(plan_lines, line);)
    if (!line.empty()) LOG_INFO(line);
  if (backend_->device() == Device::CPU)
    LOG_INFO("kv cache on the cpu: reserved, not resident; its pages are committed as blocks are first written, so "
             "resident memory grows with the tokens held (weights in place from the mapped checkpoint)");

  KvCacheShape shape;
  shape.num_layers = static_cast<int32_t>(mc.num_layers_of(LayerKind::FullAttention));
  shape.num_blocks = static_cast<int32_t>(plan_.num_blocks);
  shape.block_size = sc.block_size;
  shape.num_kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  shape.head_dim = static_cast<int32_t>(mc.head_dim);
  shape.dtype = config_.kv_cache_dtype;
  kv_ = std::make_unique<PagedKvCache>(*backend_, shape);
  if (draft_) draft_->allocate(shape.num_blocks, shape.block_size, shape.dtype);
  if (sc.use_state_slots) {
    // One slot per schedulable sequence, then the prefix cache's snapshots: exactly
    // plan_.state_bytes + plan_.snapshot_bytes.
    spec_base_ = state_slots;
    snapshot_base_ = state_slots + spec_slots;
    const auto slots = static_cast<int32_t>(snapshot_base_ + plan_.num_snapshots);
    state_ = std::make_unique<RecurrentState>(
        *backend_, RecurrentStateShape::for_model(mc, slots, config_.activation_dtype));
    check_invariant(static_cast<int64_t>(state_->bytes()) == plan_.state_bytes + plan_.snapshot_bytes,
                    "the recurrent state allocation differs from the memory plan");
  }
  sc.num_state_snapshots = static_cast<int32_t>(plan_.num_snapshots);
  sc.num_kv_blocks = shape.num_blocks;
  scheduler_ = std::make_unique<Scheduler>(sc);
  sampler_ = std::make_unique<Sampler>(sc.eos_token_ids);
  if (sc.num_speculative_tokens > 0) spec_totals_.spec_accepted_per_pos.assign(static_cast<size_t>(sc.num_speculative_tokens), 0);
  if (graphs) {
    const auto t0 = Clock::now();
    const int n = runner_->capture_decode_graphs(*kv_, state_.get(), sc.use_state_slots ? sc.max_num_seqs : -1);
    LOG_INFO("captured " + std::to_string(n) + " decode graphs (batch buckets up to " +
             std::to_string(std::min(sc.max_num_seqs, sc.max_num_batched_tokens)) + ") in " +
             std::to_string(static_cast<int>(seconds_since(t0) * 1000)) + " ms");
  }
}

void EngineCore::check_prompt(const std::vector<int32_t>& prompt) const {
  for (int32_t id : prompt)
    check(id >= 0 && id < model_config_.vocab_size,
          "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
              std::to_string(model_config_.vocab_size) + ")");
}

int64_t EngineCore::add_request(std::vector<int32_t> prompt, SamplingParams params) {
  check_prompt(prompt);
  const int64_t id = next_id_++;
  scheduler_->add(id, std::move(prompt), std::move(params));
  return id;
}

int64_t EngineCore::add_embedding_request(std::vector<int32_t> prompt) {
  check_prompt(prompt);
  const int64_t id = next_id_++;
  SamplingParams params;
  params.max_tokens = 1;  // nothing is sampled; validation wants a positive value
  scheduler_->add(id, std::move(prompt), std::move(params), /*embed=*/true);
  return id;
}

ThreadPool& EngineCore::host_pool() {
  // The CPU backend's pool is idle while the host samples: share it rather than start more
  // threads that would compete with it for the same cores.
  if (auto* cpu = dynamic_cast<CpuBackend*>(backend_.get())) return cpu->pool();
  if (!own_pool_) own_pool_ = std::make_unique<ThreadPool>(static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency()))));
  return *own_pool_;
}

void EngineCore::sample_on_host(const StepLogits& logits, std::span<const SamplingRows> seqs,
                                std::vector<std::vector<SampleResult>>& samples) {
  std::vector<size_t> on_host;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SamplingRows& r = seqs[i];
    if (logits.host_row_of[static_cast<size_t>(r.first_row)] >= 0) {
      on_host.push_back(i);
      continue;
    }
    // Greedy on the device: each draft is accepted while it is the argmax of the row before it.
    const std::vector<int32_t>& drafts = r.seq->draft_tokens;
    for (int32_t j = 0; j <= r.num_drafts; ++j) {
      const int32_t t = logits.argmax[static_cast<size_t>(r.first_row + j)];
      samples[i].push_back(SampleResult{t, 0.0f, {}});
      if (j == r.num_drafts || t != drafts[static_cast<size_t>(j)]) break;
    }
  }
  if (on_host.empty()) return;
  const auto vocab = static_cast<size_t>(model_config_.vocab_size);
  // Each sequence uses only its own parameters, history and RNG: sequences run in parallel. A
  // row costs a few passes over the vocabulary plus a partial sort.
  auto sample_one = [&](const SamplingRows& r) -> std::vector<SampleResult> {
    Sequence& seq = *r.seq;
    const auto first = static_cast<size_t>(logits.host_row_of[static_cast<size_t>(r.first_row)]);
    const std::span<const float> rows(logits.host_logits.data() + first * vocab,
                                      static_cast<size_t>(r.num_drafts + 1) * vocab);
    // A sequence with a grammar never brings drafts: its one row is masked.
    if (r.num_drafts == 0)
      return {sampler_->sample_row(rows, seq.params(), seq.prompt(), seq.output(), seq.rng(),
                                   seq.matcher ? &seq.grammar_mask : nullptr)};
    const std::span<const int32_t> drafts(seq.draft_tokens.data(), static_cast<size_t>(r.num_drafts));
    return sampler_->sample_with_drafts(rows, vocab, drafts, seq.params(), seq.prompt(), seq.output(), seq.rng());
  };
  host_pool().parallel_for(
      static_cast<int64_t>(on_host.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) {
          const size_t i = on_host[static_cast<size_t>(n)];
          try {
            samples[i] = sample_one(seqs[i]);
          } catch (const std::exception& e) {
            // Its buffers are sized by its own parameters (logprobs, penalties): it fails alone;
            // a placeholder token keeps the step's shape and is dropped with the request.
            seqs[i].seq->step_error = std::string("sampling its token failed (") + e.what() + ")";
            samples[i] = {SampleResult{seqs[i].seq->last_token(), 0.0f, {}}};
          }
        }
      },
      1, 16.0 * static_cast<double>(vocab));
}

std::vector<std::vector<SampleResult>> EngineCore::execute_and_sample(const SchedulerOutput& sched,
                                                                      std::vector<std::vector<float>>& hidden_out) {
  std::vector<SamplingRows> seqs;
  int32_t row = 0;
  for (const ScheduledSequence& s : sched.scheduled)
    if (s.samples) {
      seqs.push_back({s.seq, row, s.num_drafts});
      row += 1 + s.num_drafts;
    }
  const std::vector<Sequence*> rows = sched.sampling_seqs();
  // Greedy rows are decided on the device; only the rows the host sampler needs come back.
  // Embedding rows sample nothing: they take the row's hidden state instead.
  std::vector<uint8_t> host(static_cast<size_t>(row)), hidden(static_cast<size_t>(row));
  bool any_hidden = false;
  for (const SamplingRows& r : seqs) {
    const bool embed = r.seq->embed;
    const bool on_host = !embed && sampler_->needs_logits(*r.seq);
    for (int32_t j = 0; j <= r.num_drafts; ++j) {
      hidden[static_cast<size_t>(r.first_row + j)] = embed ? 1 : 0;
      host[static_cast<size_t>(r.first_row + j)] = on_host ? 1 : 0;
    }
    any_hidden |= embed;
  }
  // Prefix-cache state snapshots: restored into a sequence's slot before the forward pass, taken
  // from it after; both are device copies in stream order, no host wait. A hybrid sequence that
  // verifies drafts keeps a copy of its state from before the step, for a rejection to restore.
  for (const ScheduledSequence& s : sched.scheduled) {
    if (s.restore_snapshot >= 0) state_->copy_slot(snapshot_base_ + s.restore_snapshot, s.seq->state_slot);
    if (s.num_drafts > 0 && state_) state_->copy_slot(s.seq->state_slot, spec_base_ + s.seq->state_slot);
  }
  // Structured output: the masks of this step depend only on the tokens so far, so they are
  // computed on a worker thread while the forward pass runs.
  // Every matcher is made before the worker starts: it reads them all.
  bool any_matcher = false;
  for (Sequence* s : rows) {
    if (s->embed || !s->params().grammar) continue;
    // Until grammar_after_token is sampled the sequence has no matcher: unconstrained.
    const int32_t after = s->params().grammar_after_token;
    if (!s->matcher && (after < 0 || (!s->output().empty() && s->output().back() == after))) {
      // Its size is the request's doing (a large grammar): a failure fails this request alone.
      try {
        fault_point(FaultSite::GrammarAllocation);
        s->matcher.emplace(s->params().grammar);
      } catch (const std::exception& e) {
        s->matcher.reset();
        s->step_error = std::string("making its structured-output state failed (") + e.what() + ")";
        continue;
      }
    }
    any_matcher |= s->matcher.has_value();
  }
  // If the forward pass throws, the workers still read `rows`: wait for them before it goes.
  struct WaitForMasks {
    GrammarMaskWorkers* w = nullptr;
    ~WaitForMasks() {
      if (w) try {
          w->wait();
        } catch (...) {
        }
    }
  } pending;
  if (any_matcher) {
    if (!mask_workers_)
      mask_workers_ = std::make_unique<GrammarMaskWorkers>(dynamic_cast<CpuBackend*>(backend_.get()) ? 0 : -1);
    mask_workers_->start(rows, config_.max_model_len);
    pending.w = mask_workers_.get();
  }
  // A greedy row under a grammar is masked on the device, after the forward pass is enqueued and
  // its mask is ready; only its token id comes back. Other grammar rows are masked by the host
  // sampler.
  bool any_device_mask = false;
  for (const SamplingRows& r : seqs)
    any_device_mask |= r.seq->matcher.has_value() && !host[static_cast<size_t>(r.first_row)];
  RowMasks masks;
  const RowMaskSource mask_source = [&]() -> const RowMasks& {
    if (pending.w) std::exchange(pending.w, nullptr)->wait();
    const size_t width = (static_cast<size_t>(model_config_.vocab_size) + 63) / 64;
    for (const SamplingRows& r : seqs) {
      // A row whose mask failed is sampled unmasked and its token dropped (the request fails).
      if (!r.seq->matcher || !r.seq->step_error.empty() || host[static_cast<size_t>(r.first_row)]) continue;
      masks.rows.push_back(r.first_row);
      const std::vector<uint64_t>& m = r.seq->grammar_mask;
      const size_t n = std::min(m.size(), width);
      masks.words.insert(masks.words.end(), m.begin(), m.begin() + static_cast<std::ptrdiff_t>(n));
      masks.words.resize(masks.rows.size() * width, 0);  // tokens past the grammar's vocab: off
    }
    return masks;
  };
  fault_point(FaultSite::Step);
  fault_point(FaultSite::FatalStep);
  const StepLogits& out = runner_->execute_greedy(
      sched.batch, *kv_, state_.get(), host, any_hidden ? std::span<const uint8_t>(hidden) : std::span<const uint8_t>(),
      any_device_mask ? mask_source : RowMaskSource{});
  for (const ScheduledSequence& s : sched.scheduled)
    if (s.take_snapshot >= 0) state_->copy_slot(s.seq->state_slot, snapshot_base_ + s.take_snapshot);
  if (pending.w) std::exchange(pending.w, nullptr)->wait();
  for (Sequence* s : rows)
    if (!s->step_error.empty()) s->matcher.reset();  // no mask: the host samples it unmasked
  std::vector<std::vector<SampleResult>> samples(seqs.size());
  sample_on_host(out, seqs, samples);
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i]->matcher && !samples[i].empty()) {
      try {
        rows[i]->matcher->accept(samples[i].front().token);
      } catch (const Error& e) {
        LOG_WARN("structured output of request " << rows[i]->id() << ": " << e.what());
      } catch (const std::exception& e) {
        // e.g. bad_alloc of a parser state its grammar made large: that request fails alone.
        rows[i]->matcher.reset();
        rows[i]->step_error = std::string("advancing its structured-output state failed (") + e.what() + ")";
      }
    }
  hidden_out.assign(seqs.size(), {});
  const auto H = static_cast<size_t>(model_config_.hidden_size);
  for (size_t i = 0; i < seqs.size(); ++i)
    if (seqs[i].seq->embed) {
      const float* h = out.hidden.data() + static_cast<size_t>(out.hidden_row_of[static_cast<size_t>(seqs[i].first_row)]) * H;
      hidden_out[i].assign(h, h + H);
    }
  return samples;
}

void EngineCore::settle_drafts(const SchedulerOutput& sched, std::span<const std::vector<int32_t>> tokens) {
  size_t k = 0;
  for (const ScheduledSequence& s : sched.scheduled) {
    if (!s.samples) continue;
    const auto accepted = static_cast<int32_t>(tokens[k++].size()) - 1;
    if (s.num_drafts == 0) continue;
    // A rejected draft on a hybrid model: the state goes back to before the step.
    if (scheduler_->rollback_state(s, accepted) && s.seq->state_slot >= 0)
      state_->copy_slot(spec_base_ + s.seq->state_slot, s.seq->state_slot);
    ++spec_totals_.spec_num_drafts;
    spec_totals_.spec_num_draft_tokens += s.num_drafts;
    spec_totals_.spec_num_accepted_tokens += accepted;
    for (int32_t j = 0; j < accepted; ++j) ++spec_totals_.spec_accepted_per_pos[static_cast<size_t>(j)];
  }
}

size_t EngineCore::kv_cache_bytes() const { return kv_->bytes() + (draft_ ? draft_->kv_bytes() : 0); }

void EngineCore::propose_drafts() {
  const SpeculativeConfig& spec = config_.speculative;
  if (!spec.enabled()) return;
  for (Sequence* seq : scheduler_->running()) {
    seq->draft_tokens.clear();
    const int32_t k = draft_budget(*seq, spec.num_speculative_tokens, config_.max_model_len);
    if (k <= 0) continue;
    seq->draft_tokens = test_proposer_ ? test_proposer_(*seq, k)
                                       : propose_ngram(seq->tokens(), k, spec.prompt_lookup_min, spec.prompt_lookup_max);
    if (seq->draft_tokens.size() > static_cast<size_t>(k)) seq->draft_tokens.resize(static_cast<size_t>(k));
  }
}

namespace {

void fill_from(const Sequence& seq, EngineCoreOutput& o) {
  o.id = seq.id();
  o.finished = seq.finished();
  o.finish_reason = seq.finish_reason;
  o.stop_token = seq.stop_token;
  o.finish_detail = seq.finish_detail;
  o.num_prompt_tokens = seq.num_prompt_tokens();
  o.num_output_tokens = seq.num_output_tokens();
  o.num_cached_tokens = std::max(seq.num_cached_tokens, 0);
}

}  // namespace

void EngineCore::run_scheduled(const SchedulerOutput& sched, std::vector<EngineCoreOutput>& outs) {
  if (!sched.empty()) {
    std::vector<std::vector<float>> hidden;
    std::vector<std::vector<SampleResult>> samples = execute_and_sample(sched, hidden);
    std::vector<std::vector<int32_t>> tokens(samples.size());
    for (size_t i = 0; i < samples.size(); ++i)
      for (const SampleResult& r : samples[i]) tokens[i].push_back(r.token);
    const std::vector<Sequence*> rows = sched.sampling_seqs();
    for (Sequence* s : rows)
      if (!s->step_error.empty())
        scheduler_->fail(s->id(), "request " + std::to_string(s->id()) + " failed: " + std::exchange(s->step_error, {}) +
                                      "; the other requests were not affected");
    std::vector<int32_t> before(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) before[i] = rows[i]->num_tokens();
    settle_drafts(sched, tokens);
    scheduler_->update_from_output(sched, tokens);
    for (size_t i = 0; i < rows.size(); ++i) {
      EngineCoreOutput& o = outs.emplace_back();
      o.id = rows[i]->id();
      if (rows[i]->embed) {
        o.embedding = std::move(hidden[i]);
        continue;
      }
      // What the sequence kept: a stop inside the accepted drafts ends it there.
      const auto kept = static_cast<size_t>(rows[i]->num_tokens() - before[i]);
      for (size_t j = 0; j < kept && j < samples[i].size(); ++j) {
        o.new_token_ids.push_back(tokens[i][j]);
        o.samples.push_back(std::move(samples[i][j]));
      }
    }
    if (draft_ && !test_proposer_) draft_->propose(*scheduler_, sched, config_.speculative.num_speculative_tokens);
    else propose_drafts();
  }
}

EngineCoreOutputs EngineCore::step() {
  const auto t_start = Clock::now();
  EngineCoreOutputs result;
  std::vector<EngineCoreOutput>& outs = result.outputs;
  SchedulerOutput sched;
  bool failed = false;
  std::string failure;
  try {
    sched = scheduler_->schedule();
    for (const ScheduledSequence& s : sched.scheduled) result.stats.step_scheduled.push_back(s.seq->id());
    run_scheduled(sched, outs);
  } catch (const FatalDeviceError&) {
    throw;  // nothing on the device can be trusted: the caller ends the process
  } catch (const std::exception& e) {
    failed = true;
    failure = e.what();
  } catch (...) {
    failed = true;
    failure = "an exception that is not a std::exception";
  }
  if (failed) {
    // The step's tokens are not delivered: its requests fail, every other goes on. (A throw from
    // schedule() left `sched` empty: the scheduler has failed that step's requests already.)
    outs.clear();
    ++step_failures_;
    result.stats.step_failed = true;
    result.stats.step_error = failure;
    scheduler_->fail_step(sched, "the engine step that ran this request failed (" + failure +
                                     "); the requests of that step were stopped and the others go on: retry this "
                                     "request");
  }
  // Finished sequences leave the scheduler here: their outputs get the finish fields; those that
  // finished without a new token in this step (abort, can never fit) get an output of their own.
  std::vector<std::unique_ptr<Sequence>> finished = scheduler_->take_finished();
  std::unordered_map<int64_t, const Sequence*> done;
  for (auto& f : finished) done[f->id()] = f.get();
  for (EngineCoreOutput& o : outs) {
    auto it = done.find(o.id);
    const Sequence* seq = it != done.end() ? it->second : scheduler_->find(o.id);
    check_invariant(seq != nullptr, "request " + std::to_string(o.id) + " of the step has no sequence");
    fill_from(*seq, o);
    if (it != done.end()) done.erase(it);
  }
  for (auto& f : finished)
    if (done.count(f->id())) fill_from(*f, outs.emplace_back());
  // In id order, as a request's choices were added.
  std::sort(outs.begin(), outs.end(), [](const EngineCoreOutput& a, const EngineCoreOutput& b) { return a.id < b.id; });
  ++steps_;
  const double step_s = seconds_since(t_start);
  step_s_ += step_s;
  refresh_state(result.stats);
  result.stats.step_preemptions = sched.num_preempted;
  result.stats.step_num_tokens = sched.batch.num_tokens();
  result.stats.step_num_decodes = sched.num_decodes;
  result.stats.step_s = step_s;
  return result;
}

EngineStats EngineCore::stats() const {
  EngineStats s;
  refresh_state(s);
  return s;
}

void EngineCore::refresh_state(EngineStats& s) const {
  s.num_running = scheduler_->num_running();
  s.num_waiting = scheduler_->num_waiting();
  s.kv_usage = scheduler_->kv_usage();
  s.num_preemptions = scheduler_->num_preemptions();
  s.prefix_cache_queries = scheduler_->prefix_cache_queries();
  s.prefix_cache_hits = scheduler_->prefix_cache_hits();
  s.prefix_caching = config_.enable_prefix_caching;
  s.spec_num_drafts = spec_totals_.spec_num_drafts;
  s.spec_num_draft_tokens = spec_totals_.spec_num_draft_tokens;
  s.spec_num_accepted_tokens = spec_totals_.spec_num_accepted_tokens;
  s.spec_accepted_per_pos = spec_totals_.spec_accepted_per_pos;
  s.num_step_failures = step_failures_;
}

StepTimes EngineCore::step_times() const {
  StepTimes t = runner_->times();
  t.steps = steps_;
  t.total_s = step_s_;
  return t;
}

}  // namespace pagoda
