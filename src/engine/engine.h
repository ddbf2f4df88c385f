// The engine: a model on a backend, its KV cache sized by the memory plan, the scheduler, the
// runner and the sampler. One step() = schedule, run, sample, update (DESIGN.md §1). Not
// thread-safe: one thread drives it (the server's engine thread, or the offline loop).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "io/model_config.h"
#include "kv/memory_plan.h"
#include "kv/paged_kv_cache.h"
#include "kv/recurrent_state.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct EngineConfig {
  std::string device = "cpu";          // cpu | cuda
  int32_t num_threads = 0;             // cpu threads; 0 = all cores
  std::string dtype = "auto";          // activations: auto (cpu float32, cuda bfloat16) | bfloat16 | float32
  int32_t max_num_seqs = 0;            // 0 = default for the device (cpu 64, cuda 256)
  int32_t max_num_batched_tokens = 0;  // 0 = default for the device (cpu 2048, cuda 8192)
  int32_t max_model_len = 0;           // 0 = the model's max_position_embeddings
  int32_t block_size = 16;
  std::string kv_cache_dtype = "auto";  // auto (= model dtype; fp32 under --dtype float32) | bf16 | fp16 | fp32
  double gpu_memory_utilization = 0.9;
  int64_t kv_cache_memory_bytes = 0;    // explicit KV budget; cpu default: see engine.cpp
  int64_t num_gpu_blocks_override = 0;  // force a pool of N blocks (either device)
  uint64_t seed = 0;
  bool enforce_eager = false;  // cuda: no CUDA graphs for decode steps (as vLLM's --enforce-eager)
  std::string tokenizer_dir;   // where tokenizer.json is (vLLM's --tokenizer); "" = the model directory
};

// What one step produced for one request.
struct RequestOutput {
  int64_t id = 0;
  std::vector<int32_t> new_token_ids;
  std::vector<SampleResult> samples;  // one per new token (logprobs when asked for)
  std::string new_text;               // detokenized delta (when the model has a tokenizer)
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  int32_t stop_token = -1;            // the EOS / stop token id that finished it
  std::string stop_string;            // the stop string that finished it
  std::string finish_detail;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  // An embedding request's one output (finished): the final-norm hidden state of its last prompt
  // token, fp32, neither truncated nor normalised (the caller applies the pooling head).
  std::vector<float> embedding;
};

class Engine {
 public:
  Engine(const std::string& model_dir, EngineConfig config);
  ~Engine();

  const ModelConfig& model_config() const { return model_config_; }
  const EngineConfig& config() const { return config_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }  // null without tokenizer.json
  Backend& backend() { return *backend_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  size_t kv_cache_bytes() const { return kv_->bytes(); }
  // Bytes of the recurrent-state slots (hybrid models; 0 for dense ones).
  size_t state_bytes() const { return state_ ? state_->bytes() : 0; }
  size_t workspace_bytes() const { return runner_->workspace_bytes(); }
  // Where the steps' wall time went so far (bench offline prints it per decode step).
  StepTimes step_times() const;

  // Queues a request; throws pagoda::Error for an empty or too long prompt or bad parameters.
  // SamplingParams::n is not expanded here: callers add n requests (see fan-out in cli/server).
  int64_t add_request(std::vector<int32_t> prompt, SamplingParams params);
  // Queues an embedding request: the prompt runs through the model (chunked and batched with the
  // other requests like any prefill), and its one output carries `embedding`; no token is sampled
  // and its KV blocks are freed when it finishes. Throws pagoda::Error as add_request does.
  int64_t add_embedding_request(std::vector<int32_t> prompt);
  // One engine step. Returns an output for every request that got tokens or finished.
  std::vector<RequestOutput> step();
  bool has_unfinished() const { return scheduler_->has_unfinished(); }
  bool abort(int64_t id) { return scheduler_->abort(id); }

 private:
  struct TextState;  // per-request detokenizer and stop-string matcher
  void plan_and_allocate();
  void emit_text(Sequence& seq, RequestOutput& out);

  EngineConfig config_;
  ModelConfig model_config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  MemoryPlan plan_;
  std::unique_ptr<PagedKvCache> kv_;
  std::unique_ptr<RecurrentState> state_;  // hybrid models only
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Sampler> sampler_;
  std::map<int64_t, std::unique_ptr<TextState>> text_;
  int64_t next_id_ = 0;
  int64_t steps_ = 0;
  double step_s_ = 0;
};

// Parses --kv-cache-dtype for a model of dtype `model_dtype`.
DType parse_kv_cache_dtype(const std::string& s, DType model_dtype);

}  // namespace pagoda
