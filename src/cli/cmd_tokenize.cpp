// `pagoda tokenize MODEL_DIR TEXT` prints token ids; `--decode` turns ids back into text.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::cli {
namespace {

struct TokenizeArgs {
  std::string dir;
  std::vector<std::string> inputs;  // the text (joined by spaces), or ids with --decode
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

void run_tokenize(const TokenizeArgs& args) {
  auto tok = Tokenizer::load_dir(args.dir);
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
  cmd->add_option("model_dir", args->dir, "Directory holding tokenizer.json")->required();
  cmd->add_option("text", args->inputs, "Text to encode (or ids with --decode); stdin if absent");
  cmd->add_flag("--decode", args->decode, "Decode token ids into text");
  cmd->add_flag("--skip-special-tokens", args->skip_special, "With --decode, drop special tokens");
  cmd->callback([args, exit_code] {
    run_tokenize(*args);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
