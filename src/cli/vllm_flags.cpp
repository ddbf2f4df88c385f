#include "cli/vllm_flags.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::cli {
namespace {

constexpr VllmArity F = VllmArity::flag;
constexpr VllmArity V = VllmArity::value;
constexpr VllmArity L = VllmArity::values;
constexpr const char* kAny = nullptr;  // accepted with the warning, whatever the value
constexpr const char* kNo = "";        // refused

// Why a flag is refused says what to do instead; why one is warned says why it changes nothing.
// The names are vLLM's (vllm/engine/arg_utils.py, vllm/entrypoints/openai/cli_args.py; a few that
// older launch scripts still carry at the end); tests/fixtures/vllm_serve_flags.txt lists them all.
const std::vector<VllmFlag> kFlags = {
    // --- the front end ---------------------------------------------------------------------------
    {"--chat-template-content-format", V, "auto|string",
     "pagoda renders message content as the template expects it (auto); 'openai' is not supported"},
    {"--trust-request-chat-template", F, kAny, "a request's own chat_template is never used; the server's is"},
    {"--default-chat-template-kwargs", V, kNo,
     "not supported yet; pass chat_template_kwargs in each request, or edit the template (--chat-template)"},
    {"--response-role", V, "assistant", "pagoda answers with role 'assistant' only"},
    {"--exclude-tools-when-tool-choice-none", F, kNo,
     "not supported: tools stay in the prompt with tool_choice 'none'; leave tools out of such requests"},
    {"--tool-parser-plugin", V, kNo, "pagoda loads no Python plugins; --tool-call-parser names the built-in parsers"},
    {"--tool-server", V, kNo, "pagoda runs no tool servers (built-in browser or Python tools)"},
    {"--log-config-file", V, kNo, "pagoda's log is lines on stderr; PAGODA_LOG=debug|info|warn|error sets its level"},
    {"--max-log-len", V, kAny, "request log lines (--enable-log-requests) never print prompts"},
    {"--enable-per-request-metrics", F, kNo, "per-request timing in responses is not implemented; /metrics has the histograms"},
    {"--enable-server-load-tracking", F, kAny, "GET /load always answers (requests in flight)"},
    {"--enable-force-include-usage", F, kNo,
     "not implemented; ask for usage per request (stream_options.include_usage); whole responses always carry it"},
    {"--enable-tokenizer-info-endpoint", F, kNo, "pagoda has no /tokenizer_info endpoint"},
    {"--enable-log-outputs", F, kAny, "request log lines (--enable-log-requests) never print outputs"},
    {"--enable-log-deltas", F, kAny, "pagoda logs no outputs"},
    {"--cohere-is-reasoning-model", F, kAny, "pagoda has no /cohere endpoints"},
    {"--cohere-format", V, kAny, "pagoda has no /cohere endpoints"},
    {"--log-error-stack", F, kAny, "error responses are logged without Python stack traces"},
    {"--tokens-only", F, kNo, "pagoda has no tokens-only (disaggregated) mode; serve without it"},
    {"--fingerprint-mode", V, kAny, "responses carry no system_fingerprint"},
    {"--fingerprint-value", V, kAny, "responses carry no system_fingerprint"},
    {"--data-parallel-supervisor-port", V, kAny, "pagoda runs no data-parallel supervisor"},
    {"--dp-supervisor-probe-interval-s", V, kAny, "pagoda runs no data-parallel supervisor"},
    {"--dp-supervisor-probe-timeout-s", V, kAny, "pagoda runs no data-parallel supervisor"},
    {"--dp-supervisor-probe-failure-threshold", V, kAny, "pagoda runs no data-parallel supervisor"},
    {"--uds", V, kNo, "pagoda listens on TCP only; use --host 127.0.0.1 --port N behind your proxy"},
    {"--enable-ssl-refresh", F, kNo, "certificates are read at start only; restart pagoda after renewing them"},
    {"--ssl-ciphers", V, kNo, "not supported: pagoda uses OpenSSL's default cipher suites (TLS 1.2 and 1.3)"},
    {"--middleware", V, kNo, "pagoda loads no Python (ASGI) middleware; put a proxy in front instead"},
    {"--enable-request-id-headers", F, kAny, "every response carries X-Request-Id"},
    {"--disable-fastapi-docs", F, kAny, "pagoda serves no /docs pages"},
    {"--enable-offline-docs", F, kAny, "pagoda serves no /docs pages"},
    {"--enable-flash-late-interaction", F, kAny, "pagoda has no late-interaction scoring"},
    {"--headless", F, kNo, "pagoda runs one process on one node; multi-node data parallelism is not implemented"},
    {"--api-server-count", V, kAny, "pagoda's HTTP front end is one process with threads (--http-io-threads, --http-workers)"},
    {"--grpc", F, kNo, "pagoda serves HTTP only (the OpenAI-compatible API)"},
    // --- the model ---------------------------------------------------------------------------------
    {"--tokenizer-mode", V, "auto|hf", "pagoda reads tokenizer.json only; 'slow', 'mistral' and the other modes are not supported"},
    {"--hf-config-path", V, kNo, "pagoda reads config.json from the model directory; put the config you want there"},
    {"--code-revision", V, kAny, "pagoda runs no code from checkpoints"},
    {"--tokenizer-revision", V, kNo, "pagoda reads the tokenizer from a local directory (--tokenizer DIR)"},
    {"--rope-scaling", V, kNo, "not supported: pagoda takes rope_scaling from config.json; edit it there"},
    {"--rope-theta", V, kNo, "not supported: pagoda takes rope_theta from config.json; edit it there"},
    {"--hf-overrides", V, kNo, "not supported: edit config.json in the model directory instead"},
    {"--logprobs-mode", V, "raw_logprobs", "pagoda returns the raw log-probabilities (raw_logprobs) only"},
    {"--disable-sliding-window", F, kNo, "not supported: pagoda runs sliding-window layers as the model defines them"},
    {"--disable-cascade-attn", F, kAny, "pagoda has no cascade attention"},
    {"--skip-tokenizer-init", F, kNo, "not supported: a model directory without tokenizer.json already serves token ids only"},
    {"--enable-prompt-embeds", F, kNo, "prompts as embeddings are not supported"},
    {"--config-format", V, "auto|hf", "pagoda reads Hugging Face config.json only"},
    {"--pooler-config", V, kNo, "not supported: pooling comes from the model's modules.json (--runner pooling)"},
    {"--override-pooler-config", V, kNo, "not supported: pooling comes from the model's modules.json (--runner pooling)"},
    {"--logits-processor-pattern", V, kNo, "pagoda loads no Python logits processors"},
    {"--override-generation-config", V, kNo,
     "not supported: use --generation-config DIR with a generation_config.json that has the values"},
    {"--enable-sleep-mode", F, kNo, "sleep mode (/sleep, /wake_up) is not implemented"},
    {"--model-impl", V, "auto", "pagoda runs its own implementation of each model"},
    {"--override-attention-dtype", V, kNo, "not supported: attention runs in the --dtype"},
    {"--logits-processors", L, kNo, "pagoda loads no Python logits processors"},
    {"--io-processor-plugin", V, kNo, "pagoda loads no Python plugins"},
    {"--max-seq-len-to-capture", V, kAny, "CUDA graphs cover decode steps whatever the length"},
    // --- loading -------------------------------------------------------------------------------------
    {"--load-format", V, "auto|safetensors", "pagoda loads safetensors checkpoints (auto) only"},
    {"--safetensors-load-strategy", V, kAny, "pagoda maps safetensors files into memory"},
    {"--model-loader-extra-config", V, kNo, "pagoda's loader takes no extra configuration"},
    {"--ignore-patterns", L, kAny, "pagoda downloads only the files it loads (configs, tokenizer, *.safetensors)"},
    {"--use-tqdm-on-load", F, kAny, "pagoda shows no progress bar while loading"},
    {"--pt-load-map-location", V, kAny, "pagoda loads no PyTorch .bin checkpoints"},
    // --- structured outputs --------------------------------------------------------------------------
    {"--guided-decoding-backend", V, kAny, "pagoda's own grammar engine serves every structured output"},
    {"--guided-decoding-disable-fallback", F, kAny, "pagoda's own grammar engine has no fallback"},
    {"--guided-decoding-disable-any-whitespace", F, kNo,
     "not supported: JSON schemas allow the whitespace JSON allows; use a regex or grammar to forbid it"},
    {"--guided-decoding-disable-additional-properties", F, kNo,
     "not supported: set \"additionalProperties\": false in the schema itself"},
    {"--structured-outputs-config", V, kAny, "pagoda's own grammar engine serves every structured output"},
    // --- parallelism: one GPU ------------------------------------------------------------------------
    {"--distributed-executor-backend", V, kAny, "pagoda runs in one process"},
    {"--pipeline-parallel-size", V, "1",
     "pagoda runs a model on one GPU; pipeline parallelism is not implemented yet (use 1, or leave the flag out)"},
    {"--tensor-parallel-size", V, "1",
     "implemented: each layer split over N ranks (cpu: threads of one process; cuda: a GPU each, through NCCL)"},
    {"--decode-context-parallel-size", V, "1", "pagoda runs a model on one GPU; use 1, or leave the flag out"},
    {"--data-parallel-size", V, "1",
     "implemented on serve: N engine replicas behind one server; generate and bench run one engine (use 1)"},
    {"--data-parallel-rank", V, kNo,
     "multi-node data parallelism is not implemented; --data-parallel-size runs every replica in this process"},
    {"--data-parallel-start-rank", V, kNo,
     "multi-node data parallelism is not implemented; --data-parallel-size runs every replica in this process"},
    {"--data-parallel-size-local", V, "1",
     "implemented on serve (equal to --data-parallel-size: every replica is local); generate and bench run one "
     "engine (use 1)"},
    {"--data-parallel-address", V, kNo,
     "multi-node data parallelism is not implemented; --data-parallel-size runs every replica in this process"},
    {"--data-parallel-rpc-port", V, kNo,
     "multi-node data parallelism is not implemented; --data-parallel-size runs every replica in this process"},
    {"--data-parallel-backend", V, kAny, "pagoda runs its replicas as threads of one process"},
    {"--data-parallel-hybrid-lb", F, kNo,
     "multi-node data parallelism is not implemented; --data-parallel-size balances the replicas of this process"},
    {"--all2all-backend", V, kAny, "on one GPU there is no all-to-all"},
    {"--enable-dbo", F, kAny, "pagoda has no dual-batch overlap (it overlaps nothing across GPUs)"},
    {"--dbo-decode-token-threshold", V, kAny, "pagoda has no dual-batch overlap"},
    {"--dbo-prefill-token-threshold", V, kAny, "pagoda has no dual-batch overlap"},
    {"--disable-nccl-for-dp-synchronization", F, kAny,
     "pagoda's data-parallel replicas never synchronize (they share no collective)"},
    {"--enable-eplb", F, kAny, "on one GPU there are no experts to balance"},
    {"--eplb-config", V, kAny, "on one GPU there are no experts to balance"},
    {"--expert-placement-strategy", V, kAny, "on one GPU every expert is local"},
    {"--num-redundant-experts", V, kAny, "on one GPU there are no experts to balance"},
    {"--eplb-window-size", V, kAny, "on one GPU there are no experts to balance"},
    {"--eplb-step-interval", V, kAny, "on one GPU there are no experts to balance"},
    {"--eplb-log-balancedness", F, kAny, "on one GPU there are no experts to balance"},
    {"--max-parallel-loading-workers", V, kAny, "pagoda loads the weights itself"},
    {"--ray-workers-use-nsight", F, kAny, "pagoda uses no Ray"},
    {"--worker-cls", V, "auto", "pagoda loads no Python worker classes"},
    {"--worker-extension-cls", V, kNo, "pagoda loads no Python worker classes"},
    {"--enable-multimodal-encoder-data-parallel", F, kAny, "one vision tower per worker; ignored"},
    {"--disable-frontend-multiprocessing", F, kAny, "pagoda's HTTP front end and engine share one process already"},
    // --- the KV cache --------------------------------------------------------------------------------
    {"--swap-space", V, kAny, "pagoda swaps no KV blocks to the CPU: a preempted sequence is recomputed"},
    {"--prefix-caching-hash-algo", V, kAny, "pagoda keys cached blocks by their tokens, not a hash that can collide"},
    {"--cpu-offload-gb", V, "0", "offloading weights to the CPU is not implemented; use a model that fits the GPU"},
    {"--calculate-kv-scales", F, kAny, "pagoda has no fp8 KV cache, so no scales"},
    {"--kv-sharing-fast-prefill", F, kAny, "pagoda has no cross-layer KV sharing"},
    {"--mamba-cache-dtype", V, kAny, "the conv state is kept in the activation dtype; the recurrent state's is --mamba-ssm-cache-dtype"},
    {"--mamba-block-size", V, kAny,
     "pagoda snapshots recurrent state by --block-size and --state-checkpoint-interval"},
    // --- multimodal -----------------------------------------------------------------------------------
    {"--enable-mm-embeds", F, kNo, "requests cannot carry precomputed image embeddings; send the images (docs/vision.md)"},
    {"--media-io-kwargs", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--mm-processor-kwargs", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--mm-processor-cache-gb", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--disable-mm-preprocessor-cache", F, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--mm-processor-cache-type", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--mm-shm-cache-max-object-size-mb", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--mm-encoder-tp-mode", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--mm-encoder-attn-backend", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--interleave-mm-strings", F, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--skip-mm-profiling", F, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--video-pruning-rate", V, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    // --- LoRA ----------------------------------------------------------------------------------------
    {"--lora-extra-vocab-size", V, kAny, "adapters add no tokens (vLLM has removed extra vocabularies too)"},
    {"--lora-dtype", V, kAny, "adapters are kept in the model's dtype"},
    {"--fully-sharded-loras", F, kAny, "adapters are always sharded as their projections are (B by output rows, A by input columns)"},
    {"--default-mm-loras", V, kAny, "no adapters per modality: a request's adapter applies to its whole prompt"},
    // --- observability -------------------------------------------------------------------------------
    {"--show-hidden-metrics-for-version", V, kAny, "/metrics hides no deprecated metrics"},
    {"--otlp-traces-endpoint", V, kNo, "OpenTelemetry tracing is not implemented; /metrics and the logs remain"},
    {"--collect-detailed-traces", L, kNo, "OpenTelemetry tracing is not implemented; /metrics and the logs remain"},
    {"--aggregate-engine-logging", F, kAny, "pagoda runs one engine: its stats line is the aggregate"},
    // --- the scheduler -------------------------------------------------------------------------------
    {"--max-num-partial-prefills", V, "1",
     "concurrent partial prefill is not supported (vLLM 0.19 refuses it too): use 1; "
     "--long-prefill-token-threshold keeps long prompts from filling whole steps"},
    {"--max-long-partial-prefills", V, "1",
     "concurrent partial prefill is not supported (vLLM 0.19 refuses it too): use 1; "
     "--long-prefill-token-threshold keeps long prompts from filling whole steps"},
    {"--num-lookahead-slots", V, kAny, "speculative decoding sizes its own slots (--speculative-config)"},
    {"--disable-chunked-mm-input", F, kAny, "pagoda's image path (docs/vision.md) has no such setting; ignored"},
    {"--scheduler-cls", V, kNo, "pagoda loads no Python scheduler classes"},
    {"--disable-hybrid-kv-cache-manager", F, kAny, "pagoda's one KV cache manager serves every model"},
    {"--async-scheduling", F, kAny, "pagoda's scheduler is not configurable this way"},
    // --- compilation: no PyTorch ---------------------------------------------------------------------
    {"--cudagraph-capture-sizes", L, kAny, "pagoda captures its own CUDA graphs for decode steps (--enforce-eager: none)"},
    {"--cuda-graph-sizes", L, kAny, "pagoda captures its own CUDA graphs for decode steps (--enforce-eager: none)"},
    {"--max-cudagraph-capture-size", V, kAny, "pagoda captures its own CUDA graphs for decode steps (--enforce-eager: none)"},
    {"--compilation-config", V, kAny, "pagoda has no torch.compile: its kernels are compiled already"},
    {"--kv-transfer-config", V, kNo, "disaggregated prefill (KV transfer) is not implemented"},
    {"--additional-config", V, kNo, "pagoda has no platform plugins to pass it to"},
    // --- flags of older vLLM releases that launch scripts still carry --------------------------------
    {"--use-v2-block-manager", F, kAny, "pagoda has one block manager"},
    {"--num-scheduler-steps", V, "1", "multi-step scheduling is not implemented (vLLM removed it too); use 1"},
    {"--multi-step-stream-outputs", F, kAny, "multi-step scheduling is not implemented"},
    {"--preemption-mode", V, "recompute", "a preempted sequence is recomputed (recompute); 'swap' is not implemented"},
    {"--tokenizer-pool-size", V, kAny, "pagoda tokenizes on its --http-workers threads"},
    {"--enable-reasoning", F, kAny, "reasoning is parsed whenever --reasoning-parser (default auto) finds the tags"},
    {"--speculative-model", V, kNo, "use --speculative-config '{\"method\": \"ngram\", ...}' (vLLM's current form)"},
    {"--num-speculative-tokens", V, kNo, "use --speculative-config '{\"num_speculative_tokens\": N, ...}'"},
};

bool takes_value(const CLI::Option* o) { return o->get_type_size_max() > 0 && o->get_items_expected_max() > 0; }

std::vector<std::string> split_bar(const char* list) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = list; *p; ++p) {
    if (*p == '|') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  out.push_back(cur);
  return out;
}

// A YAML node as the text a flag takes: a scalar as it is, a list or map as JSON (vLLM's JSON
// flags: --speculative-config, --compilation-config).
nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& kv : n) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    return j;
  }
  if (n.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& x : n) j.push_back(yaml_to_json(x));
    return j;
  }
  if (n.IsNull()) return nullptr;
  const std::string s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: a string whatever it looks like
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  const nlohmann::json number = nlohmann::json::parse(s, nullptr, false);
  if (number.is_number()) return number;
  return s;
}

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  return yaml_to_json(n).dump();
}

std::string normalized_flag(std::string word) {
  // vLLM takes --max_model_len for --max-model-len (the name only, never the value).
  const size_t end = std::min(word.find('='), word.size());
  std::replace(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
  return word;
}

}  // namespace

const std::vector<VllmFlag>& vllm_flags() { return kFlags; }

std::string vllm_short_alias(const std::string& word) {
  static const std::vector<std::pair<std::string, std::string>> kAliases = {
      {"-tp", "--tensor-parallel-size"},   {"-pp", "--pipeline-parallel-size"},
      {"-dcp", "--decode-context-parallel-size"}, {"-dp", "--data-parallel-size"},
      {"-dpn", "--data-parallel-rank"},    {"-dpr", "--data-parallel-start-rank"},
      {"-dpl", "--data-parallel-size-local"}, {"-dpa", "--data-parallel-address"},
      {"-dpp", "--data-parallel-rpc-port"}, {"-dpb", "--data-parallel-backend"},
      {"-q", "--quantization"},            {"-asc", "--api-server-count"},
      {"-O", "--compilation-config"}};
  for (const auto& [s, l] : kAliases)
    if (word == s) return l;
  return "";
}

void add_vllm_compat_flags(CLI::App* cmd, std::shared_ptr<std::vector<std::string>> warnings) {
  for (const VllmFlag& f : kFlags) {
    const std::string name = f.name;
    if (cmd->get_option_no_throw(name) != nullptr) continue;  // pagoda implements it
    const bool refused = f.accepted != nullptr && *f.accepted == '\0';
    const std::string why = f.why;
    const std::string help = std::string(refused ? "vLLM's; refused: " : "vLLM's; no effect: ") + why;
    if (f.arity == VllmArity::flag) {
      cmd->add_flag_function(
             name,
             [name, why, refused, warnings](int64_t) {
               if (refused) throw CLI::ValidationError(name, "not supported by pagoda: " + why);
               warnings->push_back(name + " has no effect in pagoda: " + why);
             },
             help)
          ->group("");
      // --no-NAME asks for what pagoda does without the flag: accepted, said once.
      const std::string no = "--no-" + name.substr(2);
      if (cmd->get_option_no_throw(no) == nullptr)
        cmd->add_flag_function(
               no, [no, warnings](int64_t) { warnings->push_back(no + " has no effect in pagoda (it is its default)"); },
               help)
            ->group("");
      continue;
    }
    const std::vector<std::string> ok = f.accepted && *f.accepted ? split_bar(f.accepted) : std::vector<std::string>{};
    auto judge = [name, why, refused, ok, warnings](const std::vector<std::string>& values) {
      std::string shown;
      for (const std::string& v : values) shown += (shown.empty() ? "" : " ") + v;
      if (refused) throw CLI::ValidationError(name, "not supported by pagoda: " + why);
      for (const std::string& v : values)
        if (!ok.empty() && std::find(ok.begin(), ok.end(), v) == ok.end())
          throw CLI::ValidationError(name + " " + shown, "not supported by pagoda: " + why);
      warnings->push_back(ok.empty() ? name + " " + shown + " has no effect in pagoda: " + why
                                     : name + " " + shown + " is what pagoda does anyway: accepted, no effect");
    };
    CLI::Option* o = cmd->add_option_function<std::vector<std::string>>(name, judge, help)->group("");
    if (f.arity == VllmArity::value) o->expected(1);
    else o->expected(1, CLI::detail::expected_max_vector_size);
  }
}

std::vector<std::string> expand_vllm_args(const CLI::App& cmd, std::vector<std::string> args) {
  std::vector<std::string> out;
  std::string config;
  bool has_positional = false;
  std::set<std::string> given;  // flag names on the command line, "--no-" removed
  for (size_t i = 0; i < args.size(); ++i) {
    std::string w = args[i];
    if (w == "--") {  // everything after it is positional
      for (; i < args.size(); ++i) out.push_back(args[i]);
      has_positional = has_positional || i > 0;
      break;
    }
    if (w.size() > 1 && w[0] == '-' && w[1] != '-' && !std::isdigit(static_cast<unsigned char>(w[1]))) {
      // -tp 2, -tp=2, -O3
      const size_t eq = w.find('=');
      std::string head = w.substr(0, eq), tail = eq == std::string::npos ? "" : w.substr(eq + 1);
      std::string longer = vllm_short_alias(head);
      if (longer.empty() && head.rfind("-O", 0) == 0 && head.size() > 2) {
        longer = "--compilation-config";
        tail = head.substr(2) + (eq == std::string::npos ? "" : "=" + tail);
      }
      if (!longer.empty()) {
        given.insert(longer);
        out.push_back(longer);
        if (!tail.empty() || eq != std::string::npos) out.push_back(tail);
        continue;
      }
    }
    if (w.rfind("--", 0) == 0) {
      w = normalized_flag(w);
      const std::string name = w.substr(0, w.find('='));
      if (name == "--config") {
        if (w.size() > name.size()) {
          config = w.substr(name.size() + 1);
        } else {
          check(i + 1 < args.size(), "--config needs a file: --config FILE.yaml");
          config = args[++i];
        }
        continue;
      }
      given.insert(name.rfind("--no-", 0) == 0 ? "--" + name.substr(5) : name);
      out.push_back(w);
      const CLI::Option* o = cmd.get_option_no_throw(name);
      if (o && takes_value(o) && w.find('=') == std::string::npos) {
        // Its value(s): the next word, or for a list every word up to the next flag.
        const bool list = o->get_items_expected_max() > 1;
        while (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-' ||
                                       (args[i + 1].size() > 1 && std::isdigit(static_cast<unsigned char>(args[i + 1][1]))))) {
          out.push_back(args[++i]);
          if (!list) break;
        }
      }
      continue;
    }
    if (!w.empty() && w[0] != '-') has_positional = true;
    out.push_back(w);
  }
  if (config.empty()) return out;

  YAML::Node root;
  try {
    root = YAML::LoadFile(config);
  } catch (const YAML::BadFile&) {
    throw Error("--config " + config + ": cannot read the file (give the path of a YAML file of vllm serve flags)");
  } catch (const YAML::Exception& e) {
    throw Error("--config " + config + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return out;
  check(root.IsMap(), "--config " + config +
                          ": expected a YAML mapping of flags to values, e.g. 'max-model-len: 4096' on each line");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    std::string flag = normalized_flag("--" + key);
    if (key == "model" || key == "model_tag" || key == "model-tag") {
      // The positional MODEL; the command line's wins.
      if (has_positional || given.count("--model")) continue;
      flag = "--model";
    }
    if (given.count(flag)) continue;  // the command line wins
    const YAML::Node& v = kv.second;
    const nlohmann::json j = yaml_to_json(v);
    if (j.is_boolean()) {
      if (j.get<bool>()) {
        out.push_back(flag);
      } else if (cmd.get_option_no_throw("--no-" + flag.substr(2)) != nullptr) {
        out.push_back("--no-" + flag.substr(2));
      }
      continue;  // false for a plain store_true flag: its default
    }
    if (j.is_null()) continue;
    const CLI::Option* o = cmd.get_option_no_throw(flag);
    if (v.IsSequence() && o && o->get_items_expected_max() > 1) {
      out.push_back(flag);
      for (const auto& x : v) out.push_back(scalar_text(x));
      continue;
    }
    out.push_back(flag + "=" + scalar_text(v));
  }
  return out;
}

}  // namespace pagoda::cli
