// pagoda: the command line. Subcommands live in src/cli/cmd_*.cpp; this file only dispatches and
// turns exceptions into exit codes (core/error.h): user errors 1, usage 2, internal errors 3,
// a device that failed for good 4.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "core/device_error.h"
#include "core/error.h"

namespace {

int internal_error(const char* what) {
  std::fprintf(stderr, "internal error: %s — please report it (with the command line and this message)\n", what);
  return pagoda::kExitInternalError;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return pagoda::cli::run(argc, argv);
  } catch (const pagoda::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return pagoda::kExitUserError;
  } catch (const pagoda::InternalError& e) {
    return internal_error(e.what());
  } catch (const pagoda::FatalDeviceError& e) {
    std::fprintf(stderr, "error: the device failed and cannot be used any more: %s; restart pagoda (check the "
                 "device with nvidia-smi if it happens again)\n", e.what());
    return pagoda::kExitEngineFault;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of host memory; lower --max-num-seqs, --max-model-len or --kv-cache-memory\n");
    return pagoda::kExitUserError;
  } catch (const std::exception& e) {
    return internal_error(e.what());
  }
}
