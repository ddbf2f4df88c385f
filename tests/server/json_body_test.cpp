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

}  // namespace
}  // namespace pagoda::server
