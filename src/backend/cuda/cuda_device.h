// What the CUDA runtime sees: used by `pagoda info` and start-up logs. Defined only in CUDA builds.
#pragma once

#include <string>

namespace pagoda::cuda {

// One line per visible device ("0: NVIDIA H200, sm_90, 139 GiB"), or why none is usable.
std::string describe_devices();

}  // namespace pagoda::cuda
