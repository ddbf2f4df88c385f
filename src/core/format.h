// Human-readable numbers for logs and the command line: "1.50 GiB", "751.6M".
#pragma once

#include <cstdint>
#include <string>

namespace pagoda {

std::string format_bytes(int64_t bytes);  // binary units: "512 B", "12.00 KiB", "1.50 GiB"
std::string format_count(int64_t n);      // "1234", "12.3K", "751.6M", "2.34B"

}  // namespace pagoda
