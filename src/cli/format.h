// Human-readable numbers for the command line: 1.19 GB, 596.0M.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda::cli {

std::string format_bytes(int64_t bytes);  // binary units: "12.0 KiB", "18.0 MiB"
std::string format_count(int64_t n);      // "751.6M", "2.34B", "1234"

}  // namespace pagoda::cli
