// A streaming-read bandwidth probe for CPU runs: the ceiling a bandwidth-bound decode is measured
// against, taken in the same process just before, since a shared machine's bandwidth varies from
// minute to minute.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda {

// GB/s (1e9 bytes) summing a buffer far larger than the caches with `threads` threads (each its own
// slice), best of `reps` passes.
double read_bandwidth_gbs(int threads, int64_t bytes = int64_t{512} << 20, int reps = 5);

// This process's resident memory (VmRSS), in bytes; 0 where /proc is not there.
int64_t resident_bytes();

}  // namespace pagoda
