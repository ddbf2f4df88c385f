#include "backend/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <sstream>

namespace pagoda::cuda {

std::string describe_devices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device usable: ") + cudaGetErrorString(err) + "\n";
  std::ostringstream os;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    os << i << ": " << prop.name << ", sm_" << prop.major << prop.minor << ", "
       << (prop.totalGlobalMem >> 30) << " GiB\n";
  }
  return os.str();
}

}  // namespace pagoda::cuda
