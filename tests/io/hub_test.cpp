// Models by Hugging Face id (io/hub.h, cli/model_source.h): the cache lookup with no server at
// all, and downloads from a fake Hub on 127.0.0.1 (tests/io/fake_hub.py) that serves the files of
// models/default — never the network.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../server/server_harness.h"
#include "core/error.h"
#include "io/hub.h"
#include "io/hub_cache.h"
#include "core/build_paths.h"

extern char** environ;

namespace pagoda::hub {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using server::test::read_file;
using server::test::write_file;

const std::string kSource = std::string(PAGODA_SOURCE_DIR) + "/models/default";
const std::string kShaMain = "1111111111111111111111111111111111111111";
const std::string kShaV2 = "2222222222222222222222222222222222222222";

std::string temp_dir(const std::string& tag) {
  static int n = 0;
  const fs::path dir =
      fs::temp_directory_path() / ("pagoda-hub-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(++n));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// The files of models/default under `dir`, linked (the fake reads through links); config.json a
// copy, with max_position_embeddings set when given (two revisions that differ).
void make_commit(const fs::path& dir, std::optional<int> max_positions = std::nullopt) {
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kSource)) {
    if (e.path().filename() == "config.json") continue;
    fs::create_symlink(e.path(), dir / e.path().filename());
  }
  json config = json::parse(read_file(kSource + "/config.json"));
  if (max_positions) config["max_position_embeddings"] = *max_positions;
  write_file((dir / "config.json").string(), config.dump(2));
}

class FakeHub {
 public:
  // One repository `id`, described as fake_hub.py's spec has it ("refs", "commits", "token",
  // "extra_files"); `more`: the spec's other keys (cut_once, chunk_delay_s).
  FakeHub(const std::string& id, const json& repo, json more = json::object()) : dir_(temp_dir("fake")) {
    json spec = std::move(more);
    spec["repos"] = json::object();
    spec["repos"][id] = repo;
    spec["port_file"] = dir_ + "/port";
    spec["log"] = dir_ + "/requests.jsonl";
    write_file(dir_ + "/spec.json", spec.dump());
    std::string script = std::string(PAGODA_SOURCE_DIR) + "/tests/io/fake_hub.py", spec_path = dir_ + "/spec.json";
    std::string python = "python3";
    char* argv[] = {python.data(), script.data(), spec_path.data(), nullptr};
    if (posix_spawnp(&pid_, "python3", nullptr, nullptr, argv, environ) != 0) pid_ = -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (pid_ > 0 && !fs::exists(dir_ + "/port") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (fs::exists(dir_ + "/port")) port_ = std::stoi(read_file(dir_ + "/port"));
  }
  ~FakeHub() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  bool up() const { return port_ > 0; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<json> requests() const {
    std::vector<json> out;
    std::istringstream in(read_file(dir_ + "/requests.jsonl"));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
  std::vector<json> requests_for(const std::string& file) const {
    std::vector<json> out;
    for (const json& r : requests())
      if (r["path"].get<std::string>().ends_with("/" + file)) out.push_back(r);
    return out;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// One repository "org/tiny": main -> kShaMain; v2 -> kShaV2 with another config.json.
struct TinyRepo {
  std::string files = temp_dir("repo");
  json spec() const {
    return {{"refs", {{"main", kShaMain}, {"v2", kShaV2}}},
            {"commits", {{kShaMain, files + "/main"}, {kShaV2, files + "/v2"}}}};
  }
  TinyRepo() {
    make_commit(files + "/main");
    make_commit(files + "/v2", 1024);
  }
  ~TinyRepo() { fs::remove_all(files); }
};

HubOptions options(const std::string& endpoint, const std::string& cache, const std::string& revision = "main") {
  HubOptions o;
  o.endpoint = endpoint;
  o.cache_root = cache;
  o.revision = revision;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void expect_same_file(const fs::path& got, const fs::path& want) {
  ASSERT_TRUE(fs::exists(got)) << got;
  EXPECT_EQ(fs::file_size(got), fs::file_size(want)) << got;
  EXPECT_TRUE(read_file(got.string()) == read_file(want.string())) << got << " differs from " << want;
}

// The progress lines' sizes, as the test expects them: MiB with one decimal.
std::string mib(uintmax_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

TEST(HubId, TellsIdsFromPaths) {
  EXPECT_TRUE(looks_like_repo_id("Qwen/Qwen3-0.6B"));
  EXPECT_TRUE(looks_like_repo_id("org/name_v1.5"));
  for (const char* not_id : {"models/default/", "/abs/path", "./x", "../x", "a/b/c", "org/..", "org/.hidden", "name",
                             "org/na me", ""})
    EXPECT_FALSE(looks_like_repo_id(not_id)) << not_id;
  EXPECT_TRUE(is_model_file("model-00001-of-00002.safetensors"));
  EXPECT_FALSE(is_model_file("original/model.safetensors"));
  EXPECT_FALSE(is_model_file("pytorch_model.bin"));
  EXPECT_FALSE(is_model_file("training.json"));
}

TEST(HubCache, FindsACachedSnapshotWithNoServerAtAll) {
  const std::string cache = temp_dir("cache");
  const fs::path repo = fs::path(cache) / "models--org--tiny";
  make_commit(repo / "snapshots" / kShaMain);
  make_commit(repo / "snapshots" / kShaV2, 1024);
  fs::create_directories(repo / "refs");
  write_file((repo / "refs" / "main").string(), kShaMain);  // as huggingface_hub writes it: no newline
  // Port 9 (discard) on loopback: nothing listens; a lookup that reached for it would fail.
  const std::string nowhere = "http://127.0.0.1:9";
  EXPECT_EQ(resolve_hub_model("org/tiny", options(nowhere, cache)), repo / "snapshots" / kShaMain);
  // A commit hash names its snapshot directly, with no ref.
  EXPECT_EQ(resolve_hub_model("org/tiny", options(nowhere, cache, kShaV2)), repo / "snapshots" / kShaV2);
  // A snapshot without its weights (a cut download) is not a model: offline, that is an error.
  fs::remove(repo / "snapshots" / kShaMain / "model.safetensors");
  HubOptions offline = options(nowhere, cache);
  offline.offline = true;
  const std::string err = error_of([&] { resolve_hub_model("org/tiny", offline); });
  EXPECT_TRUE(contains(err, "HF_HUB_OFFLINE")) << err;
  fs::remove_all(cache);
}

TEST(HubCache, RootFromTheEnvironmentAsHuggingFaceHub) {
  const char* names[] = {"HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"};
  std::vector<std::optional<std::string>> saved;
  for (const char* n : names)
    saved.push_back(std::getenv(n) ? std::optional<std::string>(std::getenv(n)) : std::nullopt);
  for (const char* n : names) unsetenv(n);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(hub_options_from_env("main", "", "").cache_root, fs::path("/home/someone/.cache/huggingface/hub"));
  setenv("HF_HOME", "/srv/hf", 1);
  EXPECT_EQ(hub_options_from_env("main", "", "").cache_root, fs::path("/srv/hf/hub"));
  setenv("HF_HUB_CACHE", "/srv/cache", 1);
  EXPECT_EQ(hub_options_from_env("main", "", "").cache_root, fs::path("/srv/cache"));
  EXPECT_EQ(hub_options_from_env("main", "/data/models", "").cache_root, fs::path("/data/models"));
  for (size_t i = 0; i < saved.size(); ++i)
    if (saved[i]) setenv(names[i], saved[i]->c_str(), 1);
    else unsetenv(names[i]);
}

TEST(HubDownload, FetchesTheModelFilesIntoTheCacheWithThrottledProgress) {
  TinyRepo tiny;
  // 14 MB in 256 KiB pieces, 30 ms apart: about 1.6 s, some 55 pieces.
  FakeHub hub("org/tiny", tiny.spec(), {{"chunk_delay_s", 0.03}});
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  ::testing::internal::CaptureStderr();
  const fs::path dir = resolve_hub_model("org/tiny", options(hub.endpoint(), cache));
  const std::string progress = ::testing::internal::GetCapturedStderr();
  const fs::path repo = fs::path(cache) / "models--org--tiny";
  EXPECT_EQ(dir, repo / "snapshots" / kShaMain);
  EXPECT_EQ(read_file((repo / "refs" / "main").string()), kShaMain);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                        "model.safetensors"})
    expect_same_file(dir / f, tiny.files + "/main/" + f);
  EXPECT_FALSE(fs::exists(dir / "training.json")) << "a file pagoda does not load was downloaded";
  // Throttled: a line a second or so and one at the end, not one per piece.
  const uintmax_t size = fs::file_size(kSource + "/model.safetensors");
  int lines = 0;
  std::istringstream in(progress);
  for (std::string line; std::getline(in, line);) lines += contains(line, "downloading model.safetensors:");
  EXPECT_GE(lines, 2) << progress;
  EXPECT_LE(lines, 5) << progress;
  EXPECT_TRUE(contains(progress, "model.safetensors: " + mib(size) + " / " + mib(size) + " (100%)")) << progress;
  EXPECT_TRUE(std::regex_search(progress, std::regex(R"(\(100%\), [0-9.]+ (KiB|MiB|GiB)/s)"))) << progress;
  // The next start finds it in the cache: not one more request.
  const size_t before = hub.requests().size();
  EXPECT_EQ(resolve_hub_model("org/tiny", options(hub.endpoint(), cache)), dir);
  EXPECT_EQ(hub.requests().size(), before);
  fs::remove_all(cache);
}

TEST(HubDownload, ContinuesACutFileWithARangeRequest) {
  TinyRepo tiny;
  FakeHub hub("org/tiny", tiny.spec(), {{"cut_once", "model.safetensors"}});
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  ::testing::internal::CaptureStderr();
  const fs::path dir = resolve_hub_model("org/tiny", options(hub.endpoint(), cache));
  const std::string log = ::testing::internal::GetCapturedStderr();
  const auto asked = hub.requests_for("model.safetensors");
  ASSERT_EQ(asked.size(), 2u) << log;
  EXPECT_TRUE(asked[0]["range"].is_null());
  const uintmax_t size = fs::file_size(kSource + "/model.safetensors");
  ASSERT_TRUE(asked[1]["range"].is_string()) << asked[1];
  std::smatch m;
  const std::string range = asked[1]["range"];
  ASSERT_TRUE(std::regex_match(range, m, std::regex(R"(bytes=(\d+)-)"))) << range;
  const uintmax_t from = std::stoull(m[1]);
  EXPECT_GT(from, 0u);
  EXPECT_LT(from, size);
  expect_same_file(dir / "model.safetensors", kSource + "/model.safetensors");
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.incomplete"));
  fs::remove_all(cache);
}

TEST(HubDownload, ContinuesAnIncompleteFileLeftByAnEarlierRun) {
  TinyRepo tiny;
  FakeHub hub("org/tiny", tiny.spec());
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  const fs::path snapshot = fs::path(cache) / "models--org--tiny" / "snapshots" / kShaMain;
  fs::create_directories(snapshot);
  const std::string whole = read_file(kSource + "/model.safetensors");
  write_file((snapshot / "model.safetensors.incomplete").string(), whole.substr(0, 1000000));
  // Longer than the file (it changed meanwhile): the Hub answers the Range with 416; start over.
  const uintmax_t tokenizer_size = fs::file_size(kSource + "/tokenizer.json");
  write_file((snapshot / "tokenizer.json.incomplete").string(), std::string(tokenizer_size + 10, 'x'));
  ::testing::internal::CaptureStderr();
  resolve_hub_model("org/tiny", options(hub.endpoint(), cache));
  ::testing::internal::GetCapturedStderr();
  const auto asked = hub.requests_for("model.safetensors");
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0]["range"], "bytes=1000000-");
  expect_same_file(snapshot / "model.safetensors", kSource + "/model.safetensors");
  const auto tokenizer_asked = hub.requests_for("tokenizer.json");
  ASSERT_EQ(tokenizer_asked.size(), 2u);
  EXPECT_EQ(tokenizer_asked[0]["range"], "bytes=" + std::to_string(tokenizer_size + 10) + "-");
  EXPECT_TRUE(tokenizer_asked[1]["range"].is_null());
  expect_same_file(snapshot / "tokenizer.json", kSource + "/tokenizer.json");
  fs::remove_all(cache);
}

TEST(HubDownload, GatedModelAsksForHfTokenAndWorksWithIt) {
  TinyRepo tiny;
  json spec = tiny.spec();
  spec["token"] = "hf_secret";
  FakeHub hub("org/gated", spec);
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  const std::string err = error_of([&] { resolve_hub_model("org/gated", options(hub.endpoint(), cache)); });
  EXPECT_TRUE(contains(err, "HTTP 401")) << err;
  EXPECT_TRUE(contains(err, "set HF_TOKEN (gated or private model")) << err;
  HubOptions with_token = options(hub.endpoint(), cache);
  with_token.token = "hf_secret";
  ::testing::internal::CaptureStderr();
  const fs::path dir = resolve_hub_model("org/gated", with_token);
  ::testing::internal::GetCapturedStderr();
  expect_same_file(dir / "model.safetensors", kSource + "/model.safetensors");
  for (const json& r : hub.requests_for("model.safetensors")) EXPECT_EQ(r["authorization"], "Bearer hf_secret");
  // A wrong token: the message says the token has no access.
  with_token.token = "hf_wrong";
  fs::remove_all(cache);
  const std::string err3 = error_of([&] { resolve_hub_model("org/gated", with_token); });
  EXPECT_TRUE(contains(err3, "has no access")) << err3;
  fs::remove_all(cache);
}

TEST(HubDownload, RevisionPinsTheCommitServed) {
  TinyRepo tiny;
  FakeHub hub("org/tiny", tiny.spec());
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  ::testing::internal::CaptureStderr();
  const fs::path v2 = resolve_hub_model("org/tiny", options(hub.endpoint(), cache, "v2"));
  const fs::path main = resolve_hub_model("org/tiny", options(hub.endpoint(), cache, "main"));
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(v2.filename(), kShaV2);
  EXPECT_EQ(main.filename(), kShaMain);
  EXPECT_EQ(json::parse(read_file((v2 / "config.json").string()))["max_position_embeddings"], 1024);
  EXPECT_EQ(json::parse(read_file((main / "config.json").string()))["max_position_embeddings"],
            json::parse(read_file(kSource + "/config.json"))["max_position_embeddings"]);
  EXPECT_EQ(read_file((fs::path(cache) / "models--org--tiny" / "refs" / "v2").string()), kShaV2);
  const std::string err = error_of([&] { resolve_hub_model("org/tiny", options(hub.endpoint(), cache, "nope")); });
  EXPECT_TRUE(contains(err, "HTTP 404") && contains(err, "--revision 'nope'")) << err;
  const std::string err2 = error_of([&] { resolve_hub_model("org/missing", options(hub.endpoint(), cache)); });
  EXPECT_TRUE(contains(err2, "HTTP 404") && contains(err2, "no such model")) << err2;
  fs::remove_all(cache);
}

TEST(HubDownload, OfflineNeverAsksTheHub) {
  TinyRepo tiny;
  FakeHub hub("org/tiny", tiny.spec());
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  HubOptions o = options(hub.endpoint(), cache);
  o.offline = true;
  const std::string err = error_of([&] { resolve_hub_model("org/tiny", o); });
  EXPECT_TRUE(contains(err, "HF_HUB_OFFLINE is set") && contains(err, "org/tiny")) << err;
  EXPECT_TRUE(hub.requests().empty());
  fs::remove_all(cache);
}

TEST(HubDownload, RefusesAFileListThatLeavesTheModelDirectory) {
  TinyRepo tiny;
  json spec = tiny.spec();
  spec["extra_files"] = {"../../evil.safetensors"};
  FakeHub hub("org/tiny", spec);
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  const std::string err = error_of([&] { resolve_hub_model("org/tiny", options(hub.endpoint(), cache)); });
  EXPECT_TRUE(contains(err, "outside the model's directory")) << err;
  EXPECT_TRUE(hub.requests_for("evil.safetensors").empty());
  EXPECT_FALSE(fs::exists(fs::path(cache) / "models--org--tiny" / "evil.safetensors"));
  fs::remove_all(cache);
}

TEST(HubDownload, NamesTheUrlItCannotReach) {
  const std::string cache = temp_dir("cache");
  const std::string err = error_of([&] { resolve_hub_model("org/tiny", options("http://127.0.0.1:9", cache)); });
  EXPECT_TRUE(contains(err, "http://127.0.0.1:9/api/models/org/tiny/revision/main")) << err;
  fs::remove_all(cache);
}

// Sets environment variables for the lifetime of the object (the pagoda processes inherit them).
struct ScopedEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  ScopedEnv(std::initializer_list<std::pair<const char*, std::string>> vars) {
    for (const auto& kv : vars) {
      const char* old = std::getenv(kv.first);
      saved.emplace_back(kv.first, old ? std::optional<std::string>(old) : std::nullopt);
      setenv(kv.first, kv.second.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& s : saved)
      if (s.second) setenv(s.first.c_str(), s.second->c_str(), 1);
      else unsetenv(s.first.c_str());
  }
};

TEST(HubServe, ServesAModelByHubIdThenCompletes) {
  TinyRepo tiny;
  FakeHub hub("org/tiny", tiny.spec());
  ASSERT_TRUE(hub.up());
  const std::string cache = temp_dir("cache");
  ScopedEnv env({{"HF_ENDPOINT", hub.endpoint()}, {"HF_HUB_CACHE", cache}, {"HF_TOKEN", ""}});
  server::test::ServerProcess s;
  ASSERT_TRUE(s.start("org/tiny", {"--max-model-len", "256"})) << s.log();
  EXPECT_TRUE(contains(s.log(), "downloading model.safetensors:")) << s.log();
  const auto models = s.get("/v1/models").json();
  ASSERT_TRUE(models.contains("data")) << models;
  EXPECT_EQ(models["data"][0]["id"], "org/tiny");
  const auto r = s.request("POST", "/v1/completions", R"({"model": "org/tiny", "prompt": "hello", "max_tokens": 3})");
  EXPECT_EQ(r.status, 200) << r.body;
  const auto body = r.json();
  ASSERT_TRUE(body.contains("choices")) << r.body;
  EXPECT_EQ(body["usage"]["completion_tokens"], 3) << r.body;
  EXPECT_EQ(s.stop(), 0);
  fs::remove_all(cache);
}

TEST(HubServe, GenerateOfflineWithoutTheModelSaysWhatToDo) {
  const std::string cache = temp_dir("cache");
  const auto r = pagoda::testing::run_command("HF_HUB_OFFLINE=1 HF_HUB_CACHE=" + cache + " " + PAGODA_BINARY +
                                              " generate org/absent --prompt hi 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "HF_HUB_OFFLINE is set and org/absent (revision main) is not in the cache at " + cache))
      << r.out;
  fs::remove_all(cache);
}

}  // namespace
}  // namespace pagoda::hub
