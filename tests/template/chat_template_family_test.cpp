// The real chat templates of the Llama 3, Mistral and Gemma 3 families (tokenizer_config.json of
// the @lenml packages that tools/fetch_test_data.sh puts under tests/data/) against Python jinja2 as
// transformers sets it up: tests/fixtures/chat_templates/<name>_renders.json, written by
// tools/chat_template_family_reference.py, compared byte for byte; raise_exception on purpose
// (roles out of order, bad tool-call ids) must surface as the same error.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "template/chat_template.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;

const std::string kRoot = PAGODA_SOURCE_DIR;

struct Family {
  const char* fixture;  // tests/fixtures/chat_templates/<fixture>_renders.json
  const char* data;     // tests/data/<data>: tokenizer_config.json with the template
  size_t min_cases;
  size_t min_errors;  // raise_exception cases
};

// One row per template; a new family adds a row (and its cases in the fixture script).
const Family kFamilies[] = {
    {"llama3_1", "llama3_1-tokenizer", 10, 0},
    {"llama3_2", "llama3_2-tokenizer", 20, 2},
    {"mistral_nemo", "mistral_nemo-tokenizer", 20, 5},
    {"gemma3", "gemma3-tokenizer", 15, 4},
};

// What transformers' strftime_now would give now (datetime.now().strftime, local time, C locale).
std::string strftime_now(const std::string& format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  return std::string(buf, std::strftime(buf, sizeof buf, format.c_str(), &tm));
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

class FamilyChatTemplate : public ::testing::TestWithParam<Family> {};

TEST_P(FamilyChatTemplate, MatchesJinja2) {
  const Family& f = GetParam();
  const std::string dir = kRoot + "/tests/data/" + f.data;
  // A missing download must fail, not skip: the data is part of the test setup.
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer_config.json"))
      << dir << "/tokenizer_config.json is missing: run tools/fetch_test_data.sh";
  const std::optional<ChatTemplate> tmpl = ChatTemplate::load_dir(dir);
  ASSERT_TRUE(tmpl.has_value());
  const std::string fixture = kRoot + "/tests/fixtures/chat_templates/" + f.fixture + "_renders.json";
  std::ifstream in(fixture);
  ASSERT_TRUE(in.good()) << fixture << " is missing: run tools/chat_template_family_reference.py";
  const ordered_json doc = ordered_json::parse(in);
  EXPECT_EQ(doc.at("template_from").get<std::string>(), std::string("tests/data/") + f.data + "/tokenizer_config.json");
  const ordered_json& cases = doc.at("cases");
  ASSERT_GE(cases.size(), f.min_cases);
  size_t errors = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    if (!c.contains("error")) {
      std::string want = c.at("render").get<std::string>();
      // The fixture's fake clock gave this date; pagoda's strftime_now reads the real one.
      if (c.contains("strftime_now")) want = replace_all(want, c["strftime_now"].get<std::string>(), strftime_now("%d %b %Y"));
      std::string got;
      ASSERT_NO_THROW(got = tmpl->render(c.at("context")));
      EXPECT_EQ(got, want);
      continue;
    }
    errors += !c.contains("error_type");
    try {
      tmpl->render(c.at("context"));
      ADD_FAILURE() << "expected an error: " << c["error"];
    } catch (const Error& e) {
      const std::string msg = e.what(), want = c["error"].get<std::string>();
      if (c.contains("error_type")) {
        // Another Python exception (a TypeError, say): the same text after our position prefix.
        EXPECT_EQ(msg.rfind("chat template error at line ", 0), 0u) << msg;
        EXPECT_EQ(msg.substr(msg.find(": ") + 2), want);
      } else {
        // raise_exception(msg) surfaces as "chat template: msg", which the server answers with a 400.
        EXPECT_EQ(msg, "chat template: " + want);
      }
    }
  }
  EXPECT_GE(errors, f.min_errors);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyChatTemplate, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& p) { return std::string(p.param.fixture); });

}  // namespace
}  // namespace pagoda
