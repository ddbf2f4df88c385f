#include "server/kv_event_publisher.h"

#include <chrono>
#include <cstring>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"

#if PAGODA_HAS_KV_EVENTS
#include <zmq.h>

#include <msgpack.hpp>
#endif

namespace pagoda::server {
namespace {

using json = nlohmann::json;

std::string be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return s;
}

// vLLM's ZmqEventPublisher.offset_endpoint_port: rank r publishes on port + r (inproc: a suffix). An
// ipc:// path takes the inproc suffix too (vLLM refuses it under data parallelism; a path has no port).
std::string offset_endpoint(const std::string& endpoint, int32_t rank) {
  if (rank == 0 || endpoint.empty()) return endpoint;
  if (endpoint.find("inproc") != std::string::npos || endpoint.rfind("ipc://", 0) == 0)
    return endpoint + "_dp" + std::to_string(rank);
  const size_t colon = endpoint.rfind(':');
  check(endpoint.find("tcp") != std::string::npos && colon != std::string::npos,
        "--kv-events-config: endpoint '" + endpoint + "' is neither tcp://HOST:PORT, ipc://PATH nor inproc://NAME");
  return endpoint.substr(0, colon + 1) + std::to_string(std::stoi(endpoint.substr(colon + 1)) + rank);
}

bool binds(const std::string& e) {
  return e.find('*') != std::string::npos || e.find("::") != std::string::npos || e.rfind("ipc://", 0) == 0 ||
         e.rfind("inproc://", 0) == 0;
}

}  // namespace

KvEventsConfig parse_kv_events_config(const std::string& json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  check(j.is_object(), "--kv-events-config must be a JSON object, e.g. "
                       "'{\"enable_kv_cache_events\": true, \"endpoint\": \"tcp://*:5557\"}'");
  KvEventsConfig c;
  bool publisher_given = false;
  for (const auto& item : j.items()) {
    // Named, not a structured binding: clang 14 (the fuzz build) cannot capture those in lambdas.
    const std::string& key = item.key();
    const json& v = item.value();
    const std::string where = "--kv-events-config: " + key;
    auto str = [&] {
      check(v.is_string(), where + " must be a string");
      return v.get<std::string>();
    };
    auto positive = [&] {
      check(v.is_number_integer() && v.get<int64_t>() > 0, where + " must be a positive integer");
      return v.get<int64_t>();
    };
    if (key == "enable_kv_cache_events") {
      check(v.is_boolean(), where + " must be true or false");
      c.enable_kv_cache_events = v.get<bool>();
    } else if (key == "publisher") {
      if (v.is_null()) continue;
      c.publisher = str();
      publisher_given = true;
      check(c.publisher == "zmq" || c.publisher == "null", where + " is \"" + c.publisher + "\"; zmq or null");
    } else if (key == "endpoint") {
      c.endpoint = str();
    } else if (key == "replay_endpoint") {
      if (!v.is_null()) c.replay_endpoint = str();
    } else if (key == "buffer_steps") {
      c.buffer_steps = positive();
    } else if (key == "hwm") {
      c.hwm = static_cast<int32_t>(std::min<int64_t>(positive(), 1 << 30));
    } else if (key == "max_queue_size") {
      c.max_queue_size = positive();
    } else if (key == "topic") {
      c.topic = str();
    } else {
      throw Error(where + " is not a field of vLLM's KVEventsConfig (enable_kv_cache_events, publisher, endpoint, "
                          "replay_endpoint, buffer_steps, hwm, max_queue_size, topic)");
    }
  }
  // As vLLM: no publisher named means zmq when the events are on.
  if (!publisher_given) c.publisher = c.enable_kv_cache_events ? "zmq" : "null";
  return c;
}

#if PAGODA_HAS_KV_EVENTS

bool kv_events_supported() { return true; }

std::string encode_kv_event_batch(double ts, const std::vector<KvEvent>& events, int32_t block_size,
                                  const std::string& medium, int32_t data_parallel_rank) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  pk.pack_array(3);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(events.size()));
  for (const KvEvent& e : events) {
    switch (e.kind) {
      case KvEvent::Kind::Stored:
        pk.pack_array(8);
        pk.pack(std::string("BlockStored"));
        pk.pack_array(1);
        pk.pack_uint64(e.hash);
        if (e.parent_hash) pk.pack_uint64(*e.parent_hash);
        else pk.pack_nil();
        pk.pack_array(static_cast<uint32_t>(e.token_ids.size()));
        for (int32_t t : e.token_ids) pk.pack_int32(t);
        pk.pack_int32(block_size);
        pk.pack_nil();  // lora_id
        pk.pack(medium);
        pk.pack_nil();  // lora_name
        break;
      case KvEvent::Kind::Removed:
        pk.pack_array(3);
        pk.pack(std::string("BlockRemoved"));
        pk.pack_array(1);
        pk.pack_uint64(e.hash);
        pk.pack(medium);
        break;
      case KvEvent::Kind::AllCleared:
        pk.pack_array(1);
        pk.pack(std::string("AllBlocksCleared"));
        break;
    }
  }
  pk.pack_int32(data_parallel_rank);
  return std::string(buf.data(), buf.size());
}

KvEventPublisher::KvEventPublisher(const KvEventsConfig& config, int32_t block_size, std::string medium,
                                   int32_t data_parallel_rank)
    : config_(config), block_size_(block_size), medium_(std::move(medium)), dp_rank_(data_parallel_rank) {
  ctx_ = zmq_ctx_new();
  check(ctx_ != nullptr, "--kv-events-config: cannot create a ZeroMQ context");
  auto fail = [&](const std::string& what, const std::string& endpoint) {
    const std::string reason = zmq_strerror(zmq_errno());
    if (pub_) zmq_close(pub_);
    if (replay_) zmq_close(replay_);
    zmq_ctx_term(ctx_);
    throw Error("--kv-events-config: cannot " + what + " " + endpoint + ": " + reason);
  };
  pub_ = zmq_socket(ctx_, ZMQ_PUB);
  const int hwm = config_.hwm;
  zmq_setsockopt(pub_, ZMQ_SNDHWM, &hwm, sizeof hwm);
  const std::string endpoint = offset_endpoint(config_.endpoint, dp_rank_);
  if (binds(endpoint) ? zmq_bind(pub_, endpoint.c_str()) != 0 : zmq_connect(pub_, endpoint.c_str()) != 0)
    fail(binds(endpoint) ? "bind" : "connect to", endpoint);
  if (config_.replay_endpoint) {
    const std::string replay = offset_endpoint(*config_.replay_endpoint, dp_rank_);
    replay_ = zmq_socket(ctx_, ZMQ_ROUTER);
    if (zmq_bind(replay_, replay.c_str()) != 0) fail("bind the replay endpoint", replay);
  }
  LOG_INFO("KV cache events: publishing on " << endpoint
                                             << (config_.replay_endpoint ? ", replay on " + *config_.replay_endpoint : "")
                                             << (config_.topic.empty() ? "" : ", topic " + config_.topic));
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  const int linger = 0;
  zmq_setsockopt(pub_, ZMQ_LINGER, &linger, sizeof linger);
  zmq_close(pub_);
  if (replay_) {
    zmq_setsockopt(replay_, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(replay_);
  }
  zmq_ctx_term(ctx_);
}

void KvEventPublisher::publish(std::vector<KvEvent> events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (static_cast<int64_t>(queue_.size()) >= config_.max_queue_size) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(events));
  }
  cv_.notify_one();
}

namespace {

// One frame, more to follow or not; a PUB socket drops at its high-water mark rather than block.
void send_frame(void* socket, const std::string& bytes, bool more) {
  zmq_send(socket, bytes.data(), bytes.size(), more ? ZMQ_SNDMORE : 0);
}

std::string recv_frame(void* socket, bool* more) {
  zmq_msg_t m;
  zmq_msg_init(&m);
  std::string out;
  if (zmq_msg_recv(&m, socket, ZMQ_DONTWAIT) >= 0) out.assign(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
  *more = zmq_msg_more(&m) != 0;
  zmq_msg_close(&m);
  return out;
}

}  // namespace

void KvEventPublisher::run() {
  using Clock = std::chrono::system_clock;
  uint64_t seq = 0;
  std::chrono::steady_clock::time_point drain_deadline{};
  for (;;) {
    if (replay_) {
      zmq_pollitem_t item{replay_, 0, ZMQ_POLLIN, 0};
      while (zmq_poll(&item, 1, 0) > 0 && (item.revents & ZMQ_POLLIN)) {
        // [identity, "", start sequence]: every buffered batch from there on, then [-1, ""].
        std::vector<std::string> frames;
        bool more = true;
        while (more && frames.size() < 8) frames.push_back(recv_frame(replay_, &more));
        while (more) recv_frame(replay_, &more);
        if (frames.size() != 3 || frames[2].size() != 8) {
          LOG_WARN("KV cache events: a replay request of " << frames.size() << " frames ignored");
          continue;
        }
        uint64_t start = 0;
        for (char ch : frames[2]) start = (start << 8) | static_cast<uint8_t>(ch);
        for (const auto& [s, payload] : buffer_) {
          if (s < start) continue;
          send_frame(replay_, frames[0], true);
          send_frame(replay_, "", true);
          send_frame(replay_, be64(s), true);
          send_frame(replay_, payload, false);
        }
        send_frame(replay_, frames[0], true);
        send_frame(replay_, "", true);
        send_frame(replay_, be64(~uint64_t{0}), true);
        send_frame(replay_, "", false);
      }
    }
    std::vector<KvEvent> batch;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(replay_ ? 20 : 100), [&] { return !queue_.empty() || stopping_; });
      if (stopping_) {
        // What is queued goes out, for a second at most.
        if (drain_deadline == std::chrono::steady_clock::time_point{})
          drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        if (queue_.empty() || std::chrono::steady_clock::now() > drain_deadline) return;
      }
      if (queue_.empty()) continue;
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    const double ts = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    std::string payload = encode_kv_event_batch(ts, batch, block_size_, medium_, dp_rank_);
    send_frame(pub_, config_.topic, true);
    send_frame(pub_, be64(seq), true);
    send_frame(pub_, payload, false);
    ++sent_;
    buffer_.emplace_back(seq, std::move(payload));
    while (static_cast<int64_t>(buffer_.size()) > config_.buffer_steps) buffer_.pop_front();
    ++seq;
  }
}

#else  // built without libzmq / msgpack-c

bool kv_events_supported() { return false; }

std::string encode_kv_event_batch(double, const std::vector<KvEvent>&, int32_t, const std::string&, int32_t) {
  throw Error("KV cache events: this pagoda was built without libzmq and msgpack-c");
}

KvEventPublisher::KvEventPublisher(const KvEventsConfig&, int32_t, std::string, int32_t) {
  throw Error("--kv-events-config: this pagoda was built without libzmq and msgpack-c (Debian: libzmq3-dev "
              "libmsgpack-cxx-dev); install them and rebuild to publish KV cache events");
}

KvEventPublisher::~KvEventPublisher() = default;

void KvEventPublisher::publish(std::vector<KvEvent>) {}

void KvEventPublisher::run() {}

#endif

}  // namespace pagoda::server
