#include "bench/serve_bench.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/serve_http.h"
#include "bench/serve_plot.h"
#include "bench/serve_vocab.h"
#include "core/error.h"

namespace pagoda::bench {
namespace {

using Clock = std::chrono::steady_clock;

bool is_chat(const std::string& endpoint) { return endpoint.find("chat/completions") != std::string::npos; }

// "[#########.........]  120/200  12.3 s, 9.8 req/s" redrawn on stderr a few times a second.
class ProgressBar {
 public:
  ProgressBar(int64_t total, bool on) : total_(total), on_(on), t0_(Clock::now()) {
    if (on_) thread_ = std::thread([this] { loop(); });
  }
  ~ProgressBar() { finish(); }
  void tick(bool failed) {
    ++done_;
    if (failed) ++failed_;
  }
  void finish() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    draw();
    std::fputc('\n', stderr);
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(isatty(2) ? 200 : 2000), [this] { return stop_; })) draw();
  }
  void draw() const {
    const int64_t d = done_.load();
    const double t = std::chrono::duration<double>(Clock::now() - t0_).count();
    const int width = 30, fill = total_ > 0 ? static_cast<int>(width * d / total_) : width;
    std::string bar(static_cast<size_t>(fill), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "%s[%s] %lld/%lld  %.1f s, %.2f req/s%s%s", isatty(2) ? "\r" : "", bar.c_str(),
                 static_cast<long long>(d), static_cast<long long>(total_), t, t > 0 ? d / t : 0.0,
                 failed_ ? (", " + std::to_string(failed_.load()) + " failed").c_str() : "",
                 isatty(2) ? "" : "\n");
    std::fflush(stderr);
  }

  const int64_t total_;
  const bool on_;
  const Clock::time_point t0_;
  std::atomic<int64_t> done_{0}, failed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// A counting limit on requests in flight (std::counting_semaphore needs a compile-time maximum).
class Slots {
 public:
  explicit Slots(int64_t n) : free_(n) {}
  void acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return free_ > 0; });
    --free_;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t free_;
};

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

// The dataset; random prompts are drawn from the server's own vocabulary (serve_vocab.h).
std::vector<BenchRequest> make_requests(const ServeBenchOptions& opt, const ServerUrl& url, const std::string& model,
                                        const std::optional<ServedModel>& served) {
  check(opt.tokenizer.empty() || opt.dataset.vocab_size == 0,
        "bench serve: give --tokenizer DIR or --vocab-size N, not both");
  std::unique_ptr<PromptVocabulary> vocab;
  if (opt.dataset.name != "jsonl" && opt.dataset.vocab_size == 0) {
    if (!opt.tokenizer.empty()) {
      vocab = local_vocabulary(opt.tokenizer);
    } else {
      check(served && served->vocab_size,
            "bench serve: random prompts need the model's vocabulary and GET /v1/models gives no vocab_size: give "
            "the model's tokenizer with --tokenizer DIR (a directory with tokenizer.json), or --vocab-size N to "
            "send token ids from [0, N)");
      vocab = server_vocabulary(url, opt.api_key, model, *served->vocab_size);
    }
    std::fprintf(stderr, "[pagoda] random prompts from %s\n", vocab->describe().c_str());
  }
  DatasetStats stats;
  std::vector<BenchRequest> requests = make_dataset(opt.dataset, vocab.get(), &stats);
  if (stats.token_mismatch != 0)
    std::fprintf(stderr, "[pagoda] the prompts have %lld %s tokens in all than asked: decoded and re-encoded "
                         "random ids do not always keep their count\n",
                 static_cast<long long>(std::abs(stats.token_mismatch)), stats.token_mismatch > 0 ? "more" : "fewer");
  if (served && served->max_model_len) {
    for (size_t i = 0; i < requests.size(); ++i) {
      const BenchRequest& r = requests[i];
      check(r.prompt_len + static_cast<int64_t>(r.output_len) <= *served->max_model_len,
            "bench serve: request " + std::to_string(i) + " needs " + std::to_string(r.prompt_len) + " prompt + " +
                std::to_string(r.output_len) + " output tokens, more than the server's max_model_len " +
                std::to_string(*served->max_model_len) + "; lower --random-input-len / --random-output-len");
    }
  }
  return requests;
}

}  // namespace

std::string request_body(const ServeBenchOptions& opt, const std::string& model, const BenchRequest& r) {
  nlohmann::ordered_json j;
  j["model"] = model;
  if (is_chat(opt.endpoint)) {
    check(r.prompt_ids.empty(), "bench serve: the chat endpoint needs text prompts (--dataset-name jsonl with "
                                "text); use /v1/completions for token-id prompts");
    j["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", r.prompt_text}}});
  } else if (!r.prompt_ids.empty()) {
    j["prompt"] = r.prompt_ids;
  } else {
    j["prompt"] = r.prompt_text;
  }
  j["max_tokens"] = r.output_len;
  j["temperature"] = opt.temperature;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (opt.ignore_eos) j["ignore_eos"] = true;
  if (!opt.extra_body.empty()) {
    const auto extra = nlohmann::ordered_json::parse(opt.extra_body, nullptr, false);
    check(extra.is_object(), "bench serve: --extra-body must be a JSON object");
    j.update(extra);
  }
  return j.dump();
}

// The sum of the num_requests_running gauges (any prefix) of a /metrics text; -1 when absent.
double running_requests(const std::string& exposition) {
  std::istringstream in(exposition);
  double sum = -1;
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(":num_requests_running");
    if (line.empty() || line[0] == '#' || at == std::string::npos) continue;
    const size_t end = at + 21;
    if (end < line.size() && line[end] != '{' && line[end] != ' ') continue;
    try {
      sum = std::max(sum, 0.0) + std::stod(line.substr(line.rfind(' ') + 1));
    } catch (const std::exception&) {
    }
  }
  return sum;
}

ServeBenchRun run_serve_bench(const ServeBenchOptions& opt) {
  check(opt.request_rate > 0, "bench serve: --request-rate must be > 0 (inf: all at once)");
  check(opt.max_concurrency >= 0, "bench serve: --max-concurrency must be >= 0");
  const std::string base = opt.base_url.empty() ? "http://" + opt.host + ":" + std::to_string(opt.port) : opt.base_url;
  const ServerUrl url = parse_base_url(base);
  ServeBenchRun run;
  const std::optional<ServedModel> served = served_model(url, opt.api_key, opt.model);
  run.model = opt.model;
  if (run.model.empty()) {
    check(served.has_value(), "bench serve: no --model given and GET " + base + "/v1/models named none "
                              "(is the server up?)");
    run.model = served->id;
  }
  const std::vector<BenchRequest> requests = make_requests(opt, url, run.model, served);
  std::vector<StreamCall> calls;
  BenchRng pick(opt.dataset.seed ^ 0x10a4ULL);  // its own stream: the dataset's draws stay as they were
  for (const auto& r : requests) {
    const std::string& model =
        opt.lora_modules.empty()
            ? run.model
            : opt.lora_modules[static_cast<size_t>(pick.uniform_int(0, static_cast<int64_t>(opt.lora_modules.size()) - 1))];
    calls.push_back({opt.endpoint, request_body(opt, model, r), is_chat(opt.endpoint), opt.api_key});
  }

  for (int32_t w = 0; w < opt.num_warmups; ++w) {
    RequestResult r;
    stream_request(url, calls[static_cast<size_t>(w) % calls.size()], Clock::now(), r);
    check(r.success, "bench serve: the warm-up request failed: " + r.error);
  }

  // Arrival times: all at once, or a Poisson process (exponential gaps) at --request-rate.
  BenchRng arrivals(opt.dataset.seed ^ 0x5eed5eedULL);
  std::vector<double> at(requests.size(), 0.0);
  if (!std::isinf(opt.request_rate))
    for (size_t i = 1; i < at.size(); ++i) at[i] = at[i - 1] + arrivals.exponential(opt.request_rate);

  if (opt.profile) {
    const auto [status, text] = http_post_empty(url, "/start_profile", opt.api_key);
    check(status == 200, "bench serve --profile: POST " + base + "/start_profile answered " + std::to_string(status) +
                             " (" + text + "); a pagoda server profiles with serve --profile-steps N");
  }
  // The server's speculative-decoding counters around the run (when it exposes them).
  const std::optional<std::string> metrics_before = http_get(url, "/metrics", opt.api_key);
  const std::optional<SpecDecodeCounters> spec_before =
      metrics_before ? parse_spec_decode_counters(*metrics_before) : std::nullopt;
  run.results.resize(requests.size());
  // Multi-turn: a turn is sent once the one before it is done.
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::vector<uint8_t> done(requests.size(), 0);
  Slots slots(opt.max_concurrency > 0 ? opt.max_concurrency : static_cast<int64_t>(requests.size()));
  ProgressBar bar(static_cast<int64_t>(requests.size()), opt.progress);
  std::vector<std::thread> threads;
  threads.reserve(requests.size());
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at[i])));
    if (const int32_t after = requests[i].after; after >= 0) {
      std::unique_lock lock(done_mu);
      done_cv.wait(lock, [&] { return done[static_cast<size_t>(after)] != 0; });
    }
    slots.acquire();
    threads.emplace_back([&, i] {
      RequestResult& r = run.results[i];
      r.prompt_len = requests[i].prompt_len;
      stream_request(url, calls[i], t0, r);
      slots.release();
      {
        std::lock_guard lock(done_mu);
        done[i] = 1;
      }
      done_cv.notify_all();
      bar.tick(!r.success);
    });
  }
  for (auto& t : threads) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - t0).count();
  bar.finish();
  run.summary = summarize(run.results, duration, opt.percentiles);
  if (opt.profile) {
    const auto [status, text] = http_post_empty(url, "/stop_profile", opt.api_key);
    run.profile = status == 200 ? text : "POST /stop_profile answered " + std::to_string(status) + ": " + text + "\n";
  }
  run.summary.max_concurrency = opt.max_concurrency;
  run.summary.request_rate = opt.request_rate;
  if (spec_before) {
    // The server publishes a step's counters after its last tokens went out: wait (up to a
    // second) until it reports no running request, so the last step is counted.
    std::optional<std::string> metrics_after;
    for (int tries = 0; tries < 20; ++tries) {
      metrics_after = http_get(url, "/metrics", opt.api_key);
      if (!metrics_after || running_requests(*metrics_after) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (auto spec_after = metrics_after ? parse_spec_decode_counters(*metrics_after) : std::nullopt)
      set_spec_decode(run.summary, *spec_before, *spec_after);
  }
  return run;
}

void serve_bench_main(const ServeBenchOptions& opt) {
  const ServeBenchRun run = run_serve_bench(opt);
  std::printf("%s", summary_table(run.summary).c_str());
  if (!run.profile.empty()) std::printf("\n%s", run.profile.c_str());
  std::fflush(stdout);
  if (!opt.result_file.empty()) {
    nlohmann::ordered_json j;
    j["date"] = now_text();
    j["backend"] = "openai";
    j["label"] = opt.label;
    j["model_id"] = run.model;
    j["base_url"] = opt.base_url.empty() ? "http://" + opt.host + ":" + std::to_string(opt.port) : opt.base_url;
    j["endpoint"] = opt.endpoint;
    j["dataset_name"] = opt.dataset.name;
    j["num_prompts"] = static_cast<int64_t>(run.results.size());
    j["seed"] = opt.dataset.seed;
    j["ignore_eos"] = opt.ignore_eos;
    j.update(summary_json(run.summary, run.results));
    std::ofstream out(opt.result_file);
    check(static_cast<bool>(out), "bench serve: cannot write --result-file '" + opt.result_file + "'");
    out << j.dump(2) << "\n";
  }
  if (!opt.plot_file.empty()) {
    std::ofstream out(opt.plot_file);
    check(static_cast<bool>(out), "bench serve: cannot write --plot '" + opt.plot_file + "'");
    std::string title = "pagoda bench serve: " + run.model;
    if (opt.max_concurrency > 0) title += ", concurrency " + std::to_string(opt.max_concurrency);
    if (!opt.label.empty()) title += " (" + opt.label + ")";
    out << latency_svg(run.results, title);
  }
  if (run.summary.failed > 0) {
    const RequestResult* first = nullptr;
    for (const RequestResult& r : run.results)
      if (!r.success && (first == nullptr || r.start < first->start)) first = &r;
    throw Error("bench serve: " + std::to_string(run.summary.failed) + " of " + std::to_string(run.results.size()) +
                " requests failed; the first error: " + (first ? first->error : "?"));
  }
}

}  // namespace pagoda::bench
