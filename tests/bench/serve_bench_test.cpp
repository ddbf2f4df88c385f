// `pagoda bench serve`: the statistics against hand-computed values, the dataset generator, the SSE
// reader, and the whole client against `pagoda serve` on the tiny model, its report checked against
// what the server's /metrics says it served.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "../server/server_harness.h"
#include "bench/serve_bench.h"
#include "bench/serve_dataset.h"
#include "bench/serve_http.h"
#include "bench/serve_presets.h"
#include "bench/serve_stats.h"
#include "bench/serve_vocab.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "core/build_paths.h"

namespace pagoda::bench {
namespace {

TEST(ServeBenchStats, PercentilesAsNumpy) {
  // numpy.percentile([1, 2, 3, 4, 10], p): 50 -> 3, 99 -> 4 + 0.96 * 6, 25 -> 2, 0 -> 1, 100 -> 10.
  const std::vector<double> v{10, 3, 1, 4, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_NEAR(percentile(v, 99), 9.76, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 2);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_NEAR(percentile({1, 2, 3, 4}, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(ServeBenchStats, DistributionInMilliseconds) {
  const Distribution d = distribution_ms({0.001, 0.002, 0.003, 0.006}, {99, 90});
  EXPECT_NEAR(d.mean, 3.0, 1e-9);
  EXPECT_NEAR(d.median, 2.5, 1e-9);
  EXPECT_NEAR(d.std, std::sqrt((4 + 1 + 0 + 9) / 4.0), 1e-9);  // population sd, as numpy.std
  ASSERT_EQ(d.percentiles.size(), 2u);
  EXPECT_NEAR(d.percentiles[0].second, 3 + 0.97 * 3, 1e-9);
  EXPECT_NEAR(d.percentiles[1].second, 3 + 0.7 * 3, 1e-9);
}

TEST(ServeBenchStats, Summary) {
  std::vector<RequestResult> rs(4);
  // Three successes: [0, 1], [0.5, 2.5], [3, 4]; one failure [0.6, 0.7].
  rs[0] = {true, "", 10, 5, 0.0, 0.2, 1.0, {0.2, 0.2, 0.2, 0.2}};
  rs[1] = {true, "", 20, 3, 0.5, 0.5, 2.0, {0.75, 0.75}};
  rs[2] = {true, "", 30, 1, 3.0, 1.0, 1.0, {}};
  rs[3] = {false, "HTTP 500: boom", 40, 0, 0.6, 0.1, 0.1, {}};
  const BenchSummary s = summarize(rs, 4.0, {99});
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.total_input_tokens, 60);
  EXPECT_EQ(s.total_output_tokens, 9);
  EXPECT_DOUBLE_EQ(s.request_throughput(), 0.75);
  EXPECT_DOUBLE_EQ(s.output_throughput(), 9 / 4.0);
  EXPECT_DOUBLE_EQ(s.total_token_throughput(), 69 / 4.0);
  EXPECT_EQ(s.peak_concurrency, 3);  // at t = 0.65: requests 0, 1 and 3 (failed ones were in flight too)
  // TTFT over successes: 200, 500, 1000 ms.
  EXPECT_NEAR(s.ttft.mean, 1700 / 3.0, 1e-9);
  EXPECT_NEAR(s.ttft.median, 500, 1e-9);
  // TPOT: (1.0 - 0.2) / 4 = 200 ms and (2.0 - 0.5) / 2 = 750 ms (one-token outputs have none).
  EXPECT_NEAR(s.tpot.mean, 475, 1e-9);
  EXPECT_NEAR(s.tpot.median, 475, 1e-9);
  // ITL: four 200s and two 750s.
  EXPECT_NEAR(s.itl.mean, (4 * 200 + 2 * 750) / 6.0, 1e-9);
  EXPECT_NEAR(s.itl.median, 200, 1e-9);
  EXPECT_NEAR(s.e2el.mean, 4000 / 3.0, 1e-9);
  ASSERT_EQ(s.errors.size(), 1u);
  const auto j = summary_json(s, rs);
  for (const char* k : {"completed", "failed", "duration", "request_throughput", "output_throughput",
                        "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                        "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
                        "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["completed"], 3);
  EXPECT_EQ(j["input_lens"].size(), 4u);
  EXPECT_NE(summary_table(s).find("Successful requests:                     3"), std::string::npos)
      << summary_table(s);
}

TEST(ServeBenchDataset, RandomIdsAreSeededRunsOfTheVocabulary) {
  DatasetOptions o;
  o.num_prompts = 200;
  o.input_len = 100;
  o.output_len = 50;
  o.range_ratio = 0.2;
  o.vocab_size = 5000;
  o.seed = 7;
  const auto a = make_dataset(o), b = make_dataset(o);
  o.seed = 8;
  const auto c = make_dataset(o);
  ASSERT_EQ(a.size(), 200u);
  std::set<int32_t> lens, firsts;
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt_ids, b[i].prompt_ids);
    EXPECT_EQ(a[i].output_len, b[i].output_len);
    differs = differs || a[i].prompt_ids != c[i].prompt_ids;
    EXPECT_GE(a[i].prompt_len, 80);
    EXPECT_LE(a[i].prompt_len, 120);
    EXPECT_GE(a[i].output_len, 40);
    EXPECT_LE(a[i].output_len, 60);
    EXPECT_TRUE(a[i].prompt_text.empty());
    ASSERT_EQ(a[i].prompt_ids.size(), static_cast<size_t>(a[i].prompt_len));
    // vLLM's random prompt: consecutive ids of the vocabulary, wrapping round, from a random offset.
    for (size_t k = 0; k < a[i].prompt_ids.size(); ++k) {
      ASSERT_GE(a[i].prompt_ids[k], 0);
      ASSERT_LT(a[i].prompt_ids[k], 5000);
      if (k > 0) {
        ASSERT_EQ(a[i].prompt_ids[k], (a[i].prompt_ids[k - 1] + 1) % 5000);
      }
    }
    lens.insert(a[i].prompt_len);
    firsts.insert(a[i].prompt_ids[0]);
  }
  EXPECT_TRUE(differs);
  EXPECT_GT(lens.size(), 10u);     // the range is used
  EXPECT_GT(firsts.size(), 150u);  // the offsets are spread
  o.range_ratio = 0;
  for (const auto& r : make_dataset(o)) {
    EXPECT_EQ(r.prompt_len, 100);
    EXPECT_EQ(r.output_len, 50);
  }
  o.vocab_size = 0;  // and no vocabulary given: a clear error, not prompts of made-up ids
  try {
    make_dataset(o);
    ADD_FAILURE() << "no error";
  } catch (const pagoda::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tokenizer"), std::string::npos) << e.what();
  }
}

// A vocabulary with text: the tiny byte-level tokenizer of the server tests, read from a directory
// as --tokenizer DIR reads it.
TEST(ServeBenchDataset, RandomTextFromATokenizer) {
  const std::string dir = (std::filesystem::temp_directory_path() / "pagoda-bench-tokenizer").string();
  std::filesystem::create_directories(dir);
  server::test::write_file(dir + "/tokenizer.json", server::test::tiny_tokenizer_json().dump());
  const auto tok = Tokenizer::load_dir(dir);
  auto vocab = local_vocabulary(dir);
  EXPECT_EQ(vocab->size(), 512);
  std::set<int32_t> special;
  for (const auto& t : tok->added_tokens())
    if (t.special) special.insert(t.id);
  ASSERT_EQ(special.size(), 6u);  // <|endoftext|>, <|im_start|>, <|im_end|> and three pads
  for (int32_t id : special) EXPECT_FALSE(vocab->usable(id)) << id;
  EXPECT_TRUE(vocab->usable(97));

  DatasetOptions o;
  o.num_prompts = 50;
  o.input_len = 40;
  o.output_len = 4;
  o.seed = 5;
  DatasetStats stats;
  const auto a = make_dataset(o, vocab.get(), &stats);
  ASSERT_EQ(a.size(), 50u);
  int exact = 0;
  for (const auto& r : a) {
    EXPECT_TRUE(r.prompt_ids.empty());  // sent as text, as vLLM sends them
    ASSERT_FALSE(r.prompt_text.empty());
    const std::vector<int32_t> ids = tok->encode(r.prompt_text);
    EXPECT_EQ(static_cast<int32_t>(ids.size()), r.prompt_len) << r.prompt_text;  // the count is the text's own
    for (int32_t id : ids) EXPECT_EQ(special.count(id), 0u) << r.prompt_text;
    exact += r.prompt_len == 40;
    // A prompt cut inside a UTF-8 character decodes to U+FFFD, 3 byte tokens here, and can keep
    // the count from converging (vLLM's loop has the same limit): a token or two over at most.
    EXPECT_GE(r.prompt_len, 38);
    EXPECT_LE(r.prompt_len, 42);
  }
  EXPECT_GE(exact, 30);  // most converge to the asked length
  int64_t mismatch = 0;
  for (const auto& r : a) mismatch += r.prompt_len - 40;
  EXPECT_EQ(stats.token_mismatch, mismatch);
  EXPECT_EQ(make_dataset(o, vocab.get())[9].prompt_text, a[9].prompt_text);  // seeded
  std::filesystem::remove_all(dir);
}

TEST(ServeBenchDataset, SharegptLikeLengths) {
  DatasetOptions o;
  o.name = "sharegpt-like";
  o.vocab_size = 10000;
  o.num_prompts = 2000;
  o.seed = 3;
  const auto a = make_dataset(o);
  std::vector<double> in, out;
  for (const auto& r : a) {
    ASSERT_GE(r.prompt_len, 4);
    ASSERT_LE(r.prompt_len, 1024);
    ASSERT_GE(r.output_len, 4);
    ASSERT_LE(r.prompt_len + r.output_len, 2048);
    in.push_back(r.prompt_len);
    out.push_back(r.output_len);
  }
  EXPECT_NEAR(percentile(in, 50), 120, 20);
  EXPECT_NEAR(percentile(out, 50), 140, 20);
  EXPECT_EQ(make_dataset(o)[17].prompt_ids, a[17].prompt_ids);
}

TEST(ServeBenchDataset, Jsonl) {
  const std::string path = (std::filesystem::temp_directory_path() / "pagoda-serve-bench.jsonl").string();
  server::test::write_file(path, "{\"prompt\": \"hello there\"}\n\n{\"prompt\": [1, 2, 3], \"output_len\": 9}\n"
                                 "{\"text\": \"third\", \"max_tokens\": 4}\n{\"prompt\": \"never read\"}\n");
  DatasetOptions o;
  o.name = "jsonl";
  o.path = path;
  o.num_prompts = 3;
  o.output_len = 17;
  const auto a = make_dataset(o);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].prompt_text, "hello there");
  EXPECT_EQ(a[0].output_len, 17);
  EXPECT_EQ(a[1].prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(a[1].prompt_len, 3);
  EXPECT_EQ(a[1].output_len, 9);
  EXPECT_EQ(a[2].prompt_text, "third");
  EXPECT_EQ(a[2].output_len, 4);
  server::test::write_file(path, "not json\n");
  EXPECT_THROW(make_dataset(o), pagoda::Error);
  std::filesystem::remove(path);
}

TEST(ServeBenchDataset, PrefixRepetitionSharesEachPrefixInTurn) {
  DatasetOptions o;
  o.name = "prefix_repetition";
  o.num_prompts = 12;
  o.prefix_len = 40;
  o.suffix_len = 8;
  o.num_prefixes = 3;
  o.prefix_output_len = 5;
  o.vocab_size = 1000;
  o.seed = 3;
  const auto a = make_dataset(o);
  ASSERT_EQ(a.size(), 12u);
  std::set<std::vector<int32_t>> prefixes, suffixes;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].prompt_ids.size(), 48u);
    EXPECT_EQ(a[i].prompt_len, 48);
    EXPECT_EQ(a[i].output_len, 5);
    EXPECT_EQ(a[i].after, -1);
    const std::vector<int32_t> prefix(a[i].prompt_ids.begin(), a[i].prompt_ids.begin() + 40);
    // Prefix i % 3: the same for requests 3 apart, different otherwise.
    EXPECT_EQ(prefix, std::vector<int32_t>(a[i % 3].prompt_ids.begin(), a[i % 3].prompt_ids.begin() + 40));
    prefixes.insert(prefix);
    suffixes.insert(std::vector<int32_t>(a[i].prompt_ids.begin() + 40, a[i].prompt_ids.end()));
  }
  EXPECT_EQ(prefixes.size(), 3u);
  EXPECT_EQ(suffixes.size(), 12u);  // every suffix its own
}

TEST(ServeBenchDataset, MultiTurnResendsTheConversationInRounds) {
  DatasetOptions o;
  o.name = "multi-turn";
  o.num_prompts = 9;
  o.turns = 3;
  o.input_len = 20;
  o.output_len = 6;
  o.user_len = 4;
  o.vocab_size = 1000;
  const auto a = make_dataset(o);
  ASSERT_EQ(a.size(), 9u);  // 3 conversations x 3 turns, turn by turn
  for (size_t i = 0; i < a.size(); ++i) {
    const size_t turn = i / 3;
    EXPECT_EQ(a[i].prompt_len, static_cast<int32_t>(20 + turn * (6 + 4))) << i;
    EXPECT_EQ(a[i].output_len, 6);
    if (turn == 0) {
      EXPECT_EQ(a[i].after, -1);
      continue;
    }
    ASSERT_EQ(a[i].after, static_cast<int32_t>(i - 3));
    const auto& prev = a[i - 3].prompt_ids;
    ASSERT_GT(a[i].prompt_ids.size(), prev.size());
    EXPECT_TRUE(std::equal(prev.begin(), prev.end(), a[i].prompt_ids.begin())) << "turn " << turn << " extends the last";
  }
  EXPECT_NE(a[0].prompt_ids, a[1].prompt_ids);
}

TEST(ServeBenchHttp, SseReaderSplitsAnyChunking) {
  const std::string stream = "data: {\"a\":1}\n\n: ping\n\ndata:{\"b\":2}\r\n\r\ndata: [DONE]\n\n";
  for (size_t step : {1, 3, 7, 1000}) {
    SseReader r;
    std::vector<std::string> got;
    for (size_t i = 0; i < stream.size(); i += step)
      r.feed(std::string_view(stream).substr(i, step), [&](std::string_view d) { got.emplace_back(d); });
    EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"})) << step;
  }
  const ServerUrl u = parse_base_url("http://127.0.0.1:8000/api/");
  EXPECT_EQ(u.scheme_host_port, "http://127.0.0.1:8000");
  EXPECT_EQ(u.path_prefix, "/api");
}

TEST(ServeBenchHttp, RequestBody) {
  ServeBenchOptions o;
  BenchRequest r;
  r.prompt_ids = {5, 6};
  r.output_len = 12;
  auto j = nlohmann::json::parse(request_body(o, "m", r));
  EXPECT_EQ(j["prompt"], nlohmann::json::array({5, 6}));
  EXPECT_EQ(j["max_tokens"], 12);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["ignore_eos"], true);
  o.extra_body = R"({"top_k": 5})";
  o.endpoint = "/v1/chat/completions";
  EXPECT_THROW(request_body(o, "m", r), pagoda::Error);  // token ids cannot be a chat message
  r.prompt_ids.clear();
  r.prompt_text = "hi";
  j = nlohmann::json::parse(request_body(o, "m", r));
  EXPECT_EQ(j["messages"][0]["content"], "hi");
  EXPECT_EQ(j["top_k"], 5);
}

// The sum of every series of `name` in a Prometheus text (labels or none).
double metric_sum(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const std::string rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != ' ' && rest[0] != '{')) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TEST(ServeBench, AgainstPagodaServeMatchesItsMetrics) {
  using server::test::ServerProcess;
  const server::test::TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--served-model-name", "tiny", "--max-model-len", "256"})) << s.log();
  const std::string before = s.get("/metrics").body;
  const std::string result = model_dir.path + "/result.json", plot = model_dir.path + "/latency.svg";
  const std::string cmd = std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                          std::to_string(s.port()) +
                          " --num-prompts 40 --max-concurrency 8 --random-input-len 16 --random-output-len 8"
                          " --vocab-size 512 --seed 1 --disable-tqdm --result-file " + result + " --plot " + plot +
                          " 2>&1";
  const auto r = server::test::run_command(cmd);
  ASSERT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(server::test::read_file(result), nullptr, false);
  ASSERT_TRUE(j.is_object()) << server::test::read_file(result);
  for (const char* k : {"completed", "failed", "duration", "request_throughput", "output_throughput",
                        "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                        "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
                        "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["model_id"], "tiny");  // from GET /v1/models
  EXPECT_EQ(j["completed"], 40);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_output_tokens"], 40 * 8);
  EXPECT_EQ(j["total_input_tokens"], 40 * 16);
  EXPECT_LE(j["peak_concurrency"].get<int>(), 8);
  EXPECT_GE(j["peak_concurrency"].get<int>(), 1);
  EXPECT_GT(j["mean_ttft_ms"].get<double>(), 0);
  EXPECT_GT(j["mean_tpot_ms"].get<double>(), 0);
  EXPECT_GT(j["duration"].get<double>(), 0);

  // The server served exactly what the report counts.
  const std::string after = s.get("/metrics").body;
  auto delta = [&](const std::string& name) { return metric_sum(after, name) - metric_sum(before, name); };
  EXPECT_EQ(delta("vllm:request_success_total"), j["completed"].get<double>());
  EXPECT_EQ(delta("vllm:generation_tokens_total"), j["total_output_tokens"].get<double>());
  EXPECT_EQ(delta("vllm:prompt_tokens_total"), j["total_input_tokens"].get<double>());

  const std::string svg = server::test::read_file(plot);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("Time to first token"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(s.stop(), 0) << s.log();
}


// Sum of one key over the per-request list of a result file ("input_lens", "output_lens").
int64_t sum_of(const nlohmann::json& j, const char* key) {
  int64_t sum = 0;
  for (const auto& v : j[key]) sum += v.get<int64_t>();
  return sum;
}

// Issue 13: the defaults (no --vocab-size, no --tokenizer) against the default model served with
// its defaults complete every request: the prompts come from the server's own vocabulary.
TEST(ServeBench, DefaultsAgainstTheDefaultModelCompleteEveryRequest) {
  using server::test::ServerProcess;
  const server::test::DefaultModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {})) << s.log();
  const auto models = s.get("/v1/models").json();
  const auto config = nlohmann::json::parse(server::test::read_file(model_dir.path + "/config.json"));
  EXPECT_EQ(models["data"][0]["vocab_size"], config["vocab_size"]);  // 4096, not the old default 10000

  const std::string bin = std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                          std::to_string(s.port()) + " --num-prompts 6 --random-input-len 24 --random-output-len 4";
  for (const std::string& extra : {std::string(), " --tokenizer " + server::test::source_path("models/default")}) {
    SCOPED_TRACE(extra.empty() ? "the server's vocabulary" : "--tokenizer");
    const std::string before = s.get("/metrics").body;
    const std::string result = model_dir.path + "/result.json";
    const auto r = server::test::run_command(bin + extra + " --result-file " + result + " 2>&1");
    ASSERT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
    EXPECT_NE(r.out.find(extra.empty() ? "random prompts from the server's vocabulary, 4096 ids, text through its "
                                         "/tokenize and /detokenize"
                                       : "random prompts from tokenizer.json of"),
              std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(server::test::read_file(result), nullptr, false);
    ASSERT_TRUE(j.is_object()) << server::test::read_file(result);
    EXPECT_EQ(j["completed"], 6);
    EXPECT_EQ(j["failed"], 0);
    EXPECT_EQ(j["total_output_tokens"], 6 * 4);
    // Text prompts of (nearly always exactly) 24 tokens, as the server counted them.
    const int64_t in = sum_of(j, "input_lens");
    EXPECT_EQ(j["total_input_tokens"], in);
    EXPECT_GE(in, 6 * 24 - 6);
    EXPECT_LE(in, 6 * 24 + 6);
    const std::string after = s.get("/metrics").body;
    EXPECT_EQ(metric_sum(after, "vllm:prompt_tokens_total") - metric_sum(before, "vllm:prompt_tokens_total"), in);
    EXPECT_EQ(metric_sum(after, "vllm:request_success_total") - metric_sum(before, "vllm:request_success_total"),
              6);
  }
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// The prefix-cache datasets against a server that reports cached tokens: the hit rate the report
// gives is the one the server counted, and the multi-turn dataset waits for each previous turn.
TEST(ServeBench, PrefixDatasetsReportTheServersHitRate) {
  using server::test::ServerProcess;
  const server::test::TestModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--served-model-name", "tiny", "--max-model-len", "512",
                                       "--enable-prompt-tokens-details"}))
      << s.log();
  const std::string base = std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                           std::to_string(s.port()) + " --vocab-size 512 --seed 2 --disable-tqdm --max-concurrency 4";
  for (const std::string& args :
       {std::string(" --dataset-name prefix_repetition --num-prompts 24 --prefix-repetition-prefix-len 64 "
                    "--prefix-repetition-suffix-len 8 --prefix-repetition-num-prefixes 3 --prefix-repetition-output-len 4"),
        std::string(" --dataset-name multi-turn --num-prompts 12 --multi-turn-turns 4 --random-input-len 40 "
                    "--random-output-len 4 --multi-turn-user-len 12")}) {
    SCOPED_TRACE(args);
    const std::string before = s.get("/metrics").body;
    const std::string result = model_dir.path + "/result.json";
    const auto r = server::test::run_command(base + args + " --result-file " + result + " 2>&1");
    ASSERT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
    EXPECT_NE(r.out.find("Prefix cache hit rate (%)"), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(server::test::read_file(result), nullptr, false);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["failed"], 0);
    const std::string after = s.get("/metrics").body;
    auto delta = [&](const std::string& name) { return metric_sum(after, name) - metric_sum(before, name); };
    const double hits = delta("vllm:prefix_cache_hits_total"), queries = delta("vllm:prefix_cache_queries_total");
    ASSERT_GT(queries, 0);
    EXPECT_NEAR(j["prefix_cache_hit_rate"].get<double>(), hits / queries, 1e-9);
    EXPECT_GT(hits / queries, 0.3) << "shared prefixes and resent conversations should mostly hit";
  }
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServeBench, ParsesTheSpecDecodeCountersOfAnyPrefix) {
  const std::string text =
      "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
      "# TYPE vllm:spec_decode_num_drafts_total counter\n"
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 12.0\n"
      "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 30.0\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 17.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"1\"} 5.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 10.0\n"
      "vllm:spec_decode_num_drafts_created 1.7e9\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n";
  const auto c = parse_spec_decode_counters(text);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->drafts, 12);
  EXPECT_EQ(c->draft_tokens, 30);
  EXPECT_EQ(c->accepted_tokens, 17);
  EXPECT_EQ(c->accepted_per_pos, (std::vector<int64_t>{10, 5}));
  EXPECT_FALSE(parse_spec_decode_counters("vllm:num_requests_running 0\n").has_value());
  BenchSummary s;
  set_spec_decode(s, SpecDecodeCounters{2, 5, 3, {2, 1}}, *c);
  EXPECT_EQ(s.spec_drafts, 10);
  EXPECT_EQ(s.spec_accepted_tokens, 14);
  EXPECT_DOUBLE_EQ(s.spec_acceptance_length(), 1.0 + 14.0 / 10.0);
  EXPECT_DOUBLE_EQ(s.spec_acceptance_rate(), 14.0 / 25.0);
  EXPECT_EQ(s.spec_accepted_per_pos, (std::vector<int64_t>{8, 4}));
}

// Against a server with speculative decoding (the shipped model's MTP head), the report's
// speculative section is the server's own counters over the run.
TEST(ServeBench, SpeculativeDecodingSectionIsTheServersCounters) {
  using server::test::ServerProcess;
  const server::test::DefaultModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--max-model-len", "512", "--speculative-config",
                                       R"({"method": "mtp", "num_speculative_tokens": 2})"}))
      << s.log();
  const std::string before = s.get("/metrics").body;
  const std::string result = model_dir.path + "/result.json";
  const auto r = server::test::run_command(
      std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" + std::to_string(s.port()) +
      " --vocab-size 4096 --seed 3 --disable-tqdm --max-concurrency 4 --dataset-name random --num-prompts 8 "
      "--random-input-len 32 --random-output-len 24 --ignore-eos --result-file " + result + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("Speculative Decoding"), std::string::npos) << r.out;
  const std::string after = s.get("/metrics").body;
  auto delta = [&](const std::string& name) { return metric_sum(after, name) - metric_sum(before, name); };
  const auto j = nlohmann::json::parse(server::test::read_file(result), nullptr, false);
  ASSERT_TRUE(j.is_object());
  const double drafts = delta("vllm:spec_decode_num_drafts_total");
  const double drafted = delta("vllm:spec_decode_num_draft_tokens_total");
  const double accepted = delta("vllm:spec_decode_num_accepted_tokens_total");
  ASSERT_GT(drafts, 0);
  EXPECT_EQ(j["spec_decode_num_drafts"].get<double>(), drafts);
  EXPECT_EQ(j["spec_decode_accepted_tokens"].get<double>(), accepted);
  EXPECT_NEAR(j["spec_decode_acceptance_rate"].get<double>(), accepted / drafted, 1e-12);
  EXPECT_NEAR(j["spec_decode_acceptance_length"].get<double>(), 1 + accepted / drafts, 1e-12);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// --profile as vLLM's: POST /start_profile and /stop_profile around the run, and the server's step
// profiler tables printed (serve --profile-steps); a server without the flag is a clear error.
TEST(ServeBench, ProfilePrintsTheServersStepProfile) {
  using server::test::ServerProcess;
  const server::test::DefaultModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {"--max-model-len", "512", "--profile-steps", "2"})) << s.log();
  const std::string bin = std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                          std::to_string(s.port()) + " --vocab-size 4096 --seed 5 --disable-tqdm --max-concurrency 4 "
                          "--dataset-name random --num-prompts 8 --random-input-len 32 --random-output-len 16 --ignore-eos";
  auto r = server::test::run_command(bin + " --profile 2>&1");
  ASSERT_EQ(r.code, 0) << r.out << "\n--- server log ---\n" << s.log();
  EXPECT_NE(r.out.find("step profile:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode steps:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| paged_attention |"), std::string::npos) << r.out;
  EXPECT_EQ(s.stop(), 0) << s.log();
  EXPECT_NE(s.log().find("step profile:"), std::string::npos) << "serve logs the tables when it stops";

  ServerProcess plain;
  ASSERT_TRUE(plain.start(model_dir.path, {"--max-model-len", "512"})) << plain.log();
  EXPECT_EQ(plain.request("POST", "/start_profile", "", {}).status, 404);
  r = server::test::run_command(std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                                std::to_string(plain.port()) + " --vocab-size 4096 --num-prompts 2 "
                                "--random-input-len 8 --random-output-len 2 --profile 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--profile-steps"), std::string::npos) << r.out;
  EXPECT_EQ(plain.stop(), 0) << plain.log();
}

// A run where requests fail says so and exits non-zero, after printing its report.
TEST(ServeBench, FailedRequestsExitNonZero) {
  using server::test::ServerProcess;
  const server::test::DefaultModelDir model_dir;
  ASSERT_FALSE(model_dir.path.empty());
  ServerProcess s;
  ASSERT_TRUE(s.start(model_dir.path, {})) << s.log();
  const std::string bin = std::string(PAGODA_BINARY) + " bench serve --base-url http://127.0.0.1:" +
                          std::to_string(s.port()) + " --num-prompts 5 --random-output-len 2";
  // Every request fails: a model the server does not serve.
  auto r = server::test::run_command(bin + " --random-input-len 8 --model no-such-model 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 of 5 requests failed; the first error: HTTP 404"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-such-model"), std::string::npos) << r.out;
  // Prompts longer than the server's max_model_len are refused before anything is sent.
  const auto max_len = s.get("/v1/models").json()["data"][0]["max_model_len"].get<int64_t>();
  r = server::test::run_command(bin + " --random-input-len " + std::to_string(max_len + 10) + " 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("more than the server's max_model_len " + std::to_string(max_len)), std::string::npos)
      << r.out;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

// The published profiles (gpustack's performance lab, docs/performance.md), by name; a flag given
// beside a preset wins.
TEST(ServeBenchPresets, ProfilesAreThePublishedOnesAndFlagsOverrideThem) {
  ServeBenchOptions o;
  apply_serve_preset("throughput", o, [](const std::string&) { return false; });
  EXPECT_EQ(o.dataset.name, "random");
  EXPECT_EQ(o.dataset.num_prompts, 1000);
  EXPECT_EQ(o.dataset.input_len, 1024);
  EXPECT_EQ(o.dataset.output_len, 128);
  EXPECT_EQ(o.dataset.range_ratio, 0.0);
  EXPECT_TRUE(std::isinf(o.request_rate));
  EXPECT_EQ(o.max_concurrency, 0);
  EXPECT_EQ(o.label, "throughput");

  ServeBenchOptions lc;
  lc.dataset.num_prompts = 7;
  apply_serve_preset("long-context", lc, [](const std::string& f) { return f == "--num-prompts"; });
  EXPECT_EQ(lc.dataset.num_prompts, 7) << "an explicit --num-prompts must win";
  EXPECT_EQ(lc.dataset.input_len, 32000);
  EXPECT_EQ(lc.dataset.output_len, 100);
  EXPECT_EQ(lc.request_rate, 1.0);

  ServeBenchOptions gh;
  apply_serve_preset("generation-heavy", gh, [](const std::string&) { return false; });
  EXPECT_EQ(gh.dataset.num_prompts, 200);
  EXPECT_EQ(gh.dataset.input_len, 1000);
  EXPECT_EQ(gh.dataset.output_len, 2000);
  EXPECT_EQ(gh.request_rate, 1.0);

  ServeBenchOptions sg;
  apply_serve_preset("sharegpt-like", sg, [](const std::string&) { return false; });
  EXPECT_EQ(sg.dataset.name, "sharegpt-like");
  EXPECT_EQ(sg.dataset.num_prompts, 1000);
  EXPECT_EQ(sg.max_concurrency, 512);

  try {
    apply_serve_preset("fastest", sg, [](const std::string&) { return false; });
    ADD_FAILURE() << "an unknown preset was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("throughput | long-context"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda::bench
