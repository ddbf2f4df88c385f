// The `pagoda` binary as a user runs it: exit codes, what it prints, and what it says when wrong.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/run_command.h"
#include "core/build_paths.h"

namespace {

using pagoda::testing::CommandResult;

CommandResult pagoda(const std::string& args) {
  return pagoda::testing::run_command(std::string(PAGODA_BINARY) + " " + args + " 2>&1");
}

std::string fixture(const std::string& name) {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

nlohmann::json reference(const std::string& name) {
  std::ifstream in(fixture(name) + "/reference.json");
  return nlohmann::json::parse(in);
}

// The integer printed after `label` on its own line of `pagoda info`.
long long info_value(const std::string& out, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(label + R"( +(\d+))"))) return -1;
  return std::stoll(m[1]);
}

TEST(CliInfo, Qwen3ShardedCheckpoint) {
  const CommandResult r = pagoda("info " + fixture("qwen3-tiny-mha-sharded"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto ref = reference("qwen3-tiny-mha-sharded");
  const auto& c = ref["config"];
  EXPECT_NE(r.out.find("Qwen3ForCausalLM"), std::string::npos);
  EXPECT_NE(r.out.find("full_attention x" + std::to_string(c["num_hidden_layers"].get<int>())),
            std::string::npos) << r.out;
  EXPECT_EQ(info_value(r.out, "parameters"), ref["n_params"].get<long long>());
  // K and V, every layer, kv heads x head_dim, fp32.
  const long long kv = 2LL * c["num_hidden_layers"].get<int>() * c["num_key_value_heads"].get<int>() *
                       c["head_dim"].get<int>() * 4;
  EXPECT_EQ(info_value(r.out, "kv cache / token"), kv);
  EXPECT_EQ(info_value(r.out, "state / sequence"), 0);
}

// `pagoda info` resolves the dtypes as serve would (engine_config.h), without a GPU: the fp32
// checkpoint on cuda runs in bfloat16 by default, and --dtype float32 keeps the KV cache fp32.
TEST(CliInfo, ShowsTheResolvedDtypesForADevice) {
  const auto ref = reference("qwen3-tiny-mha-sharded");
  const auto& c = ref["config"];
  const long long kv_elems = 2LL * c["num_hidden_layers"].get<int>() * c["num_key_value_heads"].get<int>() *
                             c["head_dim"].get<int>();
  CommandResult r = pagoda("info " + fixture("qwen3-tiny-mha-sharded") + " --device cuda --dtype float32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("on cuda: dtype float32 (activations float32), kv cache float32"), std::string::npos) << r.out;
  EXPECT_EQ(info_value(r.out, "kv cache / token"), kv_elems * 4);
  r = pagoda("info " + fixture("qwen3-tiny-mha-sharded") + " --device cuda");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("on cuda: dtype bfloat16 (activations bfloat16), kv cache bfloat16"), std::string::npos)
      << r.out;
  EXPECT_EQ(info_value(r.out, "kv cache / token"), kv_elems * 2);
  r = pagoda("info " + fixture("qwen3-tiny-mha-sharded") + " --device cpu --dtype bfloat16");
  EXPECT_EQ(r.code, 1) << r.out;  // a user error: the CPU computes in float32
  EXPECT_NE(r.out.find("error: --dtype bfloat16"), std::string::npos) << r.out;
}

TEST(CliInfo, Qwen35MultimodalCheckpoint) {
  const CommandResult r = pagoda("info " + fixture("qwen3_5-tiny-mm"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto ref = reference("qwen3_5-tiny-mm");
  const auto& t = ref["config"]["text_config"];
  EXPECT_NE(r.out.find("Qwen3_5ForConditionalGeneration"), std::string::npos);
  EXPECT_NE(r.out.find("linear_attention x3, full_attention x1"), std::string::npos) << r.out;
  // Language model + skipped vision tower = every parameter transformers counted.
  EXPECT_EQ(info_value(r.out, "parameters") + info_value(r.out, "skipped"),
            ref["n_params"].get<long long>());
  const long long hk = t["linear_num_key_heads"], hv = t["linear_num_value_heads"],
                  dk = t["linear_key_head_dim"], dv = t["linear_value_head_dim"],
                  kernel = t["linear_conv_kernel_dim"];
  const long long conv_dim = 2 * hk * dk + hv * dv;
  const long long per_gdn_layer = conv_dim * (kernel - 1) * 2 /*bf16*/ + hv * dk * dv * 4;
  EXPECT_EQ(info_value(r.out, "state / sequence"), 3 * per_gdn_layer);
  const long long kv = 2LL * 1 * t["num_key_value_heads"].get<int>() * t["head_dim"].get<int>() * 2;
  EXPECT_EQ(info_value(r.out, "kv cache / token"), kv);
}

TEST(CliInfo, Qwen35TextOnlyCheckpoint) {
  const CommandResult r = pagoda("info " + fixture("qwen3_5-tiny-text"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Qwen3_5ForCausalLM"), std::string::npos);
  // Its layer_types are written out: linear, full, linear, linear.
  EXPECT_NE(r.out.find("linear_attention x1, full_attention x1, linear_attention x2"),
            std::string::npos) << r.out;
  EXPECT_EQ(info_value(r.out, "parameters"), reference("qwen3_5-tiny-text")["n_params"].get<long long>());
}

TEST(CliInfo, NonsensePathIsAClearError) {
  const CommandResult r = pagoda("info /no/such/model");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("/no/such/model"), std::string::npos) << r.out;
}

// A copy of a fixture whose files the test then damages; one folder per test, since ctest runs
// tests in parallel.
std::string damaged_copy(const std::string& name) {
  namespace fs = std::filesystem;
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const fs::path dir = fs::path(::testing::TempDir()) / ("pagoda_damaged_" + test + "_" + name);
  fs::remove_all(dir);
  fs::copy(fixture(name), dir, fs::copy_options::recursive);
  return dir.string();
}

TEST(CliInfo, TruncatedSafetensorsIsAClearErrorWithExitCode1) {
  const std::string dir = damaged_copy("qwen3-tiny-tied");
  const auto file = std::filesystem::path(dir) / "model.safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  const CommandResult r = pagoda("info " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
}

TEST(CliInfo, HugeHeaderLengthIsAClearErrorWithExitCode1) {
  const std::string dir = damaged_copy("qwen3-tiny-tied");
  std::fstream f(std::filesystem::path(dir) / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  const unsigned char huge[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
  f.write(reinterpret_cast<const char*>(huge), 8);
  f.close();
  const CommandResult r = pagoda("info " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("header"), std::string::npos) << r.out;
}

TEST(CliTokenize, MalformedTokenizerJsonIsAClearErrorWithExitCode1) {
  const std::string dir = damaged_copy("qwen3-tiny-tied");
  std::ofstream(std::filesystem::path(dir) / "tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": ";
  const CommandResult r = pagoda("tokenize " + dir + " hello");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer.json"), std::string::npos) << r.out;
}

TEST(CliTokenize, RealQwen3TokenizerRoundTrip) {
  const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen3-tokenizer";
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << "run tools/fetch_test_data.sh";
  CommandResult r = pagoda("tokenize " + dir + " 'Hello world'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "9707 1879\n");  // HF tokenizers: "Hello" 9707, "Ġworld" 1879
  r = pagoda("tokenize " + dir + " --decode 9707 1879");
  EXPECT_EQ(r.out, "Hello world\n");
}

TEST(CliGenerate, PrintsTheReferenceTokens) {
  const auto ref = reference("qwen3-tiny-tied");
  const auto& c = ref["cases"][2];
  std::string ids;
  for (int id : c["prompt_ids"]) {
    ids += ' ';
    ids += std::to_string(id);
  }
  const CommandResult r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --temperature 0 --ignore-eos " +
                       "--max-tokens 32 --max-model-len 512 --prompt-token-ids" + ids);
  ASSERT_EQ(r.code, 0) << r.out;
  std::string expect;
  for (int id : c["generated_ids"]) {
    expect += std::to_string(id);
    expect += ' ';
  }
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out;
}

TEST(CliGenerate, BatchFileInBatchFileOut) {
  const auto ref = reference("qwen3-tiny-tied");
  const std::string in = ::testing::TempDir() + "/pagoda_in.jsonl", out = ::testing::TempDir() + "/pagoda_out.jsonl";
  {
    std::ofstream f(in);
    for (int i = 0; i < 4; ++i)
      f << nlohmann::json{{"prompt_token_ids", ref["cases"][i]["prompt_ids"]}, {"max_tokens", 8 + i}}.dump() << "\n";
  }
  const CommandResult r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --temperature 0 --ignore-eos " +
                       "--max-model-len 512 --prompts " + in + " --output " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream f(out);
  std::string line;
  int i = 0;
  for (; std::getline(f, line); ++i) {
    const auto j = nlohmann::json::parse(line);
    const auto& gen = ref["cases"][i]["generated_ids"];
    EXPECT_EQ(j["index"], i);
    EXPECT_EQ(j["finish_reason"], "length");
    EXPECT_EQ(j["token_ids"], nlohmann::json(std::vector<int>(gen.begin(), gen.begin() + 8 + i)));
  }
  EXPECT_EQ(i, 4);
}

TEST(CliGenerate, SaysWhatIsWrong) {
  CommandResult r = pagoda("generate /no/such/dir --prompt hello");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("/no/such/dir"), std::string::npos) << r.out;
  r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --prompt hello");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("no tokenizer.json"), std::string::npos) << r.out;
  r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --prompt-token-ids 5 --temperature -1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("temperature"), std::string::npos) << r.out;
  r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --no-such-flag");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--no-such-flag"), std::string::npos) << r.out;
  r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --prompt-token-ids 5 --device tpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("cpu, cuda or vulkan"), std::string::npos) << r.out;
  r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --prompt-token-ids 5 --dtype int8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("choose auto, bfloat16 or float32"), std::string::npos) << r.out;
  // The CPU backend computes in fp32: asking it for bf16 activations is an error, not a silent fp32 run.
  r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --prompt-token-ids 5 --dtype bfloat16");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("CPU backend computes in float32"), std::string::npos) << r.out;
}

TEST(CliGenerate, Float32DtypeOnTheCpuIsTheDefaultMath) {
  const auto ref = reference("qwen3-tiny-tied");
  const auto& c = ref["cases"][1];
  std::string ids, expect;
  for (int id : c["prompt_ids"]) {
    ids += ' ';
    ids += std::to_string(id);
  }
  for (int id : c["generated_ids"]) {
    expect += std::to_string(id);
    expect += ' ';
  }
  const CommandResult r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --dtype float32 --temperature 0 " +
                                 "--ignore-eos --max-tokens 32 --max-model-len 512 --prompt-token-ids" + ids);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out;
}

// --- the shipped default model (models/default), as a new user meets it ---------------------------

std::string default_model() { return std::string(PAGODA_SOURCE_DIR) + "/models/default"; }

nlohmann::json default_model_json(const std::string& file) {
  std::ifstream in(default_model() + "/" + file);
  return nlohmann::json::parse(in);
}

TEST(CliInfo, DefaultsToTheShippedModel) {
  const CommandResult r = pagoda("info");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto config = default_model_json("config.json");
  EXPECT_NE(r.out.find(config["architectures"][0].get<std::string>()), std::string::npos) << r.out;
  EXPECT_EQ(info_value(r.out, "vocab"), config["vocab_size"].get<long long>()) << r.out;
  EXPECT_EQ(info_value(r.out, "parameters"), default_model_json("training.json")["parameters"].get<long long>());
  EXPECT_EQ(pagoda("info --model " + default_model()).out, pagoda("info " + default_model()).out);
}

// `printf TEXT | pagoda tokenize [DIR]`: the text from standard input.
CommandResult stdin_tokenize(const std::string& text, const std::string& dir) {
  return pagoda::testing::run_command("printf '%s' '" + text + "' | " + PAGODA_BINARY + " tokenize " + dir + " 2>&1");
}

TEST(CliTokenize, DefaultsToTheShippedModel) {
  // The same ids with MODEL_DIR given, left out, or given as --model.
  const CommandResult named = pagoda("tokenize " + default_model() + " 'In the beginning'");
  ASSERT_EQ(named.code, 0) << named.out;
  ASSERT_NE(named.out, "\n");
  EXPECT_EQ(pagoda("tokenize 'In the beginning'").out, named.out);
  EXPECT_EQ(pagoda("tokenize In the beginning").out, named.out);  // words joined by spaces
  EXPECT_EQ(pagoda("tokenize --model " + default_model() + " 'In the beginning'").out, named.out);
  EXPECT_EQ(stdin_tokenize("In the beginning", "").out, named.out);
  const CommandResult back = pagoda("tokenize --decode " + named.out.substr(0, named.out.size() - 1));
  EXPECT_EQ(back.code, 0) << back.out;
  EXPECT_EQ(back.out, "In the beginning\n");
  // The special tokens of tokenizer_config.json, read by the test: recognised in the text.
  const auto cfg = default_model_json("tokenizer_config.json");
  std::string im_end;
  for (const auto& [id, tok] : cfg["added_tokens_decoder"].items())
    if (tok["content"] == "<|im_end|>") im_end = id;
  ASSERT_FALSE(im_end.empty());
  EXPECT_EQ(pagoda("tokenize '<|im_end|>'").out, im_end + "\n");
}

TEST(CliTokenize, APathThatIsNoDirectoryIsAnError) {
  CommandResult r = pagoda("tokenize /no/such/model hello");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("'/no/such/model' does not exist"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--model"), std::string::npos) << r.out;
  // With --model every word is text, path-like or not.
  r = pagoda("tokenize --model " + default_model() + " /no/such/model");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, stdin_tokenize("/no/such/model", default_model()).out);
}

TEST(CliCommands, UnknownCommandsGetSuggestions) {
  CommandResult r = pagoda("serv");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'serv' is not a command. Did you mean 'serve'?"), std::string::npos) << r.out;
  r = pagoda("genrate --prompt hi");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("Did you mean 'generate'?"), std::string::npos) << r.out;
  r = pagoda("bench serv --base-url http://127.0.0.1:1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("pagoda bench: 'serv' is not a command. Did you mean 'serve'?"), std::string::npos) << r.out;
  r = pagoda("xyzzy");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.find("Did you mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("info, tokenize, generate, bench, perplexity, serve"), std::string::npos) << r.out;
  r = pagoda("");  // no command at all: CLI11's usage error, still 2
  EXPECT_EQ(r.code, 2) << r.out;
  r = pagoda("--version");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(CliGenerate, ChatRendersThePromptThroughTheTemplate) {
  // training.json's greedy continuation of the chat-rendered "Who are you?", made by the training
  // script with PyTorch: `--chat` must render the same prompt and the engine continue it the same.
  const auto samples = default_model_json("training.json")["samples"];
  const std::string prompt = "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n";
  std::string expect;
  for (const auto& s : samples)
    if (s["prompt"] == prompt) expect = s["greedy"];
  ASSERT_FALSE(expect.empty());
  ASSERT_EQ(expect.substr(expect.size() - 10), "<|im_end|>");
  expect.resize(expect.size() - 10);  // the stop token ends the answer, not part of its text
  const CommandResult r = pagoda("generate --chat --prompt 'Who are you?' --temperature 0 --max-tokens 64");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\n" + expect + "\n"), std::string::npos) << r.out;
  // The rendered prompt is training.json's prompt text: as many tokens as that text has.
  const std::string ref_ids = stdin_tokenize(prompt, "").out;
  const long long ref_count = std::count(ref_ids.begin(), ref_ids.end(), ' ') + 1;
  EXPECT_NE(r.out.find(std::to_string(ref_count) + " prompt tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(finish: stop)"), std::string::npos) << r.out;

  // The batch file's text prompts go through the template the same way.
  const std::string in = ::testing::TempDir() + "/pagoda_chat_in.jsonl", out = ::testing::TempDir() + "/pagoda_chat_out.jsonl";
  std::ofstream(in) << R"({"prompt": "Who are you?", "temperature": 0, "max_tokens": 64})" << "\n";
  const CommandResult b = pagoda("generate --chat --prompts " + in + " --output " + out);
  ASSERT_EQ(b.code, 0) << b.out;
  std::ifstream f(out);
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["text"], expect);
  EXPECT_EQ(j["num_prompt_tokens"], ref_count);
  EXPECT_EQ(j["finish_reason"], "stop");
}

// Issue 13's "Who was Moses?": without --chat the raw text ends at once on this chat model.
TEST(CliGenerate, ChatGivesAnAnswerWhereTheRawPromptStops) {
  const std::regex generated(R"((\d+) generated \(finish)");
  std::smatch m;
  const CommandResult chat = pagoda("generate --chat --prompt 'Who was Moses?' --temperature 0 --max-tokens 64");
  ASSERT_EQ(chat.code, 0) << chat.out;
  ASSERT_TRUE(std::regex_search(chat.out, m, generated)) << chat.out;
  EXPECT_GT(std::stoi(m[1]), 5) << chat.out;
}

TEST(CliGenerate, ChatSaysWhatIsWrong) {
  CommandResult r = pagoda("generate " + fixture("qwen3-tiny-tied") + " --chat --prompt hello");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("has no chat template"), std::string::npos) << r.out;
  r = pagoda("generate --chat --prompt-token-ids 5 6");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-token-ids"), std::string::npos) << r.out;
}

TEST(CliGenerate, HelpAndRunShowTheSamplingDefaultsUsed) {
  const CommandResult help = pagoda("generate --help");
  ASSERT_EQ(help.code, 0) << help.out;
  for (const char* flag : {"--temperature", "--top-p", "--top-k"}) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(help.out, m, std::regex(std::string(flag) + "[^\n]*"))) << flag;
    EXPECT_NE(m.str().find("generation_config.json"), std::string::npos) << m.str();
    EXPECT_EQ(m.str().find("=1"), std::string::npos) << m.str();  // no fixed "=1" default any more
  }
  // A run says the values it samples with: generation_config.json's, read here by the test.
  const auto gen = default_model_json("generation_config.json");
  std::ostringstream want;
  want << "sampling: temperature " << gen["temperature"].get<double>() << ", top_p " << gen["top_p"].get<double>()
       << ", top_k " << gen["top_k"].get<int>();
  CommandResult r = pagoda("generate --prompt 'In the beginning' --max-tokens 4");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(want.str()), std::string::npos) << r.out;
  r = pagoda("generate --prompt 'In the beginning' --max-tokens 4 --temperature 0.25 --top-k 3");
  std::ostringstream flags;  // flags given win; the rest stay the model's
  flags << "sampling: temperature 0.25, top_p " << gen["top_p"].get<double>() << ", top_k 3";
  EXPECT_NE(r.out.find(flags.str()), std::string::npos) << r.out;
}

}  // namespace

namespace {

// The FP8 fixture's header (JSON text) and where it starts: damage is done in place, keeping the
// header's length, so the file stays a well-formed safetensors file.
struct Fp8Header {
  std::string path, text;
};

Fp8Header fp8_header(const std::string& dir) {
  Fp8Header h{dir + "/model.safetensors", {}};
  std::ifstream in(h.path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  h.text.resize(len);
  in.read(h.text.data(), static_cast<std::streamsize>(len));
  return h;
}

void write_header(const Fp8Header& h) {
  std::fstream f(h.path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(8);
  f.write(h.text.data(), static_cast<std::streamsize>(h.text.size()));
}

CommandResult info_of(const std::string& dir) { return pagoda("info " + dir); }

CommandResult generate_one(const std::string& dir) {
  return pagoda("generate " + dir + " --temperature 0 --max-tokens 2 --max-model-len 64 --prompt-token-ids 5 6 7");
}

}  // namespace

// Issue 31: an FP8 checkpoint whose scales are missing, misshaped or not finite stops the load with
// exit code 1 and a message naming the tensor (never a crash or a silently wrong model).
TEST(CliFp8, InfoNamesTheFormatAndItsScales) {
  const CommandResult r = info_of(fixture("qwen3-tiny-fp8-block"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("quantization       fp8 e4m3 weights, 32x32 block scales (fp8 checkpoint)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("F8_E4M3 67584"), std::string::npos) << r.out;  // the FP8 parameters, one byte each
  // Every line of the device list ends: a failed CUDA probe must not run into the Vulkan line.
  EXPECT_EQ(r.out.find("versionvulkan"), std::string::npos) << r.out;
}

TEST(CliFp8, BadScalesExitOneNamingTheTensor) {
  const std::string scale = "model.layers.0.mlp.down_proj.weight_scale_inv";
  {
    SCOPED_TRACE("missing");
    const std::string dir = damaged_copy("qwen3-tiny-fp8-block");
    Fp8Header h = fp8_header(dir);
    const size_t at = h.text.find("\"" + scale + "\"");
    ASSERT_NE(at, std::string::npos);
    h.text.replace(at + 1 + scale.size() - 9, 9, "scale_xxx");  // _scale_inv → _scale_xxx: gone
    write_header(h);
    const CommandResult r = generate_one(dir);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("'model.layers.0.mlp.down_proj.weight' has no scale tensor"), std::string::npos) << r.out;
  }
  {
    SCOPED_TRACE("misshaped");
    const std::string dir = damaged_copy("qwen3-tiny-fp8-block");
    Fp8Header h = fp8_header(dir);
    const nlohmann::json j = nlohmann::json::parse(h.text);
    ASSERT_EQ(j.at(scale).at("shape"), nlohmann::json::array({2, 4}));
    const size_t at = h.text.find("[2,4]", h.text.find("\"" + scale + "\""));
    ASSERT_NE(at, std::string::npos);
    h.text.replace(at, 5, "[4,2]");  // the same 8 scales, in the wrong grid
    write_header(h);
    const CommandResult r = generate_one(dir);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("'" + scale + "' has shape [4, 2]"), std::string::npos) << r.out;
  }
  {
    SCOPED_TRACE("not finite");
    const std::string dir = damaged_copy("qwen3-tiny-fp8-block");
    const Fp8Header h = fp8_header(dir);
    const nlohmann::json j = nlohmann::json::parse(h.text);
    const uint64_t begin = j.at(scale).at("data_offsets").at(0).get<uint64_t>();
    std::fstream f(h.path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(8 + h.text.size() + begin + 4));  // the second scale
    const float inf = INFINITY;
    f.write(reinterpret_cast<const char*>(&inf), 4);
    f.close();
    const CommandResult r = generate_one(dir);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("'" + scale + "' holds a non-finite value"), std::string::npos) << r.out;
  }
}
