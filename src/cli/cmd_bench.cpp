// `pagoda bench offline`: docs/performance.md item 1 (llama-bench's pp512/tg128 and llama-batched-bench's
// B x P x G points) through one engine; prints a table and, with --json, writes the numbers.
// `pagoda bench kernels`: docs/performance.md item 3. `pagoda bench serve`: docs/performance.md item 2, a client for any
// OpenAI-compatible server (src/bench/serve_bench.h).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/kernel_bench.h"
#include "bench/membw.h"
#include "bench/offline_bench.h"
#include "structured/compile.h"
#include "bench/serve_bench.h"
#include "bench/serve_presets.h"
#include "bench/structured_bench.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_source.h"
#include "core/error.h"

namespace pagoda::cli {
namespace {

struct OfflineArgs {
  std::string model_dir;
  ModelSourceFlags source;
  std::vector<int32_t> batch_sizes{1, 16, 64, 128};
  int32_t prompt_len = 256, gen_len = 256, pp = 512, tg = 128;
  std::string json_file;
  std::string prompt_file;  // text: the prompt of the tg and batched points instead of random ids
  std::string schema_file;  // JSON Schema: each tg/batched point also run under it, right after
  uint64_t seed = 0;
  EngineFlags engine;
};

void run_offline(const OfflineArgs& a) {
  EngineConfig cfg = engine_config_from(a.engine);
  int32_t max_b = 1;
  for (int32_t b : a.batch_sizes) max_b = std::max(max_b, b);
  if (cfg.max_num_seqs == 0) cfg.max_num_seqs = max_b;
  if (cfg.max_model_len == 0) cfg.max_model_len = std::max(a.prompt_len + a.gen_len, a.pp + 1) + 16;
  const auto t_start = std::chrono::steady_clock::now();
  Engine engine(resolve_model(a.model_dir, a.source), cfg);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  const int64_t rss_after_load = resident_bytes();
  std::fprintf(stderr, "[pagoda] bench on %s\n", engine.backend().name().c_str());
  const bool cpu = engine.backend().device() == Device::CPU;
  double read_gbs = 0;

  std::vector<int32_t> text_prompt;
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    check(static_cast<bool>(in), "cannot read --prompt-file '" + a.prompt_file + "'");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check(engine.tokenizer() != nullptr, "--prompt-file needs the model's tokenizer.json");
    text_prompt = engine.tokenizer()->encode(text);
    check(!text_prompt.empty() && static_cast<int32_t>(text_prompt.size()) + std::max(a.tg, a.gen_len) <=
                                      engine.config().max_model_len,
          "--prompt-file: " + std::to_string(text_prompt.size()) + " tokens do not fit --max-model-len " +
              std::to_string(engine.config().max_model_len) + " with the generated tokens");
  }
  const std::vector<int32_t>* fixed = text_prompt.empty() ? nullptr : &text_prompt;
  std::shared_ptr<structured::GrammarRuntime> grammar;
  if (!a.schema_file.empty()) {
    std::ifstream in(a.schema_file, std::ios::binary);
    check(static_cast<bool>(in), "cannot read --json-schema '" + a.schema_file + "'");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check(engine.tokenizer() != nullptr, "--json-schema needs the model's tokenizer.json");
    std::vector<int32_t> eos;
    for (int64_t id : engine.model_config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
    grammar = std::make_shared<structured::GrammarRuntime>(
        structured::compile_constraint({structured::ConstraintKind::kJsonSchema, text, {}}),
        std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*engine.tokenizer(), eos)), eos);
  }
  std::vector<OfflineBenchPoint> points;
  auto run = [&](const std::string& name, int32_t b, int32_t p, int32_t g) {
    // As llama-bench does, one unmeasured run of the same shape first (a short one: its prefill
    // and a couple of decode steps), so one-time costs such as GEMM algorithm selection for a new
    // token count are not counted.
    const std::vector<int32_t>* prompt = g > 1 ? fixed : nullptr;  // pp stays random
    run_offline_point(engine, "warmup", b, p, std::min(g, 2), a.seed + 1000 + points.size(), prompt);
    points.push_back(run_offline_point(engine, name, b, p, g, a.seed + points.size(), prompt));
    std::fprintf(stderr, "[pagoda] %s done\n", name.c_str());
    if (grammar && g > 1) {  // the same point under the schema, right after (same prompts)
      run_offline_point(engine, "warmup", b, p, std::min(g, 2), a.seed + 1000 + points.size(), prompt, grammar);
      points.push_back(run_offline_point(engine, name + " +schema", b, p, g, a.seed + points.size() - 1, prompt, grammar));
    }
  };
  if (a.pp > 0) run("pp" + std::to_string(a.pp), 1, a.pp, 1);
  if (a.tg > 0) {
    // The ceiling of a bandwidth-bound decode, measured just before it with the engine's threads.
    if (cpu)
      read_gbs = read_bandwidth_gbs(cfg.num_threads > 0 ? cfg.num_threads
                                                        : static_cast<int>(std::thread::hardware_concurrency()));
    run("tg" + std::to_string(a.tg), 1, 1, a.tg);
  }
  for (int32_t b : a.batch_sizes)
    run("B=" + std::to_string(b), b, a.prompt_len, a.gen_len);
  std::printf("model %s, %s\n\n%s\nstep ms: decode-phase time per engine step; host ms: the part of it not "
              "spent waiting for the device (scheduling, metadata, launches, sampling, detokenizing)\n",
              a.model_dir.c_str(), engine.backend().name().c_str(), offline_table(points).c_str());
  // After load the mapped weights are not yet touched (so not yet resident); at the end they are.
  std::printf("load %.2f s, resident memory after load %.2f GiB, after the run %.2f GiB (weights %.2f GiB)\n", load_s,
              static_cast<double>(rss_after_load) / (1 << 30), static_cast<double>(resident_bytes()) / (1 << 30),
              static_cast<double>(engine.memory_plan().weight_bytes) / (1 << 30));
  if (cpu && read_gbs > 0)
    for (const OfflineBenchPoint& p : points)
      if (p.name == "tg" + std::to_string(a.tg)) {
        // Each decode step reads every weight byte once (a tied lm_head reads the whole table).
        const double gbs = p.decode_tok_s() * static_cast<double>(engine.memory_plan().weight_bytes) / 1e9;
        std::printf("%s: %.1f GB/s of weights read = %.0f%% of the %.1f GB/s streaming read measured before it\n",
                    p.name.c_str(), gbs, 100.0 * gbs / read_gbs, read_gbs);
      }
  if (!a.json_file.empty()) {
    std::ofstream out(a.json_file);
    check(static_cast<bool>(out), "cannot write --json file '" + a.json_file + "'");
    out << offline_json(points, a.model_dir, engine.backend().name()) << "\n";
  }
  if (const StepProfiler* p = engine.step_profiler()) std::printf("\n%s", p->report().c_str());
}

struct KernelArgs {
  std::string device = "cuda";
  std::string json_file;
  KernelBenchOptions opt;
};

void run_kernels(const KernelArgs& a) {
  auto be = make_backend(a.device);
  std::fprintf(stderr, "[pagoda] kernel bench on %s\n", be->name().c_str());
  const KernelBenchResult r = run_kernel_bench(*be, a.opt);
  std::printf("%s", kernel_bench_table(r).c_str());
  if (!a.json_file.empty()) {
    std::ofstream out(a.json_file);
    check(static_cast<bool>(out), "cannot write --json file '" + a.json_file + "'");
    out << kernel_bench_json(r) << "\n";
  }
}


// Flags as `vllm bench serve` names them, where it has one.
void add_serve_bench(CLI::App* bench, int* exit_code) {
  auto* sv = bench->add_subcommand("serve", "Benchmark an OpenAI-compatible server (pagoda's or another's): "
                                            "throughput, TTFT, TPOT, ITL, end-to-end latency");
  auto o = std::make_shared<bench::ServeBenchOptions>();
  auto rate = std::make_shared<std::string>("inf");
  auto preset = std::make_shared<std::string>();
  sv->add_option("--preset", *preset,
                 "A named workload: " + bench::serve_preset_names() +
                     " (docs/performance.md); flags given beside it override its settings");
  sv->add_option("--base-url", o->base_url, "Server URL, e.g. http://127.0.0.1:8000 (default: http://HOST:PORT)");
  sv->add_option("--host", o->host, "Server host when no --base-url")->capture_default_str();
  sv->add_option("--port", o->port, "Server port when no --base-url")->capture_default_str();
  sv->add_option("--endpoint", o->endpoint, "/v1/completions, or /v1/chat/completions (text prompts)")
      ->capture_default_str();
  sv->add_option("--model", o->model, "Model name sent (default: the first of GET /v1/models)");
  sv->add_option("--api-key", o->api_key, "Sent as 'Authorization: Bearer KEY'");
  sv->add_option("--dataset-name", o->dataset.name,
                 "random | sharegpt-like | jsonl | prefix_repetition (shared prefixes) | multi-turn "
                 "(conversations resending their history)")
      ->check(CLI::IsMember({"random", "sharegpt-like", "jsonl", "prefix_repetition", "multi-turn"}))
      ->capture_default_str();
  sv->add_option("--dataset-path", o->dataset.path,
                 "jsonl: one object a line, \"prompt\" (text or token ids), optional \"output_len\"");
  sv->add_option("--num-prompts", o->dataset.num_prompts, "Number of requests")->capture_default_str();
  sv->add_option("--random-input-len", o->dataset.input_len, "random: prompt tokens")->capture_default_str();
  sv->add_option("--random-output-len", o->dataset.output_len, "random: max_tokens (jsonl: the default)")
      ->capture_default_str();
  sv->add_option("--random-range-ratio", o->dataset.range_ratio,
                 "random: lengths uniform in LEN x [1 - r, 1 + r]")
      ->capture_default_str();
  sv->add_option("--prefix-repetition-prefix-len", o->dataset.prefix_len, "prefix_repetition: tokens of each prefix")
      ->capture_default_str();
  sv->add_option("--prefix-repetition-suffix-len", o->dataset.suffix_len,
                 "prefix_repetition: tokens of the unique suffix after it")
      ->capture_default_str();
  sv->add_option("--prefix-repetition-num-prefixes", o->dataset.num_prefixes,
                 "prefix_repetition: distinct prefixes, used in turn")
      ->capture_default_str();
  sv->add_option("--prefix-repetition-output-len", o->dataset.prefix_output_len, "prefix_repetition: max_tokens")
      ->capture_default_str();
  sv->add_option("--multi-turn-turns", o->dataset.turns,
                 "multi-turn: turns per conversation (num-prompts / turns conversations); turn 1 is "
                 "--random-input-len tokens, each next one adds a --random-output-len reply and a user message")
      ->capture_default_str();
  sv->add_option("--multi-turn-user-len", o->dataset.user_len, "multi-turn: tokens of each later user message")
      ->capture_default_str();
  sv->add_option("--tokenizer", o->tokenizer,
                 "random: a directory with the model's tokenizer.json; prompts are its random ids decoded to "
                 "text, as vLLM's (default: the server's vocabulary from GET /v1/models, as text through its "
                 "/tokenize and /detokenize where it has them)");
  sv->add_option("--vocab-size", o->dataset.vocab_size,
                 "random: send token-id prompts drawn from [0, V) instead, no tokenizer used");
  sv->add_option("--seed", o->dataset.seed, "Seed of the dataset and the arrival times")->capture_default_str();
  sv->add_option("--request-rate", *rate, "Requests per second, Poisson arrivals (inf: all at once)")
      ->capture_default_str();
  sv->add_option("--max-concurrency", o->max_concurrency, "Most requests in flight (0: no limit)")
      ->capture_default_str();
  sv->add_flag("--ignore-eos,!--no-ignore-eos", o->ignore_eos,
               "Send ignore_eos: true, so that every request generates max_tokens (default on)");
  sv->add_option("--temperature", o->temperature, "Sampling temperature sent")->capture_default_str();
  sv->add_option("--extra-body", o->extra_body, "A JSON object merged into every request body");
  sv->add_option("--lora-modules", o->lora_modules,
                 "LoRA adapter names the server serves: each request names one at random (seeded), as vLLM's")
      ->expected(1, -1);
  sv->add_option("--num-warmups", o->num_warmups, "Requests sent (one at a time) before measuring")
      ->capture_default_str();
  sv->add_flag("--profile", o->profile,
               "POST /start_profile before the measured requests and /stop_profile after, and print what the "
               "server answers (pagoda's: its step profiler's tables; start it with --profile-steps N)");
  sv->add_option("--metric-percentiles", o->percentiles, "Percentiles reported besides mean and median")
      ->delimiter(',');
  sv->add_option("--result-file", o->result_file, "Write the results as JSON (vLLM's keys)");
  sv->add_option("--plot", o->plot_file, "Draw the latency distributions to this SVG file");
  sv->add_option("--label", o->label, "A name for this run, kept in the JSON");
  sv->add_flag_function("--disable-tqdm,!--progress", [o](int64_t n) { o->progress = n <= 0; },
               "No progress bar on stderr");
  sv->callback([o, rate, preset, sv, exit_code] {
    if (*rate == "inf" || *rate == "infinity") {
      o->request_rate = std::numeric_limits<double>::infinity();
    } else {
      try {
        o->request_rate = std::stod(*rate);
      } catch (const std::exception&) {
        throw Error("bench serve: --request-rate must be a number or inf (got '" + *rate + "')");
      }
    }
    if (!preset->empty())
      bench::apply_serve_preset(*preset, *o, [sv](const std::string& flag) { return sv->count(flag) > 0; });
    bench::serve_bench_main(*o);
    *exit_code = 0;
  });
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand("bench", "Measure speed (offline engine runs, kernels, an HTTP server)");
  bench->require_subcommand(1);
  auto* off = bench->add_subcommand("offline", "pp / tg and batched P x G points through one engine");
  auto args = std::make_shared<OfflineArgs>();
  off->add_option("model_dir", args->model_dir,
                  "Checkpoint directory, or a Hugging Face model id org/name (default: models/default)");
  add_model_source_flags(off, args->source);
  off->add_option("--batch-sizes", args->batch_sizes, "Batched points B (P prompt, G generated)")
      ->delimiter(',');
  off->add_option("--prompt-len", args->prompt_len, "P of the batched points")->capture_default_str();
  off->add_option("--gen-len", args->gen_len, "G of the batched points")->capture_default_str();
  off->add_option("--pp", args->pp, "Prompt-processing point (0 = skip)")->capture_default_str();
  off->add_option("--tg", args->tg, "Single-stream generation point (0 = skip)")->capture_default_str();
  off->add_option("--json", args->json_file, "Write the results as JSON");
  off->add_option("--seed", args->seed, "Seed of the random prompts");
  off->add_option("--prompt-file", args->prompt_file,
                  "A text file whose tokens are the prompt of the tg and batched points (instead of random "
                  "token ids), e.g. to measure n-gram speculative decoding on text that repeats");
  off->add_option("--json-schema", args->schema_file,
                  "A JSON Schema file: each tg and batched point is run again right after under it "
                  "(structured output), to compare decode with and without a schema in one run");
  add_engine_flags(off, args->engine);
  off->callback([args, exit_code] {
    run_offline(*args);
    *exit_code = 0;
  });

  auto* kern = bench->add_subcommand("kernels", "The op table's perf cases: each hot op alone at model shapes: "
                                                "time, GB/s, TFLOP/s against the device's measured copy and GEMM "
                                                "rates (alias: ops)");
  kern->alias("ops");
  auto kargs = std::make_shared<KernelArgs>();
  kern->add_option("--device", kargs->device, "cpu or cuda")->capture_default_str();
  kern->add_option("--filter", kargs->opt.filter, "Only kernels whose name or shape contains this");
  kern->add_flag("--quick", kargs->opt.quick, "Fewer shapes and repetitions");
  kern->add_option("--json", kargs->json_file, "Write the results as JSON");
  kern->callback([kargs, exit_code] {
    run_kernels(*kargs);
    *exit_code = 0;
  });

  auto* st = bench->add_subcommand("structured", "Structured output: grammar compile time and per-token mask "
                                                  "time over JSON schemas at a real vocabulary (Qwen3's by default)");
  auto sargs = std::make_shared<pagoda::bench::StructuredBenchArgs>();
  st->add_option("--tokenizer", sargs->tokenizer_dir, "Directory with tokenizer.json (default: tests/data/qwen3-tokenizer)");
  st->add_option("--schemas", sargs->schemas_file, "JSON array of schemas (default: tests/structured/schemas.json)");
  st->add_option("--walks", sargs->walks_per_schema, "Random generations per schema")->capture_default_str();
  st->add_option("--max-steps", sargs->max_steps, "Tokens per generation at most")->capture_default_str();
  st->add_option("--jsonschemabench", sargs->jsonschemabench_dir,
                 "A JSONSchemaBench checkout (data/<category>/*.json): coverage per category, outputs checked "
                 "by python3-jsonschema");
  st->callback([sargs, exit_code] {
    if (!sargs->jsonschemabench_dir.empty()) {
      pagoda::bench::run_jsonschemabench(*sargs);
      *exit_code = 0;
      return;
    }
    pagoda::bench::run_structured_bench(*sargs);
    *exit_code = 0;
  });

  add_serve_bench(bench, exit_code);
  add_json_bench(bench, exit_code);
}

}  // namespace pagoda::cli
