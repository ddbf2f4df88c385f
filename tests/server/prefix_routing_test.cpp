// Prefix-aware routing from KV cache events (tests/server/prefix_router.py): two pagoda replicas,
// a router that learns their cached blocks from the events alone, multi-turn conversations; against
// round robin, the prefix-aware router must raise the replicas' prefix-cache hit rate. Both hit
// rates and mean TTFTs are printed (TTFT is reported, not asserted: it is a timing).
#include <gtest/gtest.h>

#include <filesystem>

#include "server/kv_event_publisher.h"
#include "server_harness.h"
#include "core/build_paths.h"

namespace pagoda::server::test {
namespace {

TEST(PrefixRouting, EventsRaiseTheHitRateOverRoundRobin) {
  ASSERT_TRUE(kv_events_supported()) << "built without libzmq / msgpack-c: tools/setup.sh installs them";
  const DefaultModelDir model;
  ASSERT_FALSE(model.path.empty());
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("pagoda_prefix_routing_" + std::to_string(getpid()));
  const std::string out = (tmp / "out.json").string();
  const pagoda::testing::CommandResult r = pagoda::testing::run_command(
      "/usr/bin/python3 " + source_path("tests/server/prefix_router.py") + " " + PAGODA_BINARY + " " + model.path +
      " " + tmp.string() + " " + out + " 2>&1");
  std::printf("%s", r.out.c_str());
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json results = nlohmann::json::parse(read_file(out));
  ASSERT_EQ(results.size(), 2u);
  const nlohmann::json &rr = results[0], &aware = results[1];
  EXPECT_EQ(rr["policy"], "round-robin");
  EXPECT_EQ(aware["policy"], "prefix-aware");
  EXPECT_GT(aware["router_matched_blocks"].get<int>(), 0) << "the router learned nothing from the events";
  EXPECT_GT(aware["hit_rate"].get<double>(), rr["hit_rate"].get<double>() + 0.1) << results.dump();
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace pagoda::server::test
