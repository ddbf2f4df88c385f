#include "server/data_parallel_engine.h"

#include <algorithm>

#include "core/error.h"

namespace pagoda::server {

size_t least_loaded_replica(const std::vector<ReplicaLoad>& loads) {
  size_t best = 0;
  for (size_t r = 1; r < loads.size(); ++r) {
    const ReplicaLoad& a = loads[r];
    const ReplicaLoad& b = loads[best];
    if (a.requests < b.requests || (a.requests == b.requests && a.kv_usage < b.kv_usage)) best = r;
  }
  return best;
}

DataParallelEngine::DataParallelEngine(std::vector<std::unique_ptr<AsyncEngine>> replicas)
    : replicas_(std::move(replicas)) {
  check_invariant(!replicas_.empty(), "DataParallelEngine: no replica");
}

DataParallelEngine::~DataParallelEngine() { stop(); }

AsyncEngine& DataParallelEngine::pick() {
  std::vector<ReplicaLoad> loads;
  loads.reserve(replicas_.size());
  for (const auto& r : replicas_) {
    if (!r->serving()) return *r;
    loads.push_back(ReplicaLoad{r->load(), r->kv_usage()});
  }
  return *replicas_[least_loaded_replica(loads)];
}

std::shared_ptr<GenerationChannel> DataParallelEngine::submit(std::vector<ChoiceSpec> choices, std::string& why,
                                                              const std::string& client) {
  std::lock_guard lock(route_mu_);
  return pick().submit(std::move(choices), why, client);
}

std::shared_ptr<GenerationChannel> DataParallelEngine::submit_embedding(std::vector<std::vector<int32_t>> prompts,
                                                                        std::string& why, const std::string& client) {
  std::lock_guard lock(route_mu_);
  return pick().submit_embedding(std::move(prompts), why, client);
}

void DataParallelEngine::cancel(const std::shared_ptr<GenerationChannel>& channel) {
  if (AsyncEngine* owner = AsyncEngine::owner_of(*channel)) owner->cancel(channel);
}

void DataParallelEngine::stop_accepting() {
  for (auto& r : replicas_) r->stop_accepting();
}

bool DataParallelEngine::serving() const {
  for (const auto& r : replicas_)
    if (!r->serving()) return false;
  return true;
}

std::string DataParallelEngine::not_serving_reason() const {
  for (const auto& r : replicas_)
    if (std::string why = r->not_serving_reason(); !why.empty()) return why;
  return "";
}

bool DataParallelEngine::wait_idle(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& r : replicas_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!r->wait_idle(std::max(std::chrono::milliseconds(0), left))) return false;
  }
  return true;
}

void DataParallelEngine::abort_all() {
  for (auto& r : replicas_) r->abort_all();
}

void DataParallelEngine::stop() {
  for (auto& r : replicas_) r->stop();
}

int64_t DataParallelEngine::num_live_generations() const {
  int64_t n = 0;
  for (const auto& r : replicas_) n += r->num_live_generations();
  return n;
}

}  // namespace pagoda::server
