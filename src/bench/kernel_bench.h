// `pagoda bench kernels` (docs/performance.md item 3; also `pagoda bench ops`): the op table's perf cases
// (bench/op_table.h) — each hot op alone, through the Backend interface, at the shapes of the
// models we serve. Reports time, achieved bandwidth (bytes that must move:
// each input read once, each output written once) and arithmetic rate, and both as fractions of
// the device's own ceilings measured first in the same run: a large device-to-device copy (bytes
// read + written) and a large bf16 GEMM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace pagoda {

struct KernelBenchRow {
  std::string kernel;  // "linear", "paged_attention", ...
  std::string shape;   // human-readable shape
  double us = 0;       // median time of one call, microseconds
  double bytes = 0;    // bytes that must move
  double flops = 0;
  double gb_s() const { return us > 0 ? bytes / us * 1e-3 : 0; }
  double tflop_s() const { return us > 0 ? flops / us * 1e-6 : 0; }
};

struct KernelBenchOptions {
  std::string filter;  // run only kernels whose name or shape contains this (empty: all)
  bool quick = false;  // fewer shapes and repetitions
};

struct KernelBenchResult {
  std::string device;
  double copy_gb_s = 0;    // measured device-to-device copy bandwidth (read + write)
  double gemm_tflop_s = 0; // measured bf16 GEMM rate (8192^3 on CUDA)
  std::vector<KernelBenchRow> rows;
};

KernelBenchResult run_kernel_bench(Backend& be, const KernelBenchOptions& opt);
std::string kernel_bench_table(const KernelBenchResult& r);
std::string kernel_bench_json(const KernelBenchResult& r);

}  // namespace pagoda
