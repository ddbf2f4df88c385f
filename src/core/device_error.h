// A failure that cannot be rolled back (beside core/error.h's Error and InternalError): the device
// can no longer be trusted — a CUDA sticky error, a device lost. An engine step that throws anything
// else fails its own requests and the engine goes on; this one ends the engine: `serve` answers what
// is in flight, turns /health to 503 and exits kExitEngineFault so that a supervisor restarts it
// (docs/faults.md). Not an Error: code that turns user mistakes into 400s must not swallow it.
#pragma once

#include <stdexcept>
#include <string>

namespace pagoda {

class FatalDeviceError : public std::runtime_error {
 public:
  explicit FatalDeviceError(const std::string& what) : std::runtime_error(what) {}
};

// Exit code of the `pagoda` binary after a FatalDeviceError (README, "Commands"; the others are
// in core/error.h).
inline constexpr int kExitEngineFault = 4;

}  // namespace pagoda
