// `pagoda generate`: one prompt streamed to the terminal, or an offline batch (vLLM's offline API):
// --prompts IN.jsonl --output OUT.jsonl, all requests run together through one engine. --chat sends
// each text prompt as one user message through the model's chat template, as vLLM's llm.chat does.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_source.h"
#include "core/error.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"

namespace pagoda::cli {
namespace {

struct GenerateArgs {
  std::string model_dir;
  ModelSourceFlags source;
  std::string prompt;
  bool chat = false;
  std::vector<int32_t> prompt_token_ids;
  std::string prompts_file, output_file;
  EngineFlags engine;
  SamplingParams sampling;
};

// Text prompts as given, or (--chat) rendered as one user message through the chat template.
class PromptText {
 public:
  PromptText(const std::string& model_dir, bool chat) {
    if (!chat) return;
    chat_ = server::ChatPrompt::load(model_dir);
    check(chat_ != nullptr, "--chat: " + model_dir + " has no chat template (chat_template in "
                            "tokenizer_config.json, or chat_template.jinja); leave --chat out to send the "
                            "prompt as it is");
  }
  bool chat() const { return chat_ != nullptr; }
  std::string operator()(const std::string& text) const {
    if (!chat_) return text;
    server::ChatPromptRequest r;
    r.messages = server::Json::array({{{"role", "user"}, {"content", text}}});
    r.add_generation_prompt = true;
    try {
      return chat_->render(r);
    } catch (const server::ApiError& e) {
      throw Error(std::string("--chat: the model's chat template failed: ") + e.what());
    }
  }

 private:
  std::unique_ptr<server::ChatPrompt> chat_;
};

// One input line of the batch file: the prompt and any per-request sampling overrides.
struct BatchItem {
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;
  SamplingParams params;
};

template <class T>
void read_opt(const nlohmann::json& j, const char* key, T& out) {
  if (j.contains(key) && !j[key].is_null()) out = j[key].get<T>();
}

SamplingParams params_from_json(const nlohmann::json& j, SamplingParams p) {
  read_opt(j, "temperature", p.temperature);
  read_opt(j, "top_p", p.top_p);
  read_opt(j, "top_k", p.top_k);
  read_opt(j, "min_p", p.min_p);
  read_opt(j, "presence_penalty", p.presence_penalty);
  read_opt(j, "frequency_penalty", p.frequency_penalty);
  read_opt(j, "repetition_penalty", p.repetition_penalty);
  read_opt(j, "min_tokens", p.min_tokens);
  if (j.contains("stop_token_ids") && !j["stop_token_ids"].is_null())
    p.stop_token_ids = j["stop_token_ids"].get<std::vector<int32_t>>();
  read_opt(j, "ignore_eos", p.ignore_eos);
  read_opt(j, "include_stop_str_in_output", p.include_stop_str_in_output);
  read_opt(j, "n", p.n);
  if (j.contains("max_tokens") && !j["max_tokens"].is_null()) p.max_tokens = j["max_tokens"].get<int32_t>();
  if (j.contains("seed") && !j["seed"].is_null()) p.seed = j["seed"].get<uint64_t>();
  if (j.contains("logprobs") && !j["logprobs"].is_null()) p.logprobs = j["logprobs"].get<int32_t>();
  if (j.contains("stop")) {
    if (j["stop"].is_string()) p.stop = {j["stop"].get<std::string>()};
    else read_opt(j, "stop", p.stop);
  }
  return p;
}

std::vector<BatchItem> read_batch(const std::string& path, const Engine& engine,
                                  const SamplingParams& defaults, const PromptText& prompt_text) {
  std::ifstream in(path);
  check(static_cast<bool>(in), "cannot open --prompts file '" + path + "'");
  std::vector<BatchItem> items;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      check(j.is_object(), where + ": each line must be a JSON object");
      BatchItem item;
      if (j.contains("prompt_token_ids")) {
        check(!prompt_text.chat(), where + ": --chat renders text prompts; \"prompt_token_ids\" cannot "
                                           "go through the chat template");
        item.prompt_ids = j["prompt_token_ids"].get<std::vector<int32_t>>();
      } else {
        check(j.contains("prompt") && j["prompt"].is_string(),
              where + ": needs \"prompt\" (text) or \"prompt_token_ids\"");
        check(engine.tokenizer() != nullptr,
              where + ": a text prompt needs tokenizer.json in the model directory; "
                      "use \"prompt_token_ids\" instead");
        item.prompt_text = j["prompt"].get<std::string>();
        item.prompt_ids = engine.tokenizer()->encode(prompt_text(item.prompt_text));
      }
      item.params = params_from_json(j, defaults);
      if (auto err = validate_sampling_params(item.params)) throw Error(where + ": " + *err);
      items.push_back(std::move(item));
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": " + e.what());
    }
  }
  return items;
}

// n > 1 fans out into n sequences; with a seed, completion i uses seed + i so they differ.
std::vector<SamplingParams> fan_out(const SamplingParams& p) {
  std::vector<SamplingParams> out;
  for (int32_t i = 0; i < std::max(1, p.n); ++i) {
    SamplingParams q = p;
    q.n = 1;
    if (p.seed) q.seed = *p.seed + static_cast<uint64_t>(i);
    out.push_back(q);
  }
  return out;
}

void run_batch(Engine& engine, const GenerateArgs& args, const PromptText& prompt_text) {
  const std::vector<BatchItem> items = read_batch(args.prompts_file, engine, args.sampling, prompt_text);
  struct Slot {
    size_t item, completion;
    std::vector<int32_t> tokens;
    std::string text;
    std::string finish_reason;
  };
  std::vector<Slot> slots;
  std::map<int64_t, size_t> by_id;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto per = fan_out(items[i].params);
    for (size_t c = 0; c < per.size(); ++c) {
      by_id[engine.add_request(items[i].prompt_ids, per[c])] = slots.size();
      slots.push_back({i, c, {}, {}, {}});
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  size_t done = 0, generated = 0;
  while (engine.has_unfinished()) {
    for (RequestOutput& o : engine.step()) {
      Slot& s = slots[by_id.at(o.id)];
      s.tokens.insert(s.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      s.text += o.new_text;
      generated += o.new_token_ids.size();
      if (o.finished) {
        s.finish_reason = finish_reason_name(o.finish_reason);
        ++done;
        std::fprintf(stderr, "\r[pagoda] %zu/%zu requests done, %zu tokens generated", done,
                     slots.size(), generated);
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "\n[pagoda] %.2f s, %.1f generated tok/s\n", secs, generated / std::max(secs, 1e-9));

  std::ofstream out(args.output_file);
  check(static_cast<bool>(out), "cannot write --output file '" + args.output_file + "'");
  for (const Slot& s : slots) {
    nlohmann::json j;
    j["index"] = s.item;
    if (items[s.item].params.n > 1) j["completion_index"] = s.completion;
    j["num_prompt_tokens"] = items[s.item].prompt_ids.size();
    j["token_ids"] = s.tokens;
    if (engine.tokenizer()) j["text"] = s.text;
    j["finish_reason"] = s.finish_reason;
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

void run_single(Engine& engine, const GenerateArgs& args, const PromptText& prompt_text) {
  std::vector<int32_t> ids = args.prompt_token_ids;
  if (ids.empty()) {
    check(engine.tokenizer() != nullptr,
          "this model directory has no tokenizer.json; give the prompt as --prompt-token-ids");
    ids = engine.tokenizer()->encode(prompt_text(args.prompt));
  }
  check(!ids.empty(), "the prompt is empty: give --prompt TEXT or --prompt-token-ids IDS");
  engine.add_request(ids, args.sampling);
  const auto t0 = std::chrono::steady_clock::now();
  double ttft = 0;
  size_t generated = 0;
  std::string reason;
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      if (generated == 0 && !o.new_token_ids.empty())
        ttft = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      generated += o.new_token_ids.size();
      if (engine.tokenizer()) {
        std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
      } else {
        for (int32_t t : o.new_token_ids) std::printf("%d ", t);
      }
      std::fflush(stdout);
      if (o.finished) reason = finish_reason_name(o.finish_reason);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n");
  std::fflush(stdout);  // the answer first, then the statistics on stderr
  std::fprintf(stderr,
               "[pagoda] %zu prompt tokens, %zu generated (finish: %s); first token %.0f ms, "
               "%.1f tok/s after it\n",
               ids.size(), generated, reason.c_str(), ttft * 1e3,
               generated > 1 ? (generated - 1) / std::max(secs - ttft, 1e-9) : 0.0);
  if (const StepProfiler* p = engine.step_profiler()) std::fprintf(stderr, "%s", p->report().c_str());
}

void run_generate(GenerateArgs args, const CLI::App* cmd) {
  const int sources = !args.prompt.empty() + !args.prompt_token_ids.empty() + !args.prompts_file.empty();
  check(sources == 1, "give exactly one of --prompt, --prompt-token-ids or --prompts IN.jsonl");
  check(args.prompts_file.empty() == args.output_file.empty(),
        "--prompts and --output go together (read IN.jsonl, write OUT.jsonl)");
  check(!args.chat || args.prompt_token_ids.empty(),
        "--chat renders a text prompt through the chat template; it cannot apply to --prompt-token-ids");
  if (auto err = validate_sampling_params(args.sampling)) throw Error(*err);
  const std::string dir = resolve_model(args.model_dir, args.source);
  const PromptText prompt_text(dir, args.chat);  // before the engine loads: a missing template fails fast
  Engine engine(dir, engine_config_from(args.engine));
  args.sampling = sampling_with_model_defaults(cmd, args.sampling, engine.model_config());
  std::fprintf(stderr, "[pagoda] sampling: %s\n", describe_sampling(args.sampling).c_str());
  if (!args.prompts_file.empty()) run_batch(engine, args, prompt_text);
  else run_single(engine, args, prompt_text);
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("generate", "Generate text for a prompt, or for a JSONL batch");
  auto args = std::make_shared<GenerateArgs>();
  args->sampling.max_tokens = 256;
  cmd->add_option("model_dir", args->model_dir,
                  "Checkpoint directory, or a Hugging Face model id org/name (default: models/default)");
  cmd->add_option("--model", args->model_dir, "Same as MODEL_DIR");
  add_model_source_flags(cmd, args->source);
  cmd->add_option("--prompt", args->prompt, "Prompt text (streamed answer)");
  cmd->add_flag("--chat", args->chat,
                "Send each text prompt as one user message through the model's chat template (as "
                "vLLM's llm.chat); without it the text is the raw prompt");
  cmd->add_option("--prompt-token-ids", args->prompt_token_ids, "Prompt as token ids");
  cmd->add_option("--prompts", args->prompts_file,
                  "JSONL input: {\"prompt\": ...} or {\"prompt_token_ids\": [...]}, optional "
                  "sampling fields per line");
  cmd->add_option("--output", args->output_file,
                  "JSONL output: token_ids, text, finish_reason per completion");
  add_engine_flags(cmd, args->engine);
  add_sampling_flags(cmd, args->sampling);
  cmd->callback([args, exit_code, cmd] {
    run_generate(*args, cmd);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
