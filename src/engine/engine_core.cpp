#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/device_error.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/grammar_masks.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

EngineCore::EngineCore(const std::string& model_dir, const EngineConfig& flags, std::shared_ptr<LoraCatalog> shared_loras) {
  model_config_ = load_model_config(model_dir);
  apply_quantization_flag(flags.quantization, model_config_.quantization);
  config_ = resolve_engine_config(flags, model_config_);
  LOG_INFO("engine: " << config_.describe());
  if (model_config_.quantization.method != WeightQuantization::Method::None) LOG_INFO("weights: " << model_config_.quantization.describe());
  if (config_.lora.enabled) {
    if (shared_loras) {
      loras_ = std::move(shared_loras);
    } else {
      loras_ = std::make_shared<LoraCatalog>();
      for (const LoraModule& m : config_.lora.modules) loras_->add(m.name, m.path, m.base_model_name);
    }
    lora_slots_ = std::make_unique<LoraSlotTable>(config_.lora.max_loras);
  }
  executor_ = std::make_unique<Executor>(model_dir, model_config_, config_, loras_);
  const ModelConfig& mc = model_config_;
  SchedulerConfig sc;
  sc.max_num_seqs = config_.max_num_seqs;
  sc.max_num_batched_tokens = config_.max_num_batched_tokens;
  sc.long_prefill_token_threshold = config_.long_prefill_token_threshold;
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
  sc.max_loras = config_.lora.enabled ? config_.lora.max_loras : 0;
  plan_ = executor_->plan_and_allocate(sc);
  sc.num_state_snapshots = static_cast<int32_t>(plan_.num_snapshots);
  sc.num_kv_blocks = static_cast<int32_t>(plan_.num_blocks);
  scheduler_ = std::make_unique<Scheduler>(sc);
  scheduler_->set_sample_gate([this](const Sequence& s) { return !mask_workers_ || !mask_workers_->pending(&s); });
  sampler_ = std::make_unique<Sampler>(sc.eos_token_ids);
  if (sc.num_speculative_tokens > 0) {
    spec_totals_.spec_accepted_per_pos.assign(static_cast<size_t>(sc.num_speculative_tokens), 0);
    spec_control_ = std::make_unique<SpeculationController>(sc.num_speculative_tokens, spec.adaptive,
                                                            spec.disable_by_batch_size);
    proposer_ = executor_->driver().draft_proposer();
    if (!proposer_) {
      own_proposer_ = make_ngram_proposer(spec.prompt_lookup_min, spec.prompt_lookup_max);
      proposer_ = own_proposer_.get();
    }
  }
}

EngineCore::~EngineCore() = default;

void EngineCore::check_prompt(const std::vector<int32_t>& prompt) const {
  for (int32_t id : prompt)
    check(id >= 0 && id < model_config_.vocab_size,
          "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
              std::to_string(model_config_.vocab_size) + ")");
}

int64_t EngineCore::add_request(std::vector<int32_t> prompt, SamplingParams params) {
  check_prompt(prompt);
  if (params.lora >= 0) {
    const std::optional<LoraEntry> e = loras_ ? loras_->get(params.lora) : std::nullopt;
    check(e.has_value() && !e->removed, "LoRA adapter " + std::to_string(params.lora) + " is not served (" +
                                            (loras_ ? std::to_string(loras_->num_served()) + " adapters"
                                                    : std::string("no --enable-lora")) + ")");
  }
  check(params.lora >= -1, "LoRA adapter " + std::to_string(params.lora) + " is not served");
  std::shared_ptr<const MultimodalPrompt> mm;
  if (!params.images.empty()) {
    check(config_.images, "this model takes no images (" +
                              std::string(model_config_.vision.present() ? "--limit-mm-per-prompt is 0"
                                                                         : "its checkpoint has no vision tower") +
                              ")");
    check(static_cast<int32_t>(params.images.size()) <= config_.multimodal.max_images_per_prompt,
          std::to_string(params.images.size()) + " images in one prompt; --limit-mm-per-prompt allows " +
              std::to_string(config_.multimodal.max_images_per_prompt));
    mm = make_multimodal_prompt(prompt, params.images, static_cast<int32_t>(model_config_.vision.image_token_id),
                                static_cast<int32_t>(model_config_.vision.spatial_merge_size));
  }
  const int64_t id = next_id_++;
  Sequence* seq = scheduler_->add(id, std::move(prompt), std::move(params));
  if (mm) seq->set_mm(std::move(mm));
  // Its grammar's first mask is made while its prompt prefills (until grammar_after_token is
  // sampled, it has none: unconstrained).
  if (seq->params().grammar && seq->params().grammar_after_token < 0) start_grammar(*seq);
  return id;
}

int64_t EngineCore::tokens_left(const Sequence& s) const {
  int64_t left = int64_t{config_.max_model_len} - s.num_tokens();
  if (s.params().max_tokens) left = std::min<int64_t>(left, *s.params().max_tokens - s.num_output_tokens());
  return left;
}

void EngineCore::start_grammar(Sequence& s) {
  try {
    fault_point(FaultSite::GrammarAllocation);  // here, on this thread: the same request each run
  } catch (const std::exception& e) {
    // Failed at the start of the next step (now, from add_request, it would finish outside any
    // step and wait for one to be reported).
    grammar_failures_.emplace_back(s.id(), std::string("making its structured-output state failed (") + e.what() + ")");
    return;
  }
  submit_grammar_job({&s, /*make_matcher=*/true, /*accept=*/false, -1, tokens_left(s)});
}

void EngineCore::submit_grammar_job(const GrammarMaskWorkers::Job& job) {
  // CPU: two workers (the forward pass keeps every core busy; they mostly sleep), so that one
  // slow mask does not queue the quick ones of other grammars behind it.
  if (!mask_workers_) mask_workers_ = std::make_unique<GrammarMaskWorkers>(backend().device() == Device::CPU ? 2 : -1);
  mask_workers_->submit(job);
}

void EngineCore::after_sampling(std::span<Sequence* const> rows) {
  for (Sequence* s : rows) {
    if (s->embed || s->finished() || !s->params().grammar) continue;
    if (s->matcher) {
      submit_grammar_job({s, false, /*accept=*/true, s->last_token(), tokens_left(*s)});
    } else if (const int32_t after = s->params().grammar_after_token;
               after >= 0 && !s->output().empty() && s->output().back() == after) {
      start_grammar(*s);
    }
  }
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
  if (ThreadPool* pool = backend().host_pool()) return *pool;
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
  // Structured output: every sampling row with a matcher has its mask ready (the scheduler's gate;
  // the mask workers made it after the sequence's last token).
  // A greedy row under a grammar is masked on the device, after the forward pass is enqueued and
  // its mask is ready; only its token id comes back. Other grammar rows are masked by the host
  // sampler.
  bool any_device_mask = false;
  for (const SamplingRows& r : seqs)
    any_device_mask |= r.seq->matcher.has_value() && !host[static_cast<size_t>(r.first_row)];
  RowMasks masks;
  bool masks_made = false;  // every worker asks; the masks are made once
  const RowMaskSource mask_source = [&]() -> const RowMasks& {
    if (std::exchange(masks_made, true)) return masks;
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
  // Prefix-cache state snapshots are restored and taken, and pre-step state copies for drafts
  // kept, by each worker around its forward pass.
  const StepLogits& out = [&]() -> const StepLogits& {
    const FaultInjector::StepScope in_step;
    return executor_->execute(sched, host,
                              any_hidden ? std::span<const uint8_t>(hidden) : std::span<const uint8_t>(),
                              any_device_mask ? mask_source : RowMaskSource{});
  }();
  std::vector<std::vector<SampleResult>> samples(seqs.size());
  sample_on_host(out, seqs, samples);
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
      executor_->restore_pre_step_state(s.seq->state_slot);
    if (spec_control_) spec_control_->observe_acceptance(s.num_drafts, accepted);
    ++spec_totals_.spec_num_drafts;
    spec_totals_.spec_num_draft_tokens += s.num_drafts;
    spec_totals_.spec_num_accepted_tokens += accepted;
    for (int32_t j = 0; j < accepted; ++j) ++spec_totals_.spec_accepted_per_pos[static_cast<size_t>(j)];
  }
}

void EngineCore::set_draft_proposer_for_testing(DraftProposer proposer) {
  own_proposer_ = make_function_proposer(std::move(proposer));
  proposer_ = own_proposer_.get();
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
    after_sampling(rows);  // the grammars' next masks, on the mask workers
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
    if (proposer_ && config_.speculative.enabled()) {
      // The next step decodes the sampling sequences still running, beside about this step's
      // prefill tokens.
      int32_t decoding = 0;
      for (const Sequence* r : rows) decoding += r->status == SequenceStatus::Running && !r->embed ? 1 : 0;
      int64_t other = sched.batch.num_tokens();
      for (const ScheduledSequence& s : sched.scheduled)
        if (s.samples) other -= 1 + s.num_drafts;
      proposer_->propose(*scheduler_, sched, spec_control_->choose(decoding, std::max<int64_t>(other, 0)));
    }
  }
}

EngineCoreOutputs EngineCore::step() {
  const auto t_start = Clock::now();
  EngineCoreOutputs result;
  std::vector<EngineCoreOutput>& outs = result.outputs;
  SchedulerOutput sched;
  bool failed = false;
  std::string failure;
  if (mask_workers_) {
    // The masks of the last step's tokens, given a moment (most take microseconds); those later
    // than that sit this step out. Failed ones fail their requests alone.
    mask_workers_->wait_recent();
    for (auto& f : mask_workers_->take_failures()) grammar_failures_.push_back(std::move(f));
    std::erase_if(retired_, [&](const std::unique_ptr<Sequence>& s) { return !mask_workers_->pending(s.get()); });
  }
  for (auto& [id, why] : std::exchange(grammar_failures_, {}))
    scheduler_->fail(id, "request " + std::to_string(id) + " failed: " + why + "; the other requests were not affected");
  try {
    sched = scheduler_->schedule();
    if (lora_slots_) {  // adapter ids to device slots, and the adapters to write into them first
      for (const auto& l : lora_slots_->assign(sched.batch.lora_slots)) sched.batch.lora_loads.emplace_back(l.slot, l.adapter);
    }
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
    // A worker may have stopped half-way through writing a slot: every adapter is written again
    // when a step next needs it.
    if (lora_slots_) lora_slots_ = std::make_unique<LoraSlotTable>(config_.lora.max_loras);
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
  // A finished sequence whose mask job still runs stays alive until the job is done.
  if (mask_workers_)
    for (auto& f : finished)
      if (mask_workers_->pending(f.get())) retired_.push_back(std::move(f));
  // Nothing could run but sequences waiting for their masks: wait for one (not a hot loop).
  if (sched.empty() && !failed && mask_workers_ && mask_workers_->any_pending()) mask_workers_->wait_any(std::chrono::milliseconds(20));
  // In id order, as a request's choices were added.
  std::sort(outs.begin(), outs.end(), [](const EngineCoreOutput& a, const EngineCoreOutput& b) { return a.id < b.id; });
  ++steps_;
  const double step_s = seconds_since(t_start);
  step_s_ += step_s;
  if (spec_control_ && !failed && !sched.empty())
    spec_control_->observe_step(sched.batch.num_tokens(), spec_control_->last_choice(), step_s);
  refresh_state(result.stats);
  result.stats.step_preemptions = sched.num_preempted;
  result.stats.step_num_tokens = sched.batch.num_tokens();
  result.stats.step_num_decodes = sched.num_decodes;
  result.stats.step_s = step_s;
  return result;
}

int32_t EngineCore::load_lora_adapter(const std::string& name, const std::string& path) {
  check(loras_ != nullptr, "LoRA adapters are not served: start the server with --enable-lora");
  const LoraConfig& l = config_.lora;
  check(l.runtime_updates, "loading LoRA adapters at run time is off: set VLLM_ALLOW_RUNTIME_LORA_UPDATING=True");
  const LoraAdapter adapter = pagoda::load_lora_adapter(name, path, l.max_lora_rank);
  executor_->driver().lora_set()->validate(adapter);
  return loras_->add(name, path);
}

bool EngineCore::unload_lora_adapter(const std::string& name) {
  check(loras_ != nullptr, "LoRA adapters are not served: start the server with --enable-lora");
  check(config_.lora.runtime_updates,
        "unloading LoRA adapters at run time is off: set VLLM_ALLOW_RUNTIME_LORA_UPDATING=True");
  return loras_->remove(name);
}

EngineStats EngineCore::stats() const {
  EngineStats s;
  refresh_state(s);
  return s;
}

void EngineCore::refresh_state(EngineStats& s) const {
  s.num_running = scheduler_->num_running();
  if (loras_) {
    std::set<int32_t> running, waiting;
    for (const Sequence* q : scheduler_->running())
      if (q->params().lora >= 0) running.insert(q->params().lora);
    for (const Sequence* q : scheduler_->waiting())
      if (q->params().lora >= 0) waiting.insert(q->params().lora);
    s.running_loras.assign(running.begin(), running.end());
    s.waiting_loras.assign(waiting.begin(), waiting.end());
  }
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

const StepProfiler* EngineCore::step_profiler() const { return executor_->profiler(); }
StepProfiler* EngineCore::step_profiler() { return executor_->profiler(); }

StepTimes EngineCore::step_times() const {
  StepTimes t = executor_->times();
  t.steps = steps_;
  t.total_s = step_s_;
  return t;
}

}  // namespace pagoda
