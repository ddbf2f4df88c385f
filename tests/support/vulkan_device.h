// Why this build or machine cannot run the Vulkan backend ("" when it can): the tests that need a
// Vulkan device skip with this reason (CI has Mesa's lavapipe, so there they run).
#pragma once

#include <exception>
#include <string>

#include "backend/backend.h"

namespace pagoda::testing {

inline std::string vulkan_missing() {
  try {
    make_backend("vulkan", 0, "float32");
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace pagoda::testing
