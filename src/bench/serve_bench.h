// `pagoda bench serve`: docs/performance.md item 2. A client for any OpenAI-compatible server (pagoda's,
// llama.cpp's, vLLM's): N streaming requests from a dataset (serve_dataset.h), sent at a Poisson
// arrival rate and/or under a concurrency limit, each timed (serve_http.h), summed up as vLLM's
// `bench serve` sums them (serve_stats.h); flags as vLLM's where one exists.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bench/serve_dataset.h"
#include "bench/serve_stats.h"

namespace pagoda::bench {

struct ServeBenchOptions {
  std::string base_url;  // empty: http://HOST:PORT
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions (text prompts only)
  std::string model;                         // empty: the first of GET /v1/models
  std::string api_key;
  std::string tokenizer;  // a directory with tokenizer.json; empty: the server's vocabulary (serve_vocab.h)
  DatasetOptions dataset;
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s, Poisson arrivals
  int32_t max_concurrency = 0;                                    // 0: no limit
  bool ignore_eos = true;
  double temperature = 0;
  std::string extra_body;  // JSON object merged into every request
  // LoRA adapters the server serves: each request names one of them, picked at random (seeded by
  // the dataset's seed), as vLLM's `bench serve --lora-modules`. Empty: every request names model.
  std::vector<std::string> lora_modules;
  int32_t num_warmups = 0;
  // vLLM's --profile: POST /start_profile before the measured requests and /stop_profile after
  // (pagoda's server answers with its step profiler's tables: serve --profile-steps N).
  bool profile = false;
  std::vector<double> percentiles{99};
  std::string result_file, plot_file, label;
  bool progress = true;
};

struct ServeBenchRun {
  BenchSummary summary;
  std::vector<RequestResult> results;
  std::string model;
  std::string profile;  // /stop_profile's text (--profile)
};

// Sends the requests and measures them; prints nothing but the progress bar (stderr).
ServeBenchRun run_serve_bench(const ServeBenchOptions& opt);

// The whole command: run, print the table, write --result-file / --plot. Throws pagoda::Error when
// any request failed (how many, and the first error), after the report is out.
void serve_bench_main(const ServeBenchOptions& opt);

// The JSON body of one request.
std::string request_body(const ServeBenchOptions& opt, const std::string& model, const BenchRequest& r);

}  // namespace pagoda::bench
