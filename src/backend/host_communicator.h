// The CPU's communicator group (host_communicator.cpp): ranks are threads of one process.
#pragma once

#include <memory>
#include <vector>

#include "backend/communicator.h"

namespace pagoda {

std::vector<std::unique_ptr<Communicator>> make_host_communicators(int world);

}  // namespace pagoda
