// A tensor-parallel group over CUDA devices 0..world-1 of this process, through NCCL
// (nccl_communicator.cpp).
#pragma once

#include <memory>
#include <vector>

#include "backend/communicator.h"

namespace pagoda {

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world);

}  // namespace pagoda
