// A tensor-parallel group over CUDA devices first_ordinal..first_ordinal+world-1 of this process (a
// data-parallel replica's devices), through NCCL
// (nccl_communicator.cpp).
#pragma once

#include <memory>
#include <vector>

#include "backend/communicator.h"

namespace pagoda {

// `custom_all_reduce`: sums that fit a slot through peer memory (p2p_all_reduce.h) where the devices
// allow it (serve's --disable-custom-all-reduce turns it off).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world, int first_ordinal = 0,
                                                                   bool custom_all_reduce = true);

}  // namespace pagoda
