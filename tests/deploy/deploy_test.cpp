// deploy/ as far as these machines can take it (no container runtime, no cluster): the Kubernetes
// and llm-d manifests' serve arguments parse (a missing model in place of the Hub id: pagoda gets
// past every flag, --kv-events-config's JSON included, to the model lookup), their probe paths
// answer 200 on a running server, and every vllm: metric the Grafana dashboard queries is on that
// server's /metrics with --metrics-prefix vllm.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "../server/server_harness.h"
#include "core/build_paths.h"

namespace pagoda::server::test {
namespace {

const std::string kMissing = "/nonexistent/pagoda-deploy-model";

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The serve arguments of the Deployment's container and of the llm-d values' decode container.
std::vector<std::vector<std::string>> manifest_args() {
  std::vector<std::vector<std::string>> out;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(source_path("deploy/k8s/deployment.yaml")))
    if (doc["kind"].as<std::string>() == "Deployment")
      out.push_back(doc["spec"]["template"]["spec"]["containers"][0]["args"].as<std::vector<std::string>>());
  const YAML::Node values = YAML::LoadFile(source_path("deploy/llm-d/values.yaml"));
  out.push_back(values["decode"]["containers"][0]["args"].as<std::vector<std::string>>());
  return out;
}

TEST(Deploy, ManifestServeArgumentsParse) {
  const auto all = manifest_args();
  ASSERT_EQ(all.size(), 2u);
  for (std::vector<std::string> args : all) {
    ASSERT_FALSE(args.empty());
    args[0] = kMissing;  // the Hub id: these machines reach no Hub
    std::string cmd = std::string(PAGODA_BINARY) + " serve";
    for (const std::string& a : args) cmd += " " + quoted(a);
    const pagoda::testing::CommandResult r = pagoda::testing::run_command(cmd + " 2>&1");
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("'" + kMissing + "' does not exist"), std::string::npos) << cmd << "\n" << r.out;
  }
}

TEST(Deploy, ProbesAnswerAndTheDashboardsMetricsExist) {
  const DefaultModelDir model;
  ASSERT_FALSE(model.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model.path, {"--metrics-prefix", "vllm"})) << s.log();
  std::set<std::string> probes;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(source_path("deploy/k8s/deployment.yaml")))
    if (doc["kind"].as<std::string>() == "Deployment")
      for (const char* p : {"startupProbe", "livenessProbe", "readinessProbe"})
        probes.insert(doc["spec"]["template"]["spec"]["containers"][0][p]["httpGet"]["path"].as<std::string>());
  ASSERT_EQ(probes.size(), 1u);
  for (const std::string& p : probes) EXPECT_EQ(s.get(p).status, 200) << p;
  // One request, so that the histograms have series.
  EXPECT_EQ(s.request("POST", "/v1/completions", R"({"prompt": "hello", "max_tokens": 4})").status, 200);
  const std::string metrics = s.get("/metrics").body;
  const std::string dashboard = read_file(source_path("deploy/grafana/pagoda-dashboard.json"));
  const std::regex name(R"(vllm:[a-z_]+)");
  int checked = 0;
  for (auto it = std::sregex_iterator(dashboard.begin(), dashboard.end(), name); it != std::sregex_iterator(); ++it) {
    EXPECT_NE(metrics.find("\n" + it->str()), std::string::npos) << it->str() << " is not on /metrics";
    ++checked;
  }
  EXPECT_GE(checked, 10);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace pagoda::server::test
