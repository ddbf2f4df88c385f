// `pagoda serve --tensor-parallel-size 2` on the default model (Qwen3.5, hybrid) answers as the
// one-rank server does: the same greedy text and token logprobs; a size its heads do not allow
// exits 1 before serving, naming the config field.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/run_command.h"
#include "core/build_paths.h"
#include "server_harness.h"

namespace pagoda::server::test {
namespace {

using json = nlohmann::json;

json complete(ServerProcess& s) {
  const json body = {{"prompt", "The quick brown fox"}, {"max_tokens", 24}, {"temperature", 0},
                     {"ignore_eos", true}, {"logprobs", 1}};
  const HttpResult r = s.request("POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json();
}

TEST(TensorParallelServer, TwoRanksAnswerAsOne) {
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  json one, two;
  {
    ServerProcess s;
    ASSERT_TRUE(s.start(dir.path, {"--device", "cpu"})) << s.log();
    one = complete(s);
    EXPECT_EQ(s.stop(), 0) << s.log();
  }
  {
    ServerProcess s;
    ASSERT_TRUE(s.start(dir.path, {"--device", "cpu", "-tp", "2"})) << s.log();
    two = complete(s);
    EXPECT_NE(s.log().find("rank 1: "), std::string::npos) << "no per-rank memory plan:\n" << s.log();
    EXPECT_EQ(s.stop(), 0) << s.log();
  }
  ASSERT_TRUE(one.contains("choices") && two.contains("choices"));
  EXPECT_EQ(two["choices"][0]["text"], one["choices"][0]["text"]);
  const json& a = one["choices"][0]["logprobs"]["token_logprobs"];
  const json& b = two["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(a.size(), 24u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i].get<double>(), a[i].get<double>(), 1e-4) << "token " << i;
}

TEST(TensorParallelServer, ASizeTheHeadsDoNotAllowExitsOneNamingTheField) {
  const DefaultModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  const auto r = pagoda::testing::run_command("timeout 60 " + std::string(PAGODA_BINARY) + " serve " + dir.path +
                                              " --device cpu --port 0 -tp 3 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("num_attention_heads (4) does not divide over 3 ranks"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pagoda::server::test
