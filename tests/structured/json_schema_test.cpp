// The JSON Schema front end: annotations never refuse a schema; what cannot be enforced is refused
// by name; numeric ranges (at ±2^63 and beyond, fractional, exclusive, multipleOf) hold on many
// random walks of a byte vocabulary, every output checked by python3-jsonschema
// (tests/structured/validate_outputs.py), never by pagoda.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "structured/compile.h"
#include "structured/matcher.h"
#include "core/build_paths.h"

namespace pagoda::structured {
namespace {

using nlohmann::json;

std::string compile_error(const std::string& schema) {
  try {
    compile_constraint({ConstraintKind::kJsonSchema, schema, {}});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, AnnotationsAndUnknownKeywordsNeverRefuse) {
  for (const char* s : {
           R"({"type":"object","id":"x","$id":"y","self":{"href":"z"},"links":[{"rel":"self"}],"readonly":true,
               "propertyOrder":["a"],"x-kubernetes-group-version-kind":[{"group":""}],"javaType":"A",
               "properties":{"a":{"type":"string","title":"t","description":"d","examples":["e"],"$comment":"c",
               "default":"q","deprecated":true,"readOnly":true,"writeOnly":false,"_format":"x","esriDocumentation":{}}}})",
           R"({"type":"integer","contentMediaType":"text/plain","version":3,"preferredOrder":1})",
           R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":["a"]})",
       })
    EXPECT_EQ(compile_error(s), "") << s;
}

TEST(JsonSchema, WhatCannotBeEnforcedIsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"number","multipleOf":0.3})", "multipleOf 0.3"},
      {R"({"type":"string","not":{"pattern":"a"}})", "'not' with 'pattern'"},
      {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "oneOf: alternatives 0 and 1"},
      {R"({"type":"array","items":{"type":"string"},"uniqueItems":true,"minItems":2})", "uniqueItems"},
      {R"({"type":"string","pattern":"^a*$","minLength":3})", "'pattern' together with minLength/maxLength"},
      {R"({"type":"integer","minimum":5,"maximum":4.5})", "admit no integer"},
      {R"({"type":"array","contains":{"type":"integer"},"minContains":2})", "'minContains'"},
      {R"({"type":"integer","multipleOf":1000,"minimum":5000})", "multipleOf 1000"},
  };
  for (const auto& [schema, needle] : cases)
    EXPECT_NE(compile_error(schema).find(needle), std::string::npos) << schema << " -> " << compile_error(schema);
}

// Random walks on a vocabulary of single bytes (digits one at a time, so the walks spread over
// the range), many per schema.
std::string walk(const std::shared_ptr<GrammarRuntime>& rt, std::mt19937_64& rng, int budget = 400) {
  Matcher m(rt);
  TokenMask mask;
  std::vector<int32_t> allowed;
  std::string text;
  for (int step = 0; step < budget; ++step) {
    m.fill_mask(mask, budget - step);
    allowed_ids(mask, allowed);
    if (allowed.empty()) break;
    int32_t t = allowed[rng() % allowed.size()];
    if (m.accepting() && rng() % 4 == 0) t = 256;
    // Half of the time a byte that closes a string, array or object, so free text ends.
    if (t != 256 && rng() % 2 == 0)
      for (int32_t c : {'"', ']', '}'})
        if (mask_allows(mask, c)) t = c;
    EXPECT_TRUE(m.accept(t));
    if (t == 256) return text;
    text += static_cast<char>(t);
  }
  ADD_FAILURE() << "walk did not end: " << text;
  return text;
}

std::shared_ptr<const TokenTrie> byte_vocabulary() {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  vocab.emplace_back();  // EOS = 256
  return std::make_shared<TokenTrie>(vocab);
}

// The schemas openai-node's zodResponseFormat and the AI SDK's zodSchema send for zod objects with
// .int(), .min(18), .positive(), .email(), .uuid(), .datetime(), .url(), enums, nullable, arrays
// (tests/structured/zod_schemas.mjs): all compile, and every output validates.
TEST(JsonSchema, ZodSchemasOfTheClientsCompileAndValidate) {
  const std::string src = PAGODA_SOURCE_DIR;
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (std::system(("test -d " + src + "/tests/data/node/node_modules/zod").c_str()) != 0)
    GTEST_SKIP() << "tests/data/node is missing: run tools/fetch_test_data.sh";
  const std::string schemas_path = ::testing::TempDir() + "/zod_schemas.json";
  ASSERT_EQ(std::system(("node " + src + "/tests/structured/zod_schemas.mjs > " + schemas_path).c_str()), 0);
  std::ifstream f(schemas_path);
  const json schemas = json::parse(f);
  ASSERT_GE(schemas.size(), 7u);
  auto trie = byte_vocabulary();
  const std::string out_path = ::testing::TempDir() + "/zod_outputs.jsonl";
  std::ofstream out(out_path);
  std::mt19937_64 rng(11);
  for (const json& s : schemas) {
    std::shared_ptr<GrammarRuntime> rt;
    try {
      rt = std::make_shared<GrammarRuntime>(compile_constraint({ConstraintKind::kJsonSchema, s.dump(), {}}), trie,
                                            std::vector<int32_t>{256});
    } catch (const Error& e) {
      ADD_FAILURE() << s.dump() << ": " << e.what();
      continue;
    }
    for (int i = 0; i < 10; ++i)
      out << json{{"kind", "schema"}, {"spec", s}, {"output", walk(rt, rng, 3000)}}.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  out.close();
  const std::string cmd = "python3 " + src + "/tests/structured/validate_outputs.py " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(JsonSchema, NumericRangesHoldOnEveryWalk) {
  const std::vector<std::string> schemas = {
      R"({"type":"integer","minimum":-9223372036854775808,"maximum":-9223372036854775790})",
      R"({"type":"integer","minimum":9223372036854775800,"maximum":9223372036854775817})",
      R"({"type":"integer","exclusiveMinimum":9223372036854775807})",
      R"({"type":"integer","minimum":1e19,"maximum":1.0000000000000002e19})",
      R"({"type":"integer","exclusiveMaximum":-18446744073709551616})",
      R"({"type":"integer","minimum":99999999999999999999999,"maximum":100000000000000000000001})",
      R"({"type":"integer","maximum":1e30})",
      R"({"type":"integer","minimum":-1e25,"maximum":-1e25})",
      R"({"type":"integer","minimum":-37,"exclusiveMaximum":1203})",
      R"({"type":"integer","minimum":0.5,"maximum":3.5})",
      R"({"type":"integer","minimum":5,"exclusiveMinimum":true,"maximum":9})",
      R"({"type":"number","minimum":-1.25,"maximum":2.5})",
      R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})",
      R"({"type":"number","minimum":0.001,"maximum":0.0015})",
      R"({"type":"number","exclusiveMinimum":-100.5,"maximum":-99.75})",
      R"({"type":"number","minimum":1e20})",
      R"({"type":"number","maximum":-0.5})",
      R"({"type":"integer","multipleOf":3})",
      R"({"type":"integer","multipleOf":13,"minimum":1})",
      R"({"type":"integer","multipleOf":250,"minimum":-1000,"maximum":100000})",
      R"({"type":"number","multipleOf":0.25,"minimum":-3,"maximum":3})",
      R"({"type":"number","multipleOf":0.05,"exclusiveMinimum":10})",
  };
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  vocab.emplace_back();  // EOS = 256
  auto trie = std::make_shared<TokenTrie>(vocab);
  const std::string out_path = ::testing::TempDir() + "/json_schema_ranges.jsonl";
  std::ofstream out(out_path);
  std::mt19937_64 rng(7);
  for (const std::string& s : schemas) {
    std::shared_ptr<GrammarRuntime> rt;
    try {
      rt = std::make_shared<GrammarRuntime>(compile_constraint({ConstraintKind::kJsonSchema, s, {}}), trie,
                                            std::vector<int32_t>{256});
    } catch (const Error& e) {
      ADD_FAILURE() << s << ": " << e.what();
      continue;
    }
    for (int i = 0; i < 40; ++i)
      out << json{{"kind", "schema"}, {"spec", json::parse(s)}, {"output", walk(rt, rng)}}.dump() << "\n";
  }
  out.close();
  const std::string cmd = "python3 " + std::string(PAGODA_SOURCE_DIR) + "/tests/structured/validate_outputs.py " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace pagoda::structured
