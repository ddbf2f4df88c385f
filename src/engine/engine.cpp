#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace pagoda {
namespace {

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

DType parse_kv_cache_dtype(const std::string& s, DType model_dtype) {
  if (s == "auto") return model_dtype;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "float16" || s == "half") return DType::F16;
  if (s == "fp32" || s == "float32" || s == "float") return DType::F32;
  throw Error("--kv-cache-dtype '" + s + "' is not supported; choose auto, bf16, fp16 or fp32");
}

// Detokenizes a request's output as it grows and finds stop strings. Text that could still
// become a stop string is held back, so a stop string never reaches the client.
struct Engine::TextState {
  explicit TextState(const Tokenizer& tok) : decoder(tok, /*skip_special_tokens=*/true) {}
  IncrementalDecoder decoder;
  std::string pending;  // decoded but not yet emitted
};

Engine::Engine(const std::string& model_dir, EngineConfig config) : config_(std::move(config)) {
  model_config_ = load_model_config(model_dir);
  const bool cpu = config_.device == "cpu";
  if (config_.max_num_seqs <= 0) config_.max_num_seqs = cpu ? 64 : 256;
  if (config_.max_num_batched_tokens <= 0) config_.max_num_batched_tokens = cpu ? 2048 : 8192;
  config_.max_num_batched_tokens = std::max(config_.max_num_batched_tokens, config_.max_num_seqs);
  if (config_.max_model_len <= 0)
    config_.max_model_len = static_cast<int32_t>(model_config_.max_position_embeddings);
  check(config_.max_model_len > 0, "the model's config has no max_position_embeddings; pass --max-model-len");
  check(config_.max_model_len <= model_config_.max_position_embeddings,
        "--max-model-len " + std::to_string(config_.max_model_len) +
            " is longer than the model's max_position_embeddings (" +
            std::to_string(model_config_.max_position_embeddings) + ")");
  const int32_t bs = config_.block_size;
  check(bs >= 8 && bs <= 128 && (bs & (bs - 1)) == 0,
        "--block-size must be a power of two from 8 to 128, got " + std::to_string(bs));

  backend_ = make_backend(config_.device, config_.num_threads, config_.dtype);
  {
    const auto start = std::chrono::steady_clock::now();
    const Checkpoint ckpt = Checkpoint::open_dir(model_dir);
    model_ = load_model(model_config_, ckpt, *backend_);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (secs > 1.0) LOG_INFO("weights loaded in " << secs << " s");  // the progress lines said how far
  }
  const std::string& tok_dir = config_.tokenizer_dir.empty() ? model_dir : config_.tokenizer_dir;
  if (!config_.tokenizer_dir.empty())
    check(std::filesystem::exists(std::filesystem::path(tok_dir) / "tokenizer.json"),
          "--tokenizer " + tok_dir + " has no tokenizer.json");
  if (std::filesystem::exists(std::filesystem::path(tok_dir) / "tokenizer.json"))
    tokenizer_ = Tokenizer::load_dir(tok_dir);
  plan_and_allocate();
}

Engine::~Engine() = default;

void Engine::plan_and_allocate() {
  const ModelConfig& mc = model_config_;
  // fp32 activations on a GPU are asked for to match an fp32 reference: the cache keeps fp32 too.
  const bool f32_gpu = backend_->device() != Device::CPU && backend_->activation_dtype() == DType::F32;
  const DType kv_dtype = parse_kv_cache_dtype(config_.kv_cache_dtype, f32_gpu ? DType::F32 : mc.dtype);
  SchedulerConfig sc;
  sc.max_num_seqs = config_.max_num_seqs;
  sc.max_num_batched_tokens = config_.max_num_batched_tokens;
  sc.max_model_len = config_.max_model_len;
  sc.block_size = config_.block_size;
  sc.use_state_slots = mc.num_layers_of(LayerKind::LinearAttention) > 0;
  for (int64_t id : mc.eos_token_ids) sc.eos_token_ids.push_back(static_cast<int32_t>(id));
  sc.seed = config_.seed;
  const int32_t max_blocks_per_seq = (sc.max_model_len + sc.block_size - 1) / sc.block_size;

  // The runner's workspace is measured before the plan: it is one of its inputs.
  runner_ = std::make_unique<ModelRunner>(*backend_, *model_, sc.max_num_batched_tokens,
                                          sc.max_num_seqs, max_blocks_per_seq);

  MemoryPlanInputs in;
  in.weight_bytes = static_cast<int64_t>(model_->weight_bytes());
  in.activation_bytes = static_cast<int64_t>(runner_->workspace_bytes());
  // The conv state is kept in the activation dtype of the backend (DESIGN.md §5).
  in.state_bytes_per_seq = mc.state_bytes_per_sequence(backend_->activation_dtype());
  // Decode graphs pad a step with sequences that need a state slot of their own: one more slot,
  // never handed to a sequence (the scheduler's pool has max_num_seqs).
  const bool graphs = !config_.enforce_eager && backend_->supports_graphs();
  const int32_t state_slots = sc.max_num_seqs + (graphs && sc.use_state_slots ? 1 : 0);
  in.max_num_seqs = state_slots;
  in.kv_bytes_per_token = mc.kv_bytes_per_token(kv_dtype);
  in.block_size = sc.block_size;
  in.max_model_len = sc.max_model_len;
  in.num_blocks_override = config_.num_gpu_blocks_override;
  in.kv_cache_memory_bytes = config_.kv_cache_memory_bytes;
  if (backend_->device() == Device::CPU) {
    // No device memory to fill on the CPU: by default the KV cache gets what max_num_seqs
    // sequences of max_model_len could use, but never more than a quarter of free memory.
    in.total_bytes = available_host_memory();
    in.utilization = 1.0;
    if (in.kv_cache_memory_bytes == 0 && in.num_blocks_override == 0) {
      const int64_t want = in.kv_bytes_per_token * sc.max_model_len * sc.max_num_seqs;
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

  KvCacheShape shape;
  shape.num_layers = static_cast<int32_t>(mc.num_layers_of(LayerKind::FullAttention));
  shape.num_blocks = static_cast<int32_t>(plan_.num_blocks);
  shape.block_size = sc.block_size;
  shape.num_kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  shape.head_dim = static_cast<int32_t>(mc.head_dim);
  shape.dtype = kv_dtype;
  kv_ = std::make_unique<PagedKvCache>(*backend_, shape);
  if (sc.use_state_slots) {
    // One slot per schedulable sequence: exactly plan_.state_bytes.
    state_ = std::make_unique<RecurrentState>(
        *backend_, RecurrentStateShape::for_model(mc, state_slots, backend_->activation_dtype()));
    check(static_cast<int64_t>(state_->bytes()) == plan_.state_bytes,
          "internal: recurrent state allocation differs from the memory plan");
  }
  sc.num_kv_blocks = shape.num_blocks;
  scheduler_ = std::make_unique<Scheduler>(sc);
  sampler_ = std::make_unique<Sampler>(sc.eos_token_ids);
  if (graphs) {
    const auto t0 = std::chrono::steady_clock::now();
    const int n = runner_->capture_decode_graphs(*kv_, state_.get(),
                                                 sc.use_state_slots ? sc.max_num_seqs : -1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    LOG_INFO("captured " + std::to_string(n) + " decode graphs (batch buckets up to " +
             std::to_string(std::min(sc.max_num_seqs, sc.max_num_batched_tokens)) + ") in " +
             std::to_string(static_cast<int>(s * 1000)) + " ms");
  }
}

int64_t Engine::add_request(std::vector<int32_t> prompt, SamplingParams params) {
  for (int32_t id : prompt)
    check(id >= 0 && id < model_config_.vocab_size,
          "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
              std::to_string(model_config_.vocab_size) + ")");
  check(params.stop.empty() || tokenizer_,
        "stop strings need a tokenizer, and this model directory has no tokenizer.json");
  const int64_t id = next_id_++;
  scheduler_->add(id, std::move(prompt), std::move(params));
  if (tokenizer_) text_[id] = std::make_unique<TextState>(*tokenizer_);
  return id;
}

int64_t Engine::add_embedding_request(std::vector<int32_t> prompt) {
  for (int32_t id : prompt)
    check(id >= 0 && id < model_config_.vocab_size,
          "prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
              std::to_string(model_config_.vocab_size) + ")");
  const int64_t id = next_id_++;
  SamplingParams params;
  params.max_tokens = 1;  // nothing is sampled; validation wants a positive value
  scheduler_->add(id, std::move(prompt), std::move(params), /*embed=*/true);
  return id;
}

void Engine::emit_text(Sequence& seq, RequestOutput& out) {
  auto it = text_.find(seq.id());
  if (it == text_.end()) return;
  TextState& ts = *it->second;
  // A model's vocabulary may be larger than its tokenizer's (padding rows): such ids have no text,
  // and decode to nothing, as Hugging Face's decode drops them.
  for (int32_t t : out.new_token_ids)
    if (t < tokenizer_->vocab_size()) ts.pending += ts.decoder.push(t);
  const auto& stops = seq.params().stop;
  // A stop string ends the output just before it; nothing after it is sent.
  size_t cut = std::string::npos;
  for (const std::string& s : stops) {
    const size_t at = ts.pending.find(s);
    if (at != std::string::npos && (cut == std::string::npos || at < cut)) {
      cut = at;
      out.stop_string = s;
    }
  }
  if (cut != std::string::npos) {
    out.new_text = ts.pending.substr(0, cut);
    ts.pending.clear();
    return;
  }
  if (out.finished) {
    ts.pending += ts.decoder.flush();
    out.new_text = std::move(ts.pending);
    ts.pending.clear();
    return;
  }
  // Hold back the longest tail that is a prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops)
    for (size_t n = std::min(s.size() - 1, ts.pending.size()); n > hold; --n)
      if (ts.pending.compare(ts.pending.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  out.new_text = ts.pending.substr(0, ts.pending.size() - hold);
  ts.pending.erase(0, ts.pending.size() - hold);
}

StepTimes Engine::step_times() const {
  StepTimes t = runner_->times();
  t.steps = steps_;
  t.total_s = step_s_;
  return t;
}

std::vector<RequestOutput> Engine::step() {
  const auto t_start = std::chrono::steady_clock::now();
  SchedulerOutput sched = scheduler_->schedule();
  std::map<int64_t, RequestOutput> outs;
  if (!sched.empty()) {
    const std::vector<Sequence*> rows = sched.sampling_seqs();
    // Greedy rows are decided on the device; only the rows the host sampler needs come back.
    // Embedding rows sample nothing: they take the row's hidden state instead.
    std::vector<uint8_t> host(rows.size()), hidden(rows.size());
    bool any_hidden = false;
    for (size_t i = 0; i < rows.size(); ++i) {
      hidden[i] = rows[i]->embed ? 1 : 0;
      any_hidden |= rows[i]->embed;
      host[i] = !rows[i]->embed && sampler_->needs_logits(*rows[i]) ? 1 : 0;
    }
    const StepLogits& out = runner_->execute_greedy(sched.batch, *kv_, state_.get(), host,
                                                    any_hidden ? std::span<const uint8_t>(hidden)
                                                               : std::span<const uint8_t>());
    const auto vocab = static_cast<size_t>(model_config_.vocab_size);
    std::vector<SampleResult> samples(rows.size());
    std::vector<size_t> on_host;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (out.host_row_of[i] < 0) samples[i].token = out.argmax[i];
      else on_host.push_back(i);
    }
    // Each row uses only its own sequence's parameters, history and RNG: rows run in parallel.
    auto sample_host = [&](size_t first, size_t step) {
      for (size_t n = first; n < on_host.size(); n += step) {
        const size_t i = on_host[n];
        Sequence& seq = *rows[i];
        const std::span<const float> row(out.host_logits.data() + static_cast<size_t>(out.host_row_of[i]) * vocab, vocab);
        samples[i] = sampler_->sample_row(row, seq.params(), seq.prompt(), seq.output(), seq.rng());
      }
    };
    const size_t workers = std::min<size_t>({on_host.size() / 4, std::max(1u, std::thread::hardware_concurrency()), 16});
    if (workers <= 1) {
      sample_host(0, 1);
    } else {
      std::vector<std::thread> pool;
      for (size_t w = 1; w < workers; ++w) pool.emplace_back(sample_host, w, workers);
      sample_host(0, workers);
      for (std::thread& t : pool) t.join();
    }
    std::vector<int32_t> tokens;
    for (const SampleResult& r : samples) tokens.push_back(r.token);
    scheduler_->update_from_output(sched, tokens);
    const auto H = static_cast<size_t>(model_config_.hidden_size);
    for (size_t i = 0; i < rows.size(); ++i) {
      RequestOutput& o = outs[rows[i]->id()];
      o.id = rows[i]->id();
      if (rows[i]->embed) {
        const float* h = out.hidden.data() + static_cast<size_t>(out.hidden_row_of[i]) * H;
        o.embedding.assign(h, h + H);
        continue;
      }
      o.new_token_ids.push_back(tokens[i]);
      o.samples.push_back(std::move(samples[i]));
    }
  }
  std::vector<std::unique_ptr<Sequence>> finished = scheduler_->take_finished();
  std::map<int64_t, Sequence*> done;
  for (auto& s : finished) done[s->id()] = s.get();

  std::vector<RequestOutput> result;
  auto finalize = [&](Sequence& seq, RequestOutput& o) {
    o.id = seq.id();
    o.finished = seq.finished();
    o.finish_reason = seq.finish_reason;
    o.stop_token = seq.stop_token;
    o.finish_detail = seq.finish_detail;
    o.num_prompt_tokens = seq.num_prompt_tokens();
    o.num_output_tokens = seq.num_output_tokens();
    emit_text(seq, o);
    if (!o.stop_string.empty() && !o.finished) {
      // A stop string finishes the request now; its blocks are freed by the abort.
      scheduler_->abort(seq.id());
      o.finished = true;
      o.finish_reason = FinishReason::Stop;
    }
    if (o.finished) text_.erase(seq.id());
    result.push_back(std::move(o));
  };
  for (auto& [id, o] : outs) {
    Sequence* seq = done.count(id) ? done[id] : scheduler_->find(id);
    if (seq) finalize(*seq, o);
    done.erase(id);
  }
  for (auto& [id, seq] : done) {  // finished without a new token (abort, can never fit)
    RequestOutput o;
    finalize(*seq, o);
  }
  // Requests stopped by a stop string were aborted above; drop their abort records.
  for (auto& s : scheduler_->take_finished()) text_.erase(s->id());
  ++steps_;
  step_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return result;
}

}  // namespace pagoda
