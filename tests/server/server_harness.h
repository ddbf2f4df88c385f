// Runs `pagoda serve` for the server tests: a model directory made at test time (the tiny Qwen3
// fixture + a small byte-level BPE tokenizer.json + Qwen3's real chat template), the server on a
// free loopback port, curl for raw HTTP.
#pragma once

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/run_command.h"

#include "tokenizer/byte_level.h"
#include "core/build_paths.h"

extern char** environ;

namespace pagoda::server::test {

namespace fs = std::filesystem;
using pagoda::testing::CommandResult;
using pagoda::testing::run_command;

inline std::string source_path(const std::string& rel) { return std::string(PAGODA_SOURCE_DIR) + "/" + rel; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A byte-level BPE tokenizer.json over `vocab` and `merges`, then `added` (content, special) at the
// ids from `first_added_id` on.
inline nlohmann::json byte_level_tokenizer_json(const nlohmann::json& vocab, const nlohmann::json& merges,
                                                int first_added_id,
                                                const std::vector<std::pair<std::string, bool>>& added) {
  nlohmann::json added_tokens = nlohmann::json::array();
  int id = first_added_id;
  for (const auto& [content, special] : added) {
    added_tokens.push_back({{"id", id++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                            {"rstrip", false}, {"normalized", false}, {"special", special}});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added_tokens},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", merges}}}};
}

// Ids 0..255: the bytes; 256..499: two-letter merges ("aa", "ab", ...); 500..511: added tokens.
// Every id of the fixture's 512-token vocabulary decodes, whatever the random weights sample.
inline nlohmann::json tiny_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[std::string(byte_level::byte_to_utf8(static_cast<uint8_t>(b)))] = id++;
  nlohmann::json merges = nlohmann::json::array();
  for (char a = 'a'; a <= 'z' && id < 500; ++a)
    for (char b = 'a'; b <= 'z' && id < 500; ++b) {
      vocab[std::string{a, b}] = id++;
      merges.push_back(nlohmann::json::array({std::string(1, a), std::string(1, b)}));
    }
  return byte_level_tokenizer_json(
      vocab, merges, id,
      {{"<|endoftext|>", true}, {"<|im_start|>", true},     {"<|im_end|>", true},        {"<think>", false},
       {"</think>", false},     {"<tool_call>", false},     {"</tool_call>", false},     {"<tool_response>", false},
       {"</tool_response>", false}, {"<|pad_0|>", true},    {"<|pad_1|>", true},         {"<|pad_2|>", true}});
}

// A fresh model directory: the fixture's weights and config, the tokenizer above, Qwen3's template.
inline std::string make_test_model_dir() {
  const std::string qwen3_config = source_path("tests/data/qwen3-tokenizer/tokenizer_config.json");
  if (!fs::exists(qwen3_config)) {
    ADD_FAILURE() << qwen3_config << " is missing: run tools/fetch_test_data.sh";
    return "";
  }
  std::string tmpl = (fs::temp_directory_path() / "pagoda-serve-XXXXXX").string();
  const char* dir = mkdtemp(tmpl.data());
  if (!dir) {
    ADD_FAILURE() << "mkdtemp failed";
    return "";
  }
  const fs::path fixture = source_path("tests/fixtures/models/qwen3-tiny-tied");
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    fs::create_symlink(fixture / f, fs::path(dir) / f);
  write_file(std::string(dir) + "/tokenizer.json", tiny_tokenizer_json().dump());
  const nlohmann::json real = nlohmann::json::parse(read_file(qwen3_config));
  const nlohmann::json config = {{"chat_template", real["chat_template"]},
                                 {"eos_token", "<|im_end|>"},
                                 {"bos_token", nullptr},
                                 {"pad_token", "<|endoftext|>"}};
  write_file(std::string(dir) + "/tokenizer_config.json", config.dump());
  return dir;
}

// make_test_model_dir() for one test, removed when the test ends.
struct TestModelDir {
  TestModelDir() : path(make_test_model_dir()) {}
  ~TestModelDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
  TestModelDir(const TestModelDir&) = delete;
  std::string path;
};

// The shipped default model (what `pagoda serve` runs with no MODEL_DIR) in a folder of its own,
// its files linked: ServerProcess writes its log into the model folder.
struct DefaultModelDir {
  DefaultModelDir() {
    namespace fs = std::filesystem;
    std::string tmpl = (fs::temp_directory_path() / "pagoda-default-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return;
    path = tmpl;
    for (const auto& f : fs::directory_iterator(source_path("models/default")))
      fs::create_symlink(f.path(), fs::path(path) / f.path().filename());
  }
  ~DefaultModelDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

struct HttpResult {
  int status = 0;
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(const ServerProcess&) = delete;

  // For a server started with --ssl-certfile: "https", and curl's options to trust it ("--cacert F").
  std::string scheme = "http";
  std::string curl_options;
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    if (!log_.empty()) {
      fs::remove(log_, ec);
      fs::remove(log_ + ".body", ec);
    }
  }

  // Starts `pagoda serve MODEL_DIR --host 127.0.0.1 --port 0 ARGS...` and waits for /health.
  bool start(const std::string& model_dir, const std::vector<std::string>& args) {
    // In the temporary directory: model_dir may be a tracked folder (models/default).
    log_ = (fs::temp_directory_path() / ("pagoda-serve-" + std::to_string(getpid()) + "-" +
                                         std::to_string(++instance_) + ".log")).string();
    std::vector<std::string> argv = {PAGODA_BINARY, "serve", model_dir, "--host", "127.0.0.1", "--port", "0",
                                     "--threads", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    const int rc = posix_spawn(&pid_, PAGODA_BINARY, &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const std::regex listening(R"(on https?://127\.0\.0\.1:(\d+))");
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::smatch m;
      const std::string text = log();
      if (port_ == 0 && std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      if (port_ != 0 && get("/health").status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // SIGTERM and wait; the exit status (-1 when it did not exit within `timeout`).
  int stop(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  // Waits up to `timeout` for the server to exit on its own; its exit status (-1 when it did not).
  int wait_exit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return -1;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  int port() const { return port_; }
  int pid() const { return pid_; }
  std::string url(const std::string& path) const { return scheme + "://127.0.0.1:" + std::to_string(port_) + path; }
  std::string log() const { return read_file(log_); }

  // One request through curl. `headers`: extra -H values.
  HttpResult request(const std::string& method, const std::string& path, const std::string& body = "",
                     const std::vector<std::string>& headers = {}) const {
    // One file per call: requests from several threads at once must not share it.
    static std::atomic<uint64_t> calls{0};
    const std::string body_file = log_ + ".body." + std::to_string(calls++);
    std::string cmd = "curl -s -m 60 -o - -w '\\n%{http_code}' " + curl_options + " -X " + method;
    for (const auto& h : headers) cmd += " -H '" + h + "'";
    if (!body.empty()) {
      write_file(body_file, body);
      cmd += " -H 'Content-Type: application/json' --data-binary @" + body_file;
    }
    cmd += " '" + url(path) + "'";
    const CommandResult r = run_command(cmd);
    if (!body.empty()) std::remove(body_file.c_str());
    HttpResult h;
    const size_t nl = r.out.rfind('\n');
    if (nl == std::string::npos) return h;
    h.body = r.out.substr(0, nl);
    h.status = std::atoi(r.out.c_str() + nl + 1);
    return h;
  }
  HttpResult get(const std::string& path, const std::vector<std::string>& headers = {}) const {
    return request("GET", path, "", headers);
  }

  // A metric's value from /metrics (the first series whose line starts with `series`), or -1.
  double metric(const std::string& series, const std::vector<std::string>& headers = {}) const {
    const std::string text = get("/metrics", headers).body;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(series, 0) != 0) continue;
      const std::string rest = line.substr(series.size());
      if (rest.empty() || (rest[0] != ' ' && rest[0] != '{')) continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
  static inline int instance_ = 0;
};

// What a server does after a request meets a fatal engine fault (docs/faults.md): `trigger` sends
// that request; meanwhile /health is polled every 10 ms. The answer, the /health statuses seen, the
// exit code (-1: still running after `timeout`) and the seconds from the answer to the exit.
struct FatalExit {
  HttpResult answer;
  std::set<int> health_seen;
  int code = -1;
  double seconds = 0;
};

inline FatalExit watch_fatal_exit(ServerProcess& s, const std::function<HttpResult()>& trigger,
                                  std::chrono::milliseconds timeout) {
  FatalExit out;
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    while (!stop) {
      const int status = s.get("/health").status;
      if (status != 0) out.health_seen.insert(status);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  out.answer = trigger();
  const auto answered = std::chrono::steady_clock::now();
  out.code = s.wait_exit(timeout);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - answered).count();
  stop = true;
  poller.join();
  return out;
}

}  // namespace pagoda::server::test
