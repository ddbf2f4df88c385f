// `pagoda tokenize [MODEL_DIR] TEXT` prints token ids; `--decode` turns ids back into text.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::cli {
namespace {

struct TokenizeArgs {
  std::string model;                // --model DIR: every positional is then text
  std::vector<std::string> inputs;  // [MODEL_DIR] then the text (joined by spaces), or ids with --decode
  bool decode = false;
  bool skip_special = false;
};

// Ids may come as separate arguments or in one argument separated by spaces or commas.
std::vector<int32_t> parse_ids(const std::vector<std::string>& inputs) {
  std::vector<int32_t> ids;
  for (const std::string& arg : inputs) {
    size_t i = 0;
    while (i < arg.size()) {
      if (arg[i] == ' ' || arg[i] == ',' || arg[i] == '\n' || arg[i] == '\t') {
        ++i;
        continue;
      }
      int32_t id = 0;
      auto [end, ec] = std::from_chars(arg.data() + i, arg.data() + arg.size(), id);
      check(ec == std::errc() && id >= 0,
            "--decode expects non-negative token ids separated by spaces or commas; got '" + arg + "'");
      ids.push_back(id);
      i = static_cast<size_t>(end - arg.data());
    }
  }
  return ids;
}

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

// A word that can only have been meant as a directory: a path with no spaces in it.
bool looks_like_path(const std::string& w) {
  const bool rooted = w.rfind('/', 0) == 0 || w.rfind("./", 0) == 0 || w.rfind("../", 0) == 0 || w.rfind('~', 0) == 0;
  return rooted && w.find_first_of(" \t\n") == std::string::npos;
}

// MODEL_DIR is optional, so the first positional is the model directory only when it is one; a
// first word that looks like a path but is no directory is an error rather than text.
std::string take_model_dir(TokenizeArgs& args) {
  if (!args.model.empty() || args.inputs.empty()) return resolve_model_dir(args.model);
  const std::string& first = args.inputs.front();
  if (std::filesystem::is_directory(first)) {
    std::string dir = first;
    args.inputs.erase(args.inputs.begin());
    return dir;
  }
  check(!looks_like_path(first), "model directory '" + first + "' does not exist; to tokenize text that "
                                 "looks like a path, name the model with --model DIR");
  return resolve_model_dir("");
}

void run_tokenize(TokenizeArgs args) {
  auto tok = Tokenizer::load_dir(take_model_dir(args));
  std::string input;
  for (const std::string& s : args.inputs) input += (input.empty() ? "" : " ") + s;
  if (args.inputs.empty()) input = read_stdin();  // no TEXT argument: read standard input
  if (args.decode) {
    std::string text = tok->decode(parse_ids({input}), args.skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  std::string line;
  for (int32_t id : tok->encode(input)) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
}

}  // namespace

void add_tokenize_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids (or ids to text with --decode)");
  auto args = std::make_shared<TokenizeArgs>();
  cmd->add_option("text", args->inputs,
                  "[MODEL_DIR] then the text to encode (or ids with --decode); stdin if no text. The "
                  "first word is MODEL_DIR (a directory holding tokenizer.json) when it names a "
                  "directory; otherwise models/default is used");
  cmd->add_option("--model", args->model, "Directory holding tokenizer.json; every positional is then text");
  cmd->add_flag("--decode", args->decode, "Decode token ids into text");
  cmd->add_flag("--skip-special-tokens", args->skip_special, "With --decode, drop special tokens");
  cmd->callback([args, exit_code] {
    run_tokenize(*args);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
