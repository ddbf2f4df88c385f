// `pagoda serve [MODEL_DIR]`: the OpenAI-compatible HTTP server, with vllm serve's flags
// (docs/design.md §7). The engine runs on its own thread; SIGINT / SIGTERM stop taking requests, let
// the ones in flight finish (up to --shutdown-timeout), abort the rest and exit 0. A fatal engine
// fault (FatalDeviceError: a CUDA sticky error, a device lost) takes the same way out with
// /health already 503 and exits kExitEngineFault (4) so that a supervisor restarts the server
// (docs/faults.md).
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "server/chat_output_parser.h"
#include "cli/engine_flags.h"
#include "cli/model_source.h"
#include "cli/vllm_flags.h"
#include "core/device_error.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "core/log.h"
#include "engine/generation_defaults.h"
#include "io/model_config.h"
#include "model/registry.h"
#include "io/text_file.h"
#include "backend/devices.h"
#include "server/async_engine.h"
#include "server/data_parallel_engine.h"
#include "server/kv_event_publisher.h"
#include "server/loading_responder.h"
#include "server/chat_prompt.h"
#include "server/cors.h"
#include "server/engine_metrics.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/request_log.h"
#include "server/structured_output.h"
#include "server/tls_context.h"

namespace pagoda::cli {
namespace {

struct ServeArgs {
  std::string model_dir;
  ModelSourceFlags source;
  EngineFlags engine;
  server::ServerOptions server;
  // Choices (requests x n) waiting to start before new requests get 503 + Retry-After. Generous:
  // with thousands queued a new request already waits minutes, and a 503 lets a gateway or client
  // go elsewhere instead of piling on.
  int32_t max_waiting_requests = 4096;
  // Tokens of work (prompt + max_tokens per choice; an embedding input's prompt) waiting to start
  // before new requests get 503 + Retry-After; a named client (`user`) may fill half.
  int64_t max_waiting_tokens = int64_t{1} << 22;
  double shutdown_timeout = 10.0;
  std::string reasoning_parser = "auto";
  std::string tool_call_parser = "auto";
  bool enable_auto_tool_choice = false;
  std::string chat_template;              // file or template text; "" = the model's own
  std::string generation_config = "auto";  // auto | vllm | DIR
  std::optional<uint64_t> seed;            // vllm serve's --seed: the engine seed
  server::TlsOptions tls;                  // --ssl-*: HTTPS (as vllm serve / uvicorn)
  bool api_key_given = false;             // --api-key was on the command line (even as '')
  std::string metrics_prefix = "vllm";     // vLLM's names by default; "pagoda" opts into pagoda:
  std::string kv_events_config;            // vLLM's KVEventsConfig as JSON; "" = no events
  server::RequestLogOptions logging;
  int32_t data_parallel_size = 1;          // --data-parallel-size / -dp: engine replicas
  int32_t data_parallel_size_local = 0;    // vLLM's; 0 = not given (every replica is local here)
  // One line each for the vLLM flags given that change nothing here (vllm_flags.h).
  std::shared_ptr<std::vector<std::string>> vllm_warnings = std::make_shared<std::vector<std::string>>();
  std::string access_log_skip;  // --disable-access-log-for-endpoints: "/health,/metrics"
  std::string uvicorn_log_level = "info";
};

// vllm serve's --generation-config: "auto" = the model's generation_config.json, "vllm" = none
// (built-in defaults), a directory = its generation_config.json.
SamplingParams sampling_defaults_for(const std::string& choice, const std::string& model_dir, const Engine& engine) {
  if (choice == "auto") return with_generation_defaults({}, engine.model_config());
  if (choice == "vllm") return SamplingParams{};
  const auto path = std::filesystem::path(choice) / "generation_config.json";
  check(std::filesystem::exists(path),
        "--generation-config must be auto, vllm or a directory with generation_config.json; " + path.string() +
            " does not exist");
  constexpr size_t kMax = 1 << 20;
  const ModelConfig cfg = parse_model_config(read_text_file(model_dir + "/config.json", kMax),
                                             read_text_file(path.string(), kMax));
  return with_generation_defaults({}, cfg);
}

void add_http_limit_flags(CLI::App* cmd, server::ServerOptions& o) {
  server::HttpLimits& h = o.http;
  server::RequestLimits& r = o.request;
  cmd->add_option("--http-io-threads", o.io_threads, "I/O threads; each carries thousands of connections")
      ->capture_default_str();
  cmd->add_option("--http-workers", o.worker_threads,
                  "Threads that parse, template and tokenize requests off the I/O threads")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", h.max_body_bytes,
                  "Largest request body, after gzip/deflate decoding (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-header-bytes,--h11-max-incomplete-event-size", h.max_header_bytes,
                  "Largest request line + headers (431 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-header-count,--h11-max-header-count", h.max_header_count,
                  "Most headers in one request (431 beyond; vLLM's default)")
      ->capture_default_str();
  cmd->add_option("--max-url-bytes", h.max_url_bytes, "Longest URL (414 beyond)")->capture_default_str();
  cmd->add_option("--request-timeout", h.request_timeout_s,
                  "Seconds to receive a whole request, headers and body (408 beyond)")
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout,--timeout-keep-alive", h.keep_alive_timeout_s,
                  "Seconds an idle connection is kept open between requests")
      ->capture_default_str();
  cmd->add_option("--write-timeout", h.write_timeout_s,
                  "Seconds one write may wait on a client that does not read (then it is dropped and its "
                  "request aborted)")
      ->capture_default_str();
  cmd->add_option("--max-logprobs", r.max_logprobs,
                  "Most top logprobs per token a request may ask for (at most 20, vLLM's default)")
      ->capture_default_str();
  cmd->add_option("--max-stop-strings", r.max_stop_strings, "Most stop strings in one request")
      ->capture_default_str();
  cmd->add_option("--max-stop-bytes", r.max_stop_bytes, "Most bytes of stop strings in one request")
      ->capture_default_str();
  cmd->add_option("--max-stop-token-ids", r.max_stop_token_ids, "Most distinct stop_token_ids in one request")
      ->capture_default_str();
  cmd->add_option("--max-logit-bias", r.max_logit_bias,
                  "Most logit_bias entries in one request (OpenAI allows 300)")
      ->capture_default_str();
  cmd->add_option("--max-grammar-cache-bytes", r.max_grammar_cache_bytes,
                  "Most bytes of compiled grammars kept for reuse (least recently used evicted first)")
      ->capture_default_str();
  cmd->add_option("--max-tokenize-bytes", r.max_tokenize_bytes,
                  "Most bytes of text one request may have tokenized (prompt, rendered chat, /tokenize)")
      ->capture_default_str();
  cmd->add_option("--max-request-output-budget", r.max_output_budget,
                  "Most tokens and logprob entries one request may make the server hold: choices x "
                  "max_tokens x (1 + logprobs)")
      ->capture_default_str();
}

// A timeout flag: a number of seconds, positive (or zero where `zero_ok`). Past kLongestTimeout
// (infinity included) it is clamped there: converted to clock ticks, 1e10 s overflows 64 bits and
// would expire at once.
constexpr double kLongestTimeout = 30 * 24 * 3600.0;

double checked_seconds(double value, const char* flag, bool zero_ok) {
  check(!std::isnan(value) && (zero_ok ? value >= 0 : value > 0),
        std::string(flag) + " must be a number of seconds, " + (zero_ok ? "0 or more" : "more than 0"));
  if (value <= kLongestTimeout) return value;
  LOG_WARN(flag << " " << value << " is longer than 30 days; using 30 days");
  return kLongestTimeout;
}

bool parser_enabled(const std::string& value, const char* flag) {
  if (value == "none") return false;
  check(!value.empty(), std::string(flag) + " cannot be empty (auto, none or a parser name)");
  return true;
}

// Data parallelism: replica r takes devices r x tp .. r x tp + tp - 1 (after vulkan:M's M). Fewer
// devices than dp x tp are refused here, before anything loads.
void check_data_parallel_devices(const EngineConfig& c, int32_t dp) {
  check(dp >= 1 && dp <= 64, "--data-parallel-size must be in [1, 64], got " + std::to_string(dp));
  if (dp == 1) return;
  const int32_t tp = std::max(1, c.tensor_parallel_size);
  const std::string layout = "--data-parallel-size " + std::to_string(dp) + " x --tensor-parallel-size " +
                             std::to_string(tp) + " on --device " + c.device;
  if (c.device == "cuda") {
    const int gpus = cuda_device_count();
    check(gpus >= dp * tp, layout + " needs " + std::to_string(dp * tp) + " CUDA devices (replica r on cuda:r*" +
                               std::to_string(tp) + " onwards), " + std::to_string(gpus) +
                               " are visible (CUDA_VISIBLE_DEVICES); lower --data-parallel-size or "
                               "--tensor-parallel-size, or serve on --device cpu");
  } else if (c.device.rfind("vulkan", 0) == 0) {
    const int first = c.device.size() > 7 ? std::atoi(c.device.c_str() + 7) : 0;
    const int devices = vulkan_device_count();
    check(devices >= first + dp * tp, layout + " needs Vulkan devices " + std::to_string(first) + ".." +
                                          std::to_string(first + dp * tp - 1) + ", " + std::to_string(devices) +
                                          " are listed (pagoda info); lower --data-parallel-size");
  }
}

void run_serve(ServeArgs& a) {
  for (const std::string& w : *a.vllm_warnings) LOG_WARN(w);
  // As vllm serve: the key comes from VLLM_API_KEY when --api-key is not given.
  if (!a.api_key_given) {
    if (const char* env = std::getenv("VLLM_API_KEY"); env != nullptr && *env != '\0') a.server.api_keys = {env};
  }
  // uvicorn writes its access log at info: above that level vLLM shows none.
  if (a.uvicorn_log_level == "warning" || a.uvicorn_log_level == "error" || a.uvicorn_log_level == "critical")
    a.server.access_log = false;
  for (size_t start = 0; start < a.access_log_skip.size();) {
    const size_t comma = std::min(a.access_log_skip.find(',', start), a.access_log_skip.size());
    std::string path = a.access_log_skip.substr(start, comma - start);
    while (!path.empty() && path.back() == ' ') path.pop_back();
    while (!path.empty() && path.front() == ' ') path.erase(0, 1);
    if (!path.empty()) a.server.access_log_skip_paths.push_back(path);
    start = comma + 1;
  }
  // SIGINT / SIGTERM are taken by one thread (sigwait) instead of interrupting whichever thread
  // they hit; every thread created from here on inherits the mask. SIGPIPE (a client that went
  // away) must not kill the server: the write fails and the request is aborted.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Request bodies and responses of many MiB come and go; glibc's dynamic mmap threshold would move
  // them into arena heaps whose tops it never gives back (malloc_trim skips them in thread
  // arenas). A fixed threshold keeps them mmapped: freed means returned to the OS.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);

  FaultInjector::global();  // a malformed PAGODA_INJECT_FAULT stops serve here, not in an engine step
  check(a.server.port >= 0 && a.server.port <= 65535, "--port must be in [0, 65535]");
  check(a.max_waiting_requests >= 0, "--max-waiting-requests cannot be negative");
  check(a.max_waiting_tokens >= 0, "--max-waiting-tokens cannot be negative");
  check(std::none_of(a.server.api_keys.begin(), a.server.api_keys.end(), [](const std::string& k) { return k.empty(); }),
        "--api-key is empty, which would leave the server without authentication; give a key, or leave "
        "the flag out to serve without one");
  a.shutdown_timeout = checked_seconds(a.shutdown_timeout, "--shutdown-timeout", true);
  // Checked before the model loads (minutes for a large one): a typo in the JSON fails at once.
  if (!a.kv_events_config.empty()) (void)server::parse_kv_events_config(a.kv_events_config);
  a.server.http.request_timeout_s = checked_seconds(a.server.http.request_timeout_s, "--request-timeout", false);
  a.server.http.keep_alive_timeout_s =
      checked_seconds(a.server.http.keep_alive_timeout_s, "--keep-alive-timeout", false);
  a.server.http.write_timeout_s = checked_seconds(a.server.http.write_timeout_s, "--write-timeout", false);
  check(a.server.io_threads >= 1 && a.server.io_threads <= 64, "--http-io-threads must be in [1, 64]");
  check(a.server.worker_threads >= 1 && a.server.worker_threads <= 256, "--http-workers must be in [1, 256]");
  const server::HttpLimits& hl = a.server.http;
  check(hl.max_body_bytes > 0 && hl.max_header_bytes > 0 && hl.max_header_count > 0 && hl.max_url_bytes > 0,
        "the HTTP size limits must be positive");
  check(hl.request_timeout_s > 0 && hl.keep_alive_timeout_s > 0 && hl.write_timeout_s > 0,
        "the HTTP timeouts must be positive");
  const server::RequestLimits& rl = a.server.request;
  check(rl.max_logprobs >= 0 && rl.max_stop_strings >= 0 && rl.max_stop_bytes >= 0 && rl.max_output_budget > 0 &&
            rl.max_stop_token_ids >= 0 && rl.max_logit_bias >= 0 && rl.max_tokenize_bytes > 0 &&
            rl.max_grammar_cache_bytes >= 0,
        "the per-request limits cannot be negative");
  check(rl.max_logprobs <= server::kMaxLogprobs,
        "--max-logprobs can lower the limit of " + std::to_string(server::kMaxLogprobs) + ", not raise it");
  a.server.reasoning_parser = parser_enabled(a.reasoning_parser, "--reasoning-parser");
  // vLLM's names for <think>...</think> reasoning, the one syntax pagoda parses.
  check(a.reasoning_parser == "auto" || a.reasoning_parser == "none" || a.reasoning_parser == "qwen3" ||
            a.reasoning_parser == "deepseek_r1",
        "--reasoning-parser '" + a.reasoning_parser + "' is not one pagoda has: auto, none, qwen3, deepseek_r1");
  a.server.tool_call_parser = parser_enabled(a.tool_call_parser, "--tool-call-parser");
  check(a.tool_call_parser == "auto" || a.tool_call_parser == "none" ||
            server::tool_call_format_named(a.tool_call_parser).has_value(),
        "--tool-call-parser '" + a.tool_call_parser +
            "' is not one pagoda has: auto, none, hermes, llama3_json, mistral, pythonic (and their aliases "
            "qwen3, llama4_json, llama4_pythonic)");
  a.server.tool_call_format = a.tool_call_parser;
  check(a.data_parallel_size >= 1 && a.data_parallel_size <= 64,
        "--data-parallel-size must be in [1, 64], got " + std::to_string(a.data_parallel_size));
  check(a.data_parallel_size_local == 0 || a.data_parallel_size_local == a.data_parallel_size,
        "--data-parallel-size-local " + std::to_string(a.data_parallel_size_local) + " with --data-parallel-size " +
            std::to_string(a.data_parallel_size) + ": pagoda runs every replica in this process, so the two are "
            "equal; leave --data-parallel-size-local out");
  const std::string dir = resolve_model(a.model_dir, a.source);
  // The port answers 503 while the model loads (plain HTTP; with TLS it opens once the model is up):
  // a readiness probe sees "not ready", not a refused connection. (A Hub download before it: no.)
  const bool tls_wanted = a.tls.enabled() || !a.tls.keyfile.empty() || !a.tls.ca_certs.empty() || a.tls.cert_reqs != 0;
  std::optional<server::LoadingResponder> loading;
  if (!tls_wanted) loading.emplace(a.server.host, a.server.port);
  a.server.model_dir = dir;
  // As vllm serve: the model is named as it was given; the shipped default by its own folder name.
  if (a.server.served_model_names.empty())
    a.server.served_model_names = {a.model_dir.empty()
                                       ? std::filesystem::canonical(dir).filename().string()
                                       : a.model_dir};

  // Before the model loads: a bad certificate or key stops serve at once.
  std::shared_ptr<boost::asio::ssl::context> tls;
  if (tls_wanted) tls = server::make_tls_context(a.tls);
  EngineConfig engine_config = engine_config_from(a.engine);
  if (a.seed) engine_config.seed = *a.seed;
  for (const LoraModule& m : engine_config.lora.modules) {
    const auto& names = a.server.served_model_names;
    check(std::find(names.begin(), names.end(), m.name) == names.end(),
          "--lora-modules: adapter '" + m.name + "' has the served model's name; give it another");
  }
  // vLLM's switch for POST /v1/load_lora_adapter and /v1/unload_lora_adapter.
  if (const char* v = std::getenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING")) {
    const std::string s = v;
    engine_config.lora.runtime_updates = s == "1" || s == "true" || s == "True" || s == "TRUE";
    if (engine_config.lora.runtime_updates && !engine_config.lora.enabled)
      LOG_WARN("VLLM_ALLOW_RUNTIME_LORA_UPDATING is set without --enable-lora: no adapter can be loaded");
  }
  const int32_t dp = a.data_parallel_size;
  check_data_parallel_devices(engine_config, dp);
  engine_config.data_parallel_size = dp;
  // One engine per data-parallel rank, loaded one after the other (each logs its memory plan); the
  // later ones share the first one's LoRA catalog.
  std::vector<std::unique_ptr<Engine>> engines;
  for (int32_t r = 0; r < dp; ++r) {
    engine_config.data_parallel_rank = r;
    if (dp > 1) LOG_INFO("data-parallel rank " << r << " of " << dp << ": loading");
    engines.push_back(std::make_unique<Engine>(dir, engine_config, r == 0 ? nullptr : engines.front()->core().loras()));
  }
  const std::unique_ptr<Engine>& engine = engines.front();
  server::MetricsRegistry registry;
  // One set of series per replica, told apart by the `engine` label (vLLM's engine index).
  std::vector<std::unique_ptr<server::EngineMetrics>> metrics;
  for (int32_t r = 0; r < dp; ++r) {
    const Engine& e = *engines[static_cast<size_t>(r)];
    server::EngineMetricsInfo info;
    info.model_name = a.server.served_model_names.front();
    info.engine_index = r;
    info.num_kv_blocks = e.memory_plan().num_blocks;
    info.enable_prefix_caching = e.config().enable_prefix_caching;
    info.block_size = e.config().block_size;
    info.kv_cache_dtype = torch_dtype_name(e.config().kv_cache_dtype);  // as resolved (engine_config.h)
    info.metrics_prefix = a.metrics_prefix;
    info.max_model_len = e.config().max_model_len;
    info.max_num_seqs = e.config().max_num_seqs;
    info.loras = e.core().loras();
    info.max_loras = e.config().lora.max_loras;
    if (e.config().speculative.enabled()) info.num_speculative_tokens = e.config().speculative.num_speculative_tokens;
    metrics.push_back(std::make_unique<server::EngineMetrics>(registry, info));
  }
  if (!engine->tokenizer()) LOG_WARN(dir << " has no tokenizer.json: only token-id prompts can be served");
  // As vLLM: the chat template comes with the tokenizer.
  const std::string& tok_dir = engine_config.tokenizer_dir.empty() ? dir : engine_config.tokenizer_dir;
  std::unique_ptr<server::ChatPrompt> chat = server::ChatPrompt::load(tok_dir, a.chat_template);
  if (!chat) LOG_WARN(dir << " has no chat template: /v1/chat/completions will answer 400");
  if (chat && engine->tokenizer()) chat->protect_special_tokens(*engine->tokenizer());

  const SamplingParams defaults = sampling_defaults_for(a.generation_config, dir, *engine);
  // Set by the engine thread before it raises SIGTERM: the signal thread then shuts down for a fault.
  std::atomic<bool> fatal{false};
  // The waiting limits are the server's: one set over every replica.
  const auto waiting_limits = std::make_shared<server::WaitingLimits>(a.max_waiting_requests, a.max_waiting_tokens);
  std::optional<server::KvEventsConfig> kv_events;
  if (!a.kv_events_config.empty()) {
    const server::KvEventsConfig kc = server::parse_kv_events_config(a.kv_events_config);
    if (kc.publishes()) {
      if (!engine->config().enable_prefix_caching)
        LOG_WARN("--kv-events-config: prefix caching is off (--no-enable-prefix-caching): no block is ever cached, "
                 "so no event will be published");
      kv_events = kc;
    }
  }
  std::vector<std::unique_ptr<server::AsyncEngine>> replicas;
  for (int32_t r = 0; r < dp; ++r) {
    auto& e = engines[static_cast<size_t>(r)];
    server::AsyncEngineOptions async_options{a.max_waiting_requests, a.max_waiting_tokens, a.logging, {}};
    async_options.logging.engine_index = r;
    async_options.waiting_limits = waiting_limits;
    async_options.on_fatal = [&fatal](const std::string&) {
      // Another replica's fault may have raised it already: one SIGTERM is enough.
      if (!fatal.exchange(true)) kill(getpid(), SIGTERM);
    };
    // As vLLM: each data-parallel rank publishes its own events, its ports offset by the rank.
    if (kv_events) {
      const std::string medium = e->config().device == "cpu" ? "CPU" : "GPU";
      async_options.kv_events = std::make_shared<server::KvEventPublisher>(*kv_events, e->config().block_size, medium, r);
    }
    replicas.push_back(std::make_unique<server::AsyncEngine>(std::move(e), *metrics[static_cast<size_t>(r)],
                                                             std::move(async_options)));
  }
  server::DataParallelEngine async(std::move(replicas));
  server::set_grammar_cache_bytes(static_cast<size_t>(a.server.request.max_grammar_cache_bytes));
  server::HttpServer http(server::ServerContext{async, registry, chat.get(), a.server, defaults});
  if (tls) http.use_tls(tls);
  const int port = loading ? http.adopt(loading->release()) : http.bind();
  // Printed whatever the log level: scripts (and the tests) read the port from it with --port 0.
  std::fprintf(stderr, "pagoda: serving %s on %s://%s:%d\n", a.server.served_model_names.front().c_str(),
               tls ? "https" : "http", a.server.host.c_str(), port);
  std::fflush(stderr);

  std::atomic<bool> http_done{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (http_done) return;  // woken by run_serve itself after the server ended on its own
    // A second signal during the grace period: the operator does not want to wait.
    std::thread([stop_signals] {
      sigset_t set = stop_signals;
      int again = 0;
      sigwait(&set, &again);
      std::fprintf(stderr, "pagoda: signal %d again: exiting now, without waiting for requests in flight\n", again);
      std::fflush(stderr);
      _exit(128 + again);
    }).detach();
    const auto start = std::chrono::steady_clock::now();
    const auto grace = std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout * 1000));
    if (fatal) {
      // Every request has its error already; /health answers 503 for a moment (at most 1 s, within
      // the shutdown timeout) so that probes and load balancers see the server leave before its
      // port closes.
      LOG_ERROR("shutting down after a fatal engine fault; exit code " << kExitEngineFault);
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(grace / 2, std::chrono::seconds(1)));
    } else {
      LOG_INFO("signal " << sig << ": no new requests; waiting up to " << a.shutdown_timeout
                         << " s for the ones in flight");
    }
    // New connections are still taken during the drain: /health answers them 503 (so a readiness
    // probe takes the pod out of its pool, rather than seeing a refused connection it may read as
    // a crash) and new requests get 503; the port closes when the drain ends (http.shutdown).
    async.stop_accepting();
    if (!async.wait_idle(grace)) {
      LOG_INFO("aborting " << async.num_live_generations() << " requests still in flight");
      async.abort_all();
      async.wait_idle(std::chrono::seconds(2));
    }
    // The connections get what is left of the deadline to send their last bytes; slow and idle
    // ones are then closed.
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    http.shutdown(std::max(std::chrono::milliseconds(500), grace - spent));
  });
  http.run();
  http_done = true;
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // no-op in effect if it already returned
  signal_thread.join();
  async.stop();
  if (fatal) {
    // The engine's device memory and threads are not torn down: a failed device may hang or throw
    // in its destructors. The log says why the process ended.
    LOG_ERROR("server stopped after a fatal engine fault; exiting with code " << kExitEngineFault);
    std::fflush(nullptr);
    std::_Exit(kExitEngineFault);
  }
  LOG_INFO("server stopped");
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  // As vLLM (argparse): a flag given twice takes its last value (a --config file and the command
  // line, or a launch script that appends to a base command).
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto args = std::make_shared<ServeArgs>();
  cmd->add_option("model_dir", args->model_dir,
                  "Checkpoint directory, or a Hugging Face model id org/name (default: models/default)");
  cmd->add_option("--model", args->model_dir, "Same as MODEL_DIR");
  add_model_source_flags(cmd, args->source);
  cmd->add_option("--host", args->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->server.port, "Port to listen on (0 = any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", args->server.served_model_names,
                  "Model name(s) in the API (default: MODEL_DIR as given)");
  // One key per --api-key (repeat it for several, as vLLM's list): a list flag would swallow a MODEL_DIR
  // that follows it.
  cmd->add_option("--api-key", args->server.api_keys,
                  "Require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on the /v1 routes, as vLLM (/health, /metrics, /version, "
                  "/tokenize stay open); repeat for several keys; default: $VLLM_API_KEY. An empty key is refused")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->each([args](const std::string&) { args->api_key_given = true; });
  cmd->add_option("--max-waiting-requests", args->max_waiting_requests,
                  "Answer 503 (Retry-After) while this many choices (requests x n) wait to start; 0 = no limit. "
                  "The default is generous: past it a new request would wait minutes anyway")
      ->capture_default_str();
  cmd->add_option("--max-waiting-tokens", args->max_waiting_tokens,
                  "Answer 503 (Retry-After) while this many tokens of work wait to start (a choice's prompt + "
                  "max_tokens; an embedding input's prompt); a client named by the request's 'user' may fill "
                  "half; 0 = no limit")
      ->capture_default_str();
  add_http_limit_flags(cmd, args->server);
  cmd->add_option("--shutdown-timeout", args->shutdown_timeout,
                  "Seconds to let requests in flight finish on SIGINT/SIGTERM before aborting them and closing "
                  "every connection")
      ->capture_default_str();
  cmd->add_option("--reasoning-parser", args->reasoning_parser,
                  "<think>...</think> -> reasoning_content: auto (when the vocabulary has the tags), "
                  "qwen3, or none")
      ->capture_default_str();
  cmd->add_option("--tool-call-parser", args->tool_call_parser,
                  "Tool-call syntax parsed into tool_calls when a request has tools: auto (from the "
                  "model's vocabulary), hermes (<tool_call>, Qwen), llama3_json, mistral, pythonic (Gemma 3), "
                  "or none")
      ->capture_default_str();
  cmd->add_flag("--enable-auto-tool-choice", args->enable_auto_tool_choice,
                "Accepted for vllm serve compatibility (tool calls are parsed whenever tools are given)");
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat template: a file, or the template itself (default: the model's own)");
  cmd->add_option("--generation-config", args->generation_config,
                  "Sampling defaults: auto (the model's generation_config.json), vllm (none) or a directory")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed for requests that bring none (same as --engine-seed)");
  cmd->add_option("--root-path", args->server.root_path,
                  "Path prefix a proxy serves pagoda under; removed before routing");
  cmd->add_option("--allowed-local-media-path", args->server.allowed_local_media_path,
                  "Images: file:// URLs are read only under this directory (default: none are)");
  cmd->add_option("--allowed-media-domains", args->server.allowed_media_domains,
                  "Images: http(s) URLs are fetched only from these hosts (default: none are; send data: URIs)")
      ->expected(1, -1);
  cmd->add_option("--max-image-bytes", args->server.max_image_bytes,
                  "Images: the most encoded bytes one image may have (default 20 MiB); larger ones are a 400")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  cmd->add_option("--max-image-pixels", args->server.max_image_pixels,
                  "Images: the most pixels (width x height) one image may declare (default 4096 x 4096); larger "
                  "ones are a 400 before any decoding")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 28));
  cmd->add_flag("--return-tokens-as-token-ids", args->server.return_tokens_as_token_ids,
                "Logprobs name tokens as 'token_id:N' instead of their text");
  cmd->add_option_function<std::string>(
         "--scheduling-policy",
         [args](const std::string& policy) { args->server.priority_scheduling = policy == "priority"; },
         "fcfs (default): first come, first served; priority: requests' priority field, lower first "
         "(vLLM's)")
      ->check(CLI::IsMember({"fcfs", "priority"}));
  cmd->add_flag("--enable-prompt-tokens-details", args->server.enable_prompt_tokens_details,
                "usage.prompt_tokens_details in responses (cached_tokens)");
  cmd->add_option("--ssl-certfile", args->tls.certfile, "Serve HTTPS with this PEM certificate chain");
  cmd->add_option("--ssl-keyfile", args->tls.keyfile, "The PEM private key of --ssl-certfile (default: in that file)");
  cmd->add_option("--ssl-ca-certs", args->tls.ca_certs, "PEM CA certificates that client certificates are checked "
                                                        "against (with --ssl-cert-reqs)");
  cmd->add_option("--ssl-cert-reqs", args->tls.cert_reqs,
                  "Client certificates, as Python's ssl.CERT_*: 0 not asked, 1 optional, 2 required")
      ->capture_default_str();
  cmd->add_option("--kv-events-config", args->kv_events_config,
                  "vLLM's KV cache events over ZeroMQ, as JSON: '{\"enable_kv_cache_events\": true, \"endpoint\": "
                  "\"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5558\", \"topic\": \"kv-events\"}' "
                  "(docs/kv_events.md)");
  cmd->add_option("--metrics-prefix", args->metrics_prefix,
                  "Prefix of the /metrics names: vllm (vLLM's names, which dashboards, autoscalers and the inference gateway read), or pagoda")
      ->capture_default_str();
  cmd->add_flag("--enable-log-requests,!--disable-log-requests", args->logging.log_requests,
                "One log line per finished request (id, prompt tokens, parameters, finish)");
  cmd->add_flag("!--disable-log-stats", args->logging.log_stats,
                "No stats line every 10 s (throughput, running/waiting, KV usage)");
  cmd->add_option("--runner", args->server.runner,
                  "auto (pooling when the model has a sentence-transformers modules.json with a Pooling "
                  "module, else generate), generate, or pooling (serve /v1/embeddings: last-token pooling)")
      ->capture_default_str();
  cmd->add_option("--task", args->server.task, "vLLM's older form of --runner: auto, generate, or embed (= pooling)")
      ->capture_default_str();
  cmd->add_option("--convert", args->server.convert,
                  "auto, none, or embed (serve a causal LM as an embedding model: implies --runner pooling)")
      ->capture_default_str();
  // CORS, as vllm serve (Starlette's CORSMiddleware): JSON lists, '["*"]' by default.
  auto cors_list = [](std::vector<std::string>& out, const char* flag) {
    return [&out, flag](const std::string& v) {
      try {
        out = server::parse_cors_list(v, flag);
      } catch (const Error& e) {
        throw CLI::ValidationError(flag, e.what());
      }
    };
  };
  server::CorsOptions& cors = args->server.cors;
  cmd->add_option_function<std::string>("--allowed-origins", cors_list(cors.allowed_origins, "--allowed-origins"),
                                        "Origins a browser may call the API from, as a JSON list (default '[\"*\"]': any)");
  cmd->add_option_function<std::string>("--allowed-methods", cors_list(cors.allowed_methods, "--allowed-methods"),
                                        "HTTP methods allowed cross-origin, as a JSON list (default '[\"*\"]')");
  cmd->add_option_function<std::string>("--allowed-headers", cors_list(cors.allowed_headers, "--allowed-headers"),
                                        "Request headers allowed cross-origin, as a JSON list (default '[\"*\"]')");
  cmd->add_flag("--allow-credentials,!--no-allow-credentials", cors.allow_credentials,
                "Let browsers send credentials (cookies, Authorization) cross-origin");
  cmd->add_flag("!--disable-uvicorn-access-log", args->server.access_log,
                "No access log (one line per request: client, method, path, status), as vllm serve's flag");
  cmd->add_option("--uvicorn-log-level", args->uvicorn_log_level,
                  "As vllm serve: warning, error or critical turn the access log off (uvicorn writes it at "
                  "info); pagoda's own log level is PAGODA_LOG=debug|info|warn|error")
      ->check(CLI::IsMember({"critical", "error", "warning", "info", "debug", "trace"}))
      ->capture_default_str();
  cmd->add_option("--disable-access-log-for-endpoints", args->access_log_skip,
                  "Comma-separated paths left out of the access log, e.g. /health,/metrics,/ping");
  add_engine_flags(cmd, args->engine);
  add_lora_flags(cmd, args->engine);
  add_multimodal_flags(cmd, args->engine);
  cmd->add_option("--data-parallel-size", args->data_parallel_size,
                  "Engine replicas behind this server (-dp), each with its own scheduler, KV cache and devices "
                  "(replica r on devices r x tp onwards; cpu: the replicas share the cores); a request goes to "
                  "the least loaded (docs/architecture.md \"Data parallelism\")")
      ->capture_default_str();
  cmd->add_option("--data-parallel-size-local", args->data_parallel_size_local,
                  "vLLM's replicas on this node (-dpl): here all of them, so --data-parallel-size or left out");
  add_vllm_compat_flags(cmd, args->vllm_warnings);  // last: it skips every flag implemented above
  cmd->footer("vllm serve's other flags are accepted with a warning or refused with the reason: "
              "docs/coming-from-vllm.md lists them.");
  cmd->callback([args, exit_code] {
    run_serve(*args);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
