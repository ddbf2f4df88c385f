#include "cli/commands.h"

#include <cstdio>

#include "cli/suggest.h"
#include "cli/vllm_flags.h"
#include "core/error.h"

namespace pagoda::cli {

int run(int argc, char** argv) {
  CLI::App app{"pagoda: an LLM serving engine (paged KV cache, continuous batching, CUDA and CPU)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pagoda 0.1.0");
  int exit_code = 0;
  add_info_command(app, &exit_code);
  add_tokenize_command(app, &exit_code);
  add_generate_command(app, &exit_code);
  add_bench_command(app, &exit_code);
  add_perplexity_command(app, &exit_code);
  add_serve_command(app, &exit_code);
  // A mistyped command ("pagoda serv") gets suggestions rather than CLI11's "A subcommand is required".
  if (const auto err = unknown_subcommand_error(app, argc, argv)) {
    std::fprintf(stderr, "%s\n", err->c_str());
    return kExitUsage;
  }
  std::vector<std::string> args(argv, argv + argc);
  // vllm serve's command line as vLLM's parser reads it: -tp 1, --max_model_len, --config FILE.
  if (args.size() > 1 && args[1] == "serve") {
    std::vector<std::string> rest = expand_vllm_args(*app.get_subcommand("serve"), {args.begin() + 2, args.end()});
    args.resize(2);
    args.insert(args.end(), rest.begin(), rest.end());
  }
  // A mistyped flag gets suggestions rather than CLI11's "The following arguments were not expected".
  if (const auto err = unknown_flag_error(app, args)) {
    std::fprintf(stderr, "%s\n", err->c_str());
    return kExitUsage;
  }
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    // Prints usage or the parse error. Usage errors exit 2 (as argparse does), --help exits 0.
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  return exit_code;
}

}  // namespace pagoda::cli
