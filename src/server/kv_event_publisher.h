// vLLM's KV cache events (--kv-events-config) published over ZeroMQ, so that llm-d's KV-cache
// indexer (and any subscriber written for vLLM) can route a request to the replica that holds its
// prefix. The wire format is vLLM's (vllm/distributed/kv_events.py, array-like msgspec structs):
// each batch is three frames — topic, an 8-byte big-endian sequence number, and a msgpack array
// [ts, [event, ...], data_parallel_rank] — where an event is ["BlockStored", [hash], parent_hash |
// nil, [token ids], block_size, lora_id (nil), medium, lora_name (nil)], ["BlockRemoved", [hash],
// medium] or ["AllBlocksCleared"]. Block hashes are pagoda's 64-bit prefix-cache hashes.
//
// publish() is called on the engine thread after a step and never blocks: batches go to a bounded
// queue (max_queue_size) that a thread of this object sends from; a full queue drops the batch and
// counts it. An optional ROUTER socket (replay_endpoint) answers a request [start sequence, 8
// bytes big-endian] with every buffered batch from there on ([seq, payload] each, buffer_steps
// kept), then [-1, ""], as vLLM's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kv/kv_events.h"

namespace pagoda::server {

// vLLM's KVEventsConfig, from --kv-events-config's JSON (unknown keys refused by name).
struct KvEventsConfig {
  bool enable_kv_cache_events = false;
  std::string publisher = "null";  // "zmq" or "null"; vLLM's default turns zmq on with the events
  std::string endpoint = "tcp://*:5557";  // bound when it has a wildcard (*, ::) or is ipc/inproc, else connected
  std::optional<std::string> replay_endpoint;
  int64_t buffer_steps = 10000;
  int32_t hwm = 100000;
  int64_t max_queue_size = 100000;
  std::string topic;

  bool publishes() const { return enable_kv_cache_events && publisher == "zmq"; }
};
// Throws pagoda::Error naming the field for malformed JSON, an unknown key or a bad value.
KvEventsConfig parse_kv_events_config(const std::string& json_text);
// Whether this build can publish (libzmq and msgpack-c were found).
bool kv_events_supported();

// One batch's payload: [ts, [events], data_parallel_rank] as msgpack. `medium` is "GPU" or "CPU".
std::string encode_kv_event_batch(double ts, const std::vector<KvEvent>& events, int32_t block_size,
                                  const std::string& medium, int32_t data_parallel_rank);

class KvEventPublisher {
 public:
  // Opens the sockets (throws pagoda::Error naming the endpoint when one cannot be bound) and starts
  // the sending thread. The endpoint's port is offset by the data-parallel rank, as vLLM's (ipc:// and
  // inproc:// names get the suffix _dpN).
  KvEventPublisher(const KvEventsConfig& config, int32_t block_size, std::string medium,
                   int32_t data_parallel_rank = 0);
  ~KvEventPublisher();  // sends what is queued (up to a second), then closes

  void publish(std::vector<KvEvent> events);
  uint64_t dropped_batches() const { return dropped_.load(); }
  uint64_t sent_batches() const { return sent_.load(); }

 private:
  void run();

  KvEventsConfig config_;
  int32_t block_size_;
  std::string medium_;
  int32_t dp_rank_;
  void* ctx_ = nullptr;
  void* pub_ = nullptr;
  void* replay_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<KvEvent>> queue_;
  std::deque<std::pair<uint64_t, std::string>> buffer_;  // the sending thread's alone
  bool stopping_ = false;
  std::atomic<uint64_t> dropped_{0}, sent_{0};
  std::thread thread_;
};

}  // namespace pagoda::server
