// vllm serve's command line on `pagoda serve`: every flag of vLLM's (tests/fixtures/
// vllm_serve_flags.txt, from vLLM's source) is implemented, accepted with a warning, or refused
// with exit 2 naming it; lengths as vLLM writes them; --config FILE.yaml; did-you-mean for typos.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "../server/server_harness.h"
#include "../support/run_command.h"
#include "cli/engine_flags.h"
#include "core/build_paths.h"

namespace {

namespace fs = std::filesystem;
using pagoda::server::test::ServerProcess;
using pagoda::server::test::TestModelDir;
using pagoda::testing::CommandResult;

const std::string kMissing = "/nonexistent/pagoda-vllm-flags-model";

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CommandResult serve(const std::vector<std::string>& args) {
  std::string cmd = std::string(PAGODA_BINARY) + " serve";
  for (const std::string& a : args) cmd += " " + quoted(a);
  return pagoda::testing::run_command(cmd + " 2>&1");
}

struct FixtureFlag {
  std::vector<std::string> spellings;  // the long name first, then vLLM's short ones
  std::vector<std::string> values;
};

std::vector<FixtureFlag> fixture_flags() {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/vllm_serve_flags.txt");
  std::vector<FixtureFlag> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string names;
    words >> names;
    FixtureFlag f;
    for (size_t start = 0; start <= names.size();) {
      const size_t bar = std::min(names.find('|', start), names.size());
      f.spellings.push_back(names.substr(start, bar - start));
      start = bar + 1;
    }
    for (std::string v; words >> v;) f.values.push_back(v);
    out.push_back(f);
  }
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Whether `text` has a WARN line that names `flag`.
bool warns_about(const std::string& text, const std::string& flag) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (contains(line, "WARN") && contains(line, flag)) return true;
  return false;
}

TEST(VllmFlags, TheFixtureHoldsVllmsFlags) {
  const auto flags = fixture_flags();
  // cli_args.py + arg_utils.py of the commits named in the fixture: well over a hundred and fifty.
  EXPECT_GT(flags.size(), 200u);
  std::set<std::string> seen;
  for (const auto& f : flags) {
    EXPECT_TRUE(seen.insert(f.spellings[0]).second) << "listed twice: " << f.spellings[0];
    EXPECT_EQ(f.spellings[0].rfind("--", 0), 0u) << f.spellings[0];
  }
  for (const char* must : {"--tensor-parallel-size", "--swap-space", "--disable-frontend-multiprocessing",
                           "--uvicorn-log-level", "--trust-remote-code", "--max-model-len", "--quantization"})
    EXPECT_TRUE(seen.count(must)) << must;
}

// docs/coming-from-vllm.md has a row for each.
TEST(VllmFlags, TheDocsListEveryFlag) {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/docs/coming-from-vllm.md");
  std::stringstream doc;
  doc << in.rdbuf();
  ASSERT_FALSE(doc.str().empty());
  for (const FixtureFlag& f : fixture_flags())
    EXPECT_TRUE(contains(doc.str(), "| `" + f.spellings[0] + "`")) << f.spellings[0] << " has no row in the docs";
}

// The flag as a launch script writes it, with the model missing: a flag that parses reaches the
// model lookup (exit 1, "does not exist"); a refused one stops before with exit 2 and its name.
TEST(VllmFlags, EveryVllmFlagIsImplementedWarnedOrRefusedByName) {
  const std::string help = serve({"--help"}).out;
  ASSERT_TRUE(contains(help, "--max-model-len")) << help;
  int implemented = 0, warned = 0, refused = 0;
  for (const FixtureFlag& f : fixture_flags()) {
    const std::string& name = f.spellings[0];
    std::string seen_as;  // the disposition of the first spelling: every spelling must agree
    for (const std::string& spelling : f.spellings) {
      std::vector<std::string> args = {kMissing, spelling};
      args.insert(args.end(), f.values.begin(), f.values.end());
      const CommandResult r = serve(args);
      std::string as;
      if (r.code == 1 && contains(r.out, "'" + kMissing + "' does not exist")) {
        // Accepted. Silently only where it is one of pagoda's own (documented) flags.
        if (warns_about(r.out, name)) {
          as = "warned";
        } else {
          as = "implemented";
          EXPECT_TRUE(contains(help, name)) << name << " is accepted without a word but is not in --help:\n" << r.out;
        }
      } else if (r.code == 2) {
        as = "refused";
        EXPECT_TRUE(contains(r.out, name)) << spelling << ": the refusal does not name " << name << ":\n" << r.out;
        EXPECT_FALSE(contains(r.out, "unknown flag")) << name << " is refused as unknown, without a reason:\n" << r.out;
        EXPECT_FALSE(contains(r.out, "were not expected")) << name << ":\n" << r.out;
        EXPECT_GT(r.out.size(), name.size() + 40) << name << ": the refusal says nothing more:\n" << r.out;
      } else {
        ADD_FAILURE() << spelling << " " << ::testing::PrintToString(f.values) << ": exit " << r.code
                      << ", neither accepted nor refused:\n" << r.out;
        continue;
      }
      if (seen_as.empty()) seen_as = as;
      EXPECT_EQ(as, seen_as) << spelling << " is " << as << " but " << f.spellings[0] << " is " << seen_as;
    }
    implemented += seen_as == "implemented";
    warned += seen_as == "warned";
    refused += seen_as == "refused";
  }
  // Each kind occurs; the counts are printed for the docs' table.
  EXPECT_GT(implemented, 30);
  EXPECT_GT(warned, 30);
  EXPECT_GT(refused, 10);
  std::printf("vLLM flags: %d implemented, %d warned, %d refused\n", implemented, warned, refused);
}

// The harmless flags every launch script carries: accepted, each with one warning line.
TEST(VllmFlags, LaunchScriptBoilerplateIsAcceptedWithOneWarningEach) {
  const CommandResult r = serve({kMissing, "-tp", "1", "--disable-frontend-multiprocessing", "--swap-space", "16",
                                 "--uvicorn-log-level", "warning", "--disable-log-requests", "--max_model_len", "4k",
                                 "--tensor-parallel-size=1"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "'" + kMissing + "' does not exist")) << r.out;
  for (const char* flag : {"--disable-frontend-multiprocessing", "--swap-space"}) {
    int lines = 0;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) lines += contains(line, "WARN") && contains(line, flag);
    EXPECT_EQ(lines, 1) << flag << ":\n" << r.out;
  }
}

// -tp N is taken as vLLM spells it (the model lookup is reached); a GPU group, which needs NCCL,
// is refused before anything loads, naming the flag.
TEST(VllmFlags, TensorParallelSizeIsTakenAndAGpuGroupIsRefusedClearly) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{kMissing, "-tp", "2"},
                                               std::vector<std::string>{kMissing, "--tensor-parallel-size", "4"},
                                               std::vector<std::string>{kMissing, "-tp=2"}}) {
    const CommandResult r = serve(args);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, "does not exist")) << "the flag did not parse:\n" << r.out;
  }
  const TestModelDir dir;
  ASSERT_FALSE(dir.path.empty());
  const CommandResult r = serve({dir.path, "--device", "cuda", "-tp", "2"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "--tensor-parallel-size 2 on --device cuda")) << r.out;
  EXPECT_TRUE(contains(r.out, "NCCL")) << r.out;
  EXPECT_FALSE(contains(r.out, "weights loaded")) << "refused only after loading:\n" << r.out;
}

TEST(VllmFlags, MistypedFlagsGetSuggestions) {
  CommandResult r = serve({kMissing, "--max-modle-len", "4096"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "'--max-modle-len'")) << r.out;
  EXPECT_TRUE(contains(r.out, "Did you mean '--max-model-len'")) << r.out;
  r = serve({kMissing, "--gpu-memory-utilisation=0.5"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--gpu-memory-utilization")) << r.out;
  // Nothing close: still named, exit 2.
  r = serve({kMissing, "--frobnicate-widgets"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--frobnicate-widgets")) << r.out;
  EXPECT_FALSE(contains(r.out, "Did you mean")) << r.out;
}

// vLLM's human_readable_int: k = 1000, K = 1024, decimals with the decimal suffixes only.
TEST(VllmFlags, HumanReadableLengths) {
  using pagoda::cli::parse_human_int;
  EXPECT_EQ(parse_human_int("4096", "--max-model-len"), 4096);
  EXPECT_EQ(parse_human_int("4k", "--max-model-len"), 4000);
  EXPECT_EQ(parse_human_int("4K", "--max-model-len"), 4096);
  EXPECT_EQ(parse_human_int("32K", "--max-model-len"), 32768);
  EXPECT_EQ(parse_human_int("25.6k", "--max-model-len"), 25600);
  EXPECT_EQ(parse_human_int("1M", "--max-model-len"), 1048576);
  EXPECT_EQ(parse_human_int("1m", "--max-model-len"), 1000000);
  EXPECT_EQ(parse_human_int("2G", "--kv-cache-memory-bytes"), 2147483648LL);
  EXPECT_EQ(parse_human_int(" 128 ", "--max-model-len"), 128);
  EXPECT_THROW(parse_human_int("1.5K", "--max-model-len"), CLI::ValidationError);
  EXPECT_THROW(parse_human_int("1T", "--max-model-len"), CLI::ValidationError);
  EXPECT_THROW(parse_human_int("4kb", "--max-model-len"), CLI::ValidationError);
  EXPECT_THROW(parse_human_int("", "--max-model-len"), CLI::ValidationError);
  const CommandResult r = serve({kMissing, "--max-model-len", "1.5K"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--max-model-len")) << r.out;
  EXPECT_TRUE(contains(r.out, "1.5k")) << "suggests the decimal suffix:\n" << r.out;
}

// The lengths reach the engine: /v1/models reports the context length in force.
TEST(VllmFlags, HumanLengthsAndConfigFileReachTheServer) {
  TestModelDir dir;
  {
    ServerProcess s;
    ASSERT_TRUE(s.start(dir.path, {"--max-model-len", "1K", "--served-model-name", "tiny"})) << s.log();
    const nlohmann::json models = s.get("/v1/models").json();
    EXPECT_EQ(models["data"][0]["max_model_len"], 1024) << models.dump();
  }
  // --config: vLLM's YAML file of flags; the command line wins over it.
  const std::string yaml = dir.path + "/serve.yaml";
  pagoda::server::test::write_file(yaml,
                                   "# as vllm serve --config takes it\n"
                                   "max-model-len: 2k\n"
                                   "served_model_name: from-yaml\n"
                                   "disable-frontend-multiprocessing: true\n"
                                   "enable-prefix-caching: false\n"
                                   "swap-space: 4\n");
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--config", yaml})) << s.log();
  nlohmann::json models = s.get("/v1/models").json();
  EXPECT_EQ(models["data"][0]["id"], "from-yaml") << models.dump();
  EXPECT_EQ(models["data"][0]["max_model_len"], 2000) << models.dump();
  EXPECT_TRUE(warns_about(s.log(), "--disable-frontend-multiprocessing")) << s.log();
  EXPECT_TRUE(warns_about(s.log(), "--swap-space")) << s.log();
  s.stop();
  ServerProcess s2;
  ASSERT_TRUE(s2.start(dir.path, {"--config", yaml, "--served-model-name", "from-cli"})) << s2.log();
  models = s2.get("/v1/models").json();
  EXPECT_EQ(models["data"][0]["id"], "from-cli") << models.dump();
  EXPECT_EQ(models["data"][0]["max_model_len"], 2000) << models.dump();
}

TEST(VllmFlags, ConfigFileErrorsNameTheFile) {
  CommandResult r = serve({kMissing, "--config", "/nonexistent/serve.yaml"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "/nonexistent/serve.yaml")) << r.out;
  const std::string bad = (fs::temp_directory_path() / ("pagoda-bad-" + std::to_string(getpid()) + ".yaml")).string();
  pagoda::server::test::write_file(bad, "max-model-len: [unclosed\n");
  r = serve({kMissing, "--config", bad});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, bad)) << r.out;
  // A key that is no flag: named, with a suggestion, as on the command line.
  pagoda::server::test::write_file(bad, "max-model-lenn: 4096\n");
  r = serve({kMissing, "--config", bad});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--max-model-lenn")) << r.out;
  EXPECT_TRUE(contains(r.out, "--max-model-len'")) << r.out;
  fs::remove(bad);
}

// --device auto (the default) is cuda only where a CUDA GPU is there to use.
TEST(VllmFlags, DeviceAutoIsTheDefault) {
  TestModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--max-model-len", "256"})) << s.log();
#ifdef PAGODA_HAS_CUDA
  GTEST_SKIP() << "a CUDA build: which device auto picks depends on the machine (tests/gpu covers it)";
#else
  EXPECT_TRUE(contains(s.log(), "--device auto: cpu")) << s.log();
  EXPECT_TRUE(contains(serve({"--help"}).out, "auto")) << "the help shows the default";
#endif
}

}  // namespace
