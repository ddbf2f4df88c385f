// A tensor-parallel group over CUDA devices first_ordinal..first_ordinal+world-1 of this process (a
// data-parallel replica's devices), through NCCL
// (nccl_communicator.cpp).
#pragma once

#include <memory>
#include <vector>

#include "backend/communicator.h"

namespace pagoda {

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world, int first_ordinal = 0);

}  // namespace pagoda
