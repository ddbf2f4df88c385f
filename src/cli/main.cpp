// pagoda: the command line. Subcommands live in src/cli/cmd_*.cpp; this file only dispatches.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  try {
    return pagoda::cli::run(argc, argv);
  } catch (const pagoda::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 2;
  }
}
