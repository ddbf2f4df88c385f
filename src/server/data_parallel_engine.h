// Data parallelism (serve's --data-parallel-size N, vLLM's): N engine replicas behind one server.
// Each replica is an AsyncEngine with its own engine thread, EngineCore (scheduler, KV pool, prefix
// cache) and workers on its own devices; the HTTP routes see one engine, this one.
//
// Balancing, as vLLM's data-parallel load balancer: a new request goes to the replica with the least
// load, its waiting + running choices (counted from the moment it was routed, so two requests that
// arrive together see each other), ties broken by the lower KV cache usage, then the lower rank. A
// request's prefix does not pull it to the replica that cached it (no stickiness): balance first.
//
// What is per replica: fairness and priority order (each replica's fair queue), the stats line and
// the metrics (the `engine` label), KV events (one publisher per rank). What is shared: the waiting
// limits (--max-waiting-requests, --max-waiting-tokens count over all replicas), the LoRA catalog (one
// id per adapter everywhere), the tokenizer and model facts (replica 0's, the same on every one).
// /health is 503 when any replica cannot serve: a fatal fault on one exits the server (exit 4).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/async_engine.h"

namespace pagoda::server {

struct ReplicaLoad {
  int64_t requests = 0;  // choices waiting or running
  double kv_usage = 0;   // fraction of the KV cache in use
};

// The replica a new request goes to: least requests, then least KV usage, then lowest index.
// `loads` is not empty.
size_t least_loaded_replica(const std::vector<ReplicaLoad>& loads);

class DataParallelEngine {
 public:
  // Replica r (data-parallel rank r) is replicas[r]; at least one.
  explicit DataParallelEngine(std::vector<std::unique_ptr<AsyncEngine>> replicas);
  ~DataParallelEngine();  // stops every replica

  size_t size() const { return replicas_.size(); }
  AsyncEngine& replica(size_t rank) { return *replicas_[rank]; }

  // Read-only facts of the model, the same on every replica (replica 0's).
  const Tokenizer* tokenizer() const { return first().tokenizer(); }
  const ModelConfig& model_config() const { return first().model_config(); }
  int32_t max_model_len() const { return first().max_model_len(); }
  bool takes_images() const { return first().takes_images(); }
  int32_t max_images_per_prompt() const { return first().max_images_per_prompt(); }
  bool hybrid_prefix_caching() const { return first().hybrid_prefix_caching(); }

  // LoRA: one catalog shared by every replica (EngineCore's shared_loras), so loading through
  // replica 0 serves the adapter on all of them under one id.
  std::shared_ptr<const LoraCatalog> loras() const { return first().loras(); }
  int32_t load_lora_adapter(const std::string& name, const std::string& path) {
    return first().load_lora_adapter(name, path);
  }
  bool unload_lora_adapter(const std::string& name) { return first().unload_lora_adapter(name); }
  bool runtime_lora_updates() const { return first().runtime_lora_updates(); }

  // AsyncEngine's, on the replica the balancer picks (null with `why` when refused).
  std::shared_ptr<GenerationChannel> submit(std::vector<ChoiceSpec> choices, std::string& why,
                                            const std::string& client = "");
  std::shared_ptr<GenerationChannel> submit_embedding(std::vector<std::vector<int32_t>> prompts, std::string& why,
                                                      const std::string& client = "");
  // On the replica that took the channel.
  void cancel(const std::shared_ptr<GenerationChannel>& channel);

  // Shutdown and health, over every replica (AsyncEngine's meaning).
  void stop_accepting();
  bool serving() const;
  std::string not_serving_reason() const;
  bool wait_idle(std::chrono::milliseconds timeout);
  void abort_all();
  void stop();
  int64_t num_live_generations() const;

 private:
  const AsyncEngine& first() const { return *replicas_.front(); }
  AsyncEngine& first() { return *replicas_.front(); }
  // The replica for a new request: one that cannot serve (it refuses with its reason: the server is
  // going down), else the least loaded. Under route_mu_.
  AsyncEngine& pick();

  std::vector<std::unique_ptr<AsyncEngine>> replicas_;
  // Routing and the replica's count of the new request happen together: requests that arrive at once
  // are spread instead of all seeing the same idle replica.
  std::mutex route_mu_;
};

}  // namespace pagoda::server
