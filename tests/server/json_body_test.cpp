// Client JSON: nesting bounded at parse time, and integers that 64 bits cannot hold refused instead
// of silently turned into doubles.
#include <gtest/gtest.h>

#include "server/json_body.h"

namespace pagoda::server {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonBody, DepthIsBoundedAtParseTime) {
  std::string error;
  EXPECT_FALSE(parse_json_bounded(nested(64), 64, error).is_discarded()) << error;
  EXPECT_TRUE(parse_json_bounded(nested(65), 64, error).is_discarded());
  EXPECT_NE(error.find("64 levels"), std::string::npos) << error;
  error.clear();
  // 200,000 levels: an error, not a stack overflow.
  EXPECT_TRUE(parse_json_bounded(nested(200000), 64, error).is_discarded());
  EXPECT_NE(error.find("64 levels"), std::string::npos) << error;
  std::string objs;
  for (int i = 0; i < 100; ++i) objs += "{\"a\":";
  objs += "1" + std::string(100, '}');
  EXPECT_TRUE(parse_json_bounded(objs, 64, error).is_discarded());
}

TEST(JsonBody, IntegersBeyond64BitsAreRefusedNotRounded) {
  std::string error;
  nlohmann::ordered_json j = parse_json_bounded(R"({"seed": 18446744073709551615, "x": -9223372036854775808})", 64, error);
  ASSERT_FALSE(j.is_discarded()) << error;
  EXPECT_EQ(j["seed"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["x"].get<int64_t>(), INT64_MIN);

  for (const char* bad : {R"({"seed": 18446744073709551616})", R"({"x": -9223372036854775809})",
                          R"([1, 2, 123456789012345678901234567890])"}) {
    error.clear();
    EXPECT_TRUE(parse_json_bounded(bad, 64, error).is_discarded()) << bad;
    EXPECT_NE(error.find("does not fit in 64 bits"), std::string::npos) << error;
  }
  // Floats of any size, and digits inside strings, are not integers.
  for (const char* ok : {R"({"t": 1e400})", R"({"t": 123456789012345678901234567890.5})",
                         R"({"s": "123456789012345678901234567890", "e": "\"99999999999999999999999"})"}) {
    error.clear();
    const auto parsed = parse_json_bounded(ok, 64, error);
    EXPECT_TRUE(error.find("64 bits") == std::string::npos) << ok << ": " << error;
  }
}

TEST(JsonBody, RepeatedKeysKeepFirstPlaceAndLastValue) {
  std::string body = "{";
  for (int i = 0; i < 40; ++i) body += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";  // past the scan
  body += "\"k3\":\"late\",\"k39\":[1]}";
  std::string error;
  const auto j = parse_json_bounded(body, 64, error);
  ASSERT_FALSE(j.is_discarded()) << error;
  EXPECT_EQ(j.size(), 40u);
  EXPECT_EQ(j["k3"], "late");
  EXPECT_EQ(j["k39"], nlohmann::ordered_json::array({1}));
  EXPECT_EQ(std::next(j.begin(), 3).key(), "k3");
  EXPECT_EQ(std::prev(j.end()).key(), "k39");
}

TEST(JsonBody, KeyCountsAreBounded) {
  JsonLimits limits;
  limits.max_object_keys = 100;
  limits.max_keys = 1000;
  auto object = [](int keys) {
    std::string s = "{";
    for (int i = 0; i < keys; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    return s + "}";
  };
  EXPECT_EQ(parse_json_limited(object(100), limits).fault, JsonFault::none);
  EXPECT_EQ(parse_json_limited(object(101), limits).fault, JsonFault::object_keys);
  std::string many = "[";
  for (int i = 0; i < 20; ++i) many += (i ? "," : "") + object(50);
  EXPECT_EQ(parse_json_limited(many + "]", limits).fault, JsonFault::none);  // 1,000 keys
  EXPECT_EQ(parse_json_limited(many + ",{\"x\":1}]", limits).fault, JsonFault::total_keys);
  // A repeated key counts each time it is parsed (its work is done each time).
  std::string repeated = "{";
  for (int i = 0; i < 1001; ++i) repeated += i ? ",\"a\":0" : "\"a\":0";
  const JsonParse p = parse_json_limited(repeated + "}", limits);
  EXPECT_EQ(p.fault, JsonFault::total_keys);
  EXPECT_NE(describe_json_fault(p, limits, "the body").find("1000 object keys"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::server
