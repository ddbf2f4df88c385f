// The subcommands of `pagoda`. Each returns the process exit code; user errors throw pagoda::Error.
#pragma once

#include <CLI/CLI.hpp>

namespace pagoda::cli {

int run(int argc, char** argv);

// Each registers its subcommand on `app` and returns the callback that runs it once parsed.
void add_info_command(CLI::App& app, int* exit_code);
void add_tokenize_command(CLI::App& app, int* exit_code);
void add_generate_command(CLI::App& app, int* exit_code);
void add_bench_command(CLI::App& app, int* exit_code);
void add_perplexity_command(CLI::App& app, int* exit_code);
void add_serve_command(CLI::App& app, int* exit_code);
// `pagoda bench json` (registered by add_bench_command).
void add_json_bench(CLI::App* bench, int* exit_code);

}  // namespace pagoda::cli
