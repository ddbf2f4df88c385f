// --kv-events-config: pagoda publishes vLLM's KV cache events over ZeroMQ. An independent
// subscriber (tests/server/kv_events_subscriber.py: Debian's pyzmq and msgpack, a schema written
// from vLLM's source) watches a workload with prefix-cache hits, evictions and preemption on a
// small KV pool: every batch must match the schema, the sequence numbers run 0..n-1 without a gap,
// the replay socket returns what arrived live, and the blocks the events leave cached are exactly
// as many as the server's prefix cache holds (pagoda:prefix_cache_blocks, by hash) — no event
// lost or invented. Also the config's fields and its refusals; and with --data-parallel-size 2, each
// rank's own stream on its own endpoint, describing that replica's cache.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <filesystem>
#include <thread>
#include <vector>

#include "core/error.h"
#include "raw_http.h"
#include "server/kv_event_publisher.h"
#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using nlohmann::json;

TEST(KvEventsConfig, VllmFieldsAndRefusals) {
  KvEventsConfig c = parse_kv_events_config(R"({"enable_kv_cache_events": true})");
  EXPECT_TRUE(c.publishes()) << "no publisher named: zmq when the events are on, as vLLM";
  EXPECT_EQ(c.endpoint, "tcp://*:5557");
  EXPECT_FALSE(c.replay_endpoint.has_value());
  c = parse_kv_events_config(R"({"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:6000",
      "replay_endpoint": "tcp://*:6001", "buffer_steps": 5, "hwm": 10, "max_queue_size": 7, "topic": "kv"})");
  EXPECT_EQ(c.replay_endpoint.value_or(""), "tcp://*:6001");
  EXPECT_EQ(c.buffer_steps, 5);
  EXPECT_EQ(c.max_queue_size, 7);
  EXPECT_EQ(c.topic, "kv");
  EXPECT_FALSE(parse_kv_events_config(R"({"enable_kv_cache_events": false})").publishes());
  EXPECT_FALSE(parse_kv_events_config(R"({"enable_kv_cache_events": true, "publisher": "null"})").publishes());
  for (const char* bad : {R"({"enable_kv_cache_events": "yes"})", R"({"publisher": "kafka"})", R"({"hwm": 0})",
                          R"({"endpoints": "tcp://*:1"})", R"([1])", "not json"}) {
    try {
      parse_kv_events_config(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--kv-events-config"), std::string::npos) << e.what();
    }
  }
}

TEST(KvEvents, ASubscriberReplaysExactlyTheCachedBlocks) {
  ASSERT_TRUE(kv_events_supported()) << "built without libzmq / msgpack-c: tools/setup.sh installs them";
  const DefaultModelDir model;
  ASSERT_FALSE(model.path.empty());
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("pagoda_kv_events_" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  const std::string pub = "ipc://" + (tmp / "pub").string(), replay = "ipc://" + (tmp / "replay").string();
  const json config = {{"enable_kv_cache_events", true}, {"endpoint", pub}, {"replay_endpoint", replay},
                       {"topic", "kv-events"}};
  ServerProcess s;
  // 60 blocks of 16 tokens: the prompts below (~100-200 tokens each, 8 at once) cannot all be held;
  // 7 state snapshots, so that the hybrid default model can resume from a cached prefix.
  ASSERT_TRUE(s.start(model.path, {"--kv-events-config", config.dump(), "--kv-cache-memory-bytes", "4000000",
                                   "--state-snapshot-memory-fraction", "0.8", "--max-model-len", "512",
                                   "--max-num-seqs", "8"}))
      << s.log();

  const std::string ready = (tmp / "ready").string(), stop = (tmp / "stop").string(), out = (tmp / "out.json").string();
  std::thread subscriber([&] {
    run_command("/usr/bin/python3 " + source_path("tests/server/kv_events_subscriber.py") + " " + pub + " " + replay +
                " kv-events " + ready + " " + stop + " " + out + " 2>&1");
  });
  const auto t0 = std::chrono::steady_clock::now();
  while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(std::filesystem::exists(ready)) << "the subscriber did not start";

  // Prompts that share prefixes (hits), more distinct text than the pool holds (evictions), eight at
  // once (preemption), each asked twice.
  auto prompt = [](int topic, int variant) {
    std::string p = "Chapter " + std::to_string(topic) + ". ";
    for (int i = 0; i < 30 + 10 * (topic % 3); ++i) p += "the " + std::to_string(topic * 7 + i) + " rivers run ";
    return p + " variant " + std::to_string(variant);
  };
  // The same prompt twice, one after the other: a hit.
  for (int i = 0; i < 2; ++i) {
    const json body = {{"prompt", prompt(0, 0)}, {"max_tokens", 8}, {"ignore_eos", true}};
    EXPECT_EQ(s.request("POST", "/v1/completions", body.dump()).status, 200);
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> clients;
    for (int c = 0; c < 8; ++c)
      clients.emplace_back([&, c] {
        for (int topic = c; topic < 16; topic += 8) {
          const json body = {{"prompt", prompt(topic % 5, c % 2)}, {"max_tokens", 24}, {"ignore_eos", true}};
          const HttpResult r = s.request("POST", "/v1/completions", body.dump());
          EXPECT_EQ(r.status, 200) << r.body;
        }
      });
    for (std::thread& t : clients) t.join();
  }
  write_file(stop, "stop");
  subscriber.join();
  ASSERT_TRUE(std::filesystem::exists(out)) << "the subscriber wrote no summary";
  const json summary = json::parse(read_file(out));
  std::printf("subscriber: %s\n", summary.dump().c_str());
  EXPECT_TRUE(summary["errors"].empty()) << summary["errors"].dump(1);
  EXPECT_TRUE(summary["gap_free"].get<bool>());
  EXPECT_TRUE(summary["replay_matches_live"].get<bool>());
  EXPECT_GT(summary["batches_live"].get<int>(), 0);
  EXPECT_GT(summary["removed"].get<int>(), 0) << "the workload evicted nothing: the pool is too large to test evictions";
  EXPECT_EQ(summary["media"], json::array({"CPU"}));
  EXPECT_EQ(summary["dp_ranks"], json::array({0}));
  EXPECT_GT(s.metric("vllm:prefix_cache_hits_total"), 0) << "no prefix-cache hit: the test checks none";
  EXPECT_GT(s.metric("vllm:num_preemptions_total"), 0) << "no preemption: the test checks none";
  EXPECT_EQ(summary["cached"].get<double>(), s.metric("pagoda:prefix_cache_blocks"))
      << "the events describe another set of cached blocks than the server holds";
  EXPECT_EQ(s.metric("pagoda:kv_events_dropped_batches_total"), 0);
  EXPECT_EQ(s.stop(), 0) << s.log();
  std::filesystem::remove_all(tmp);
}

// The value of `name`'s series for replica `engine` (the `engine` label), or -1.
double engine_series(const ServerProcess& s, const std::string& name, int engine) {
  std::istringstream in(s.get("/metrics").body);
  const std::string label = "engine=\"" + std::to_string(engine) + "\"";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0 && line.find(label) != std::string::npos)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

// Two replicas, two streams: rank r's events come on the endpoints with the suffix _dpR (vLLM offsets
// a tcp port by R), tagged data_parallel_rank R, and leave cached exactly the blocks of replica R.
TEST(KvEvents, EachDataParallelRankPublishesItsOwnCache) {
  ASSERT_TRUE(kv_events_supported()) << "built without libzmq / msgpack-c: tools/setup.sh installs them";
  const DefaultModelDir model;
  ASSERT_FALSE(model.path.empty());
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("pagoda_kv_events_dp_" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  const std::string pub = "ipc://" + (tmp / "pub").string(), replay = "ipc://" + (tmp / "replay").string();
  const json config = {{"enable_kv_cache_events", true}, {"endpoint", pub}, {"replay_endpoint", replay},
                       {"topic", "kv-events"}};
  ServerProcess s;
  ASSERT_TRUE(s.start(model.path, {"--kv-events-config", config.dump(), "--max-model-len", "2048", "-dp", "2"}))
      << s.log();
  // Stopped and joined on every way out, a failed assertion included (a joinable thread would abort).
  struct Subscribers {
    std::string stop;
    std::vector<std::thread> threads;
    ~Subscribers() {
      write_file(stop, "stop");
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
    }
  } subscribers{(tmp / "stop").string(), {}};
  const std::string& stop = subscribers.stop;
  for (int r = 0; r < 2; ++r) {
    const std::string suffix = r == 0 ? "" : "_dp" + std::to_string(r);
    const std::string ready = (tmp / ("ready" + std::to_string(r))).string();
    const std::string out = (tmp / ("out" + std::to_string(r) + ".json")).string();
    subscribers.threads.emplace_back([&, suffix, ready, out] {
      run_command("/usr/bin/python3 " + source_path("tests/server/kv_events_subscriber.py") + " " + pub + suffix +
                  " " + replay + suffix + " kv-events " + ready + " " + stop + " " + out + " 2>&1");
    });
    const auto t0 = std::chrono::steady_clock::now();
    while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(std::filesystem::exists(ready)) << "subscriber " << r << " did not start";
  }
  auto prompt = [](int i) {
    std::string p = "Chapter " + std::to_string(i) + ". ";
    for (int k = 0; k < 20; ++k) p += "the " + std::to_string(i * 5 + k) + " hills rise ";
    return p;
  };
  // Replica 0 busy with a long request: the next ones go to replica 1; then, replica 0 idle again,
  // to replica 0. Both caches hold blocks.
  {
    RawConn busy(s.port());
    const json long_body = {{"prompt", "tell me"}, {"max_tokens", 2000}, {"ignore_eos", true}};
    ASSERT_TRUE(busy.send(post_request("/v1/completions", long_body.dump())));
    const auto t0 = std::chrono::steady_clock::now();
    while (engine_series(s, "vllm:num_requests_running", 0) != 1 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(engine_series(s, "vllm:num_requests_running", 0), 1);
    for (int i = 0; i < 3; ++i) {
      const json body = {{"prompt", prompt(i)}, {"max_tokens", 4}, {"ignore_eos", true}};
      EXPECT_EQ(s.request("POST", "/v1/completions", body.dump()).status, 200);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (engine_series(s, "vllm:num_requests_running", 0) != 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 3; i < 5; ++i) {
    const json body = {{"prompt", prompt(i)}, {"max_tokens", 4}, {"ignore_eos", true}};
    EXPECT_EQ(s.request("POST", "/v1/completions", body.dump()).status, 200);
  }
  write_file(stop, "stop");
  for (std::thread& t : subscribers.threads) t.join();
  for (int r = 0; r < 2; ++r) {
    const std::string out = (tmp / ("out" + std::to_string(r) + ".json")).string();
    ASSERT_TRUE(std::filesystem::exists(out)) << "subscriber " << r << " wrote no summary";
    const json summary = json::parse(read_file(out));
    std::printf("rank %d subscriber: %s\n", r, summary.dump().c_str());
    EXPECT_TRUE(summary["errors"].empty()) << summary["errors"].dump(1);
    EXPECT_TRUE(summary["gap_free"].get<bool>());
    EXPECT_EQ(summary["dp_ranks"], json::array({r}));
    EXPECT_GT(summary["stored"].get<int>(), 0) << "rank " << r << " cached nothing: the test checks nothing";
    EXPECT_EQ(summary["cached"].get<double>(), engine_series(s, "pagoda:prefix_cache_blocks", r)) << "rank " << r;
  }
  EXPECT_EQ(s.stop(), 0) << s.log();
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace pagoda::server::test
