// `pagoda bench serve --plot FILE.svg`: the latency distributions (TTFT, TPOT, ITL, end-to-end) as
// four empirical CDFs, each marked at its median and p99. Plain SVG, no dependencies.
#pragma once

#include <string>
#include <vector>

#include "bench/serve_stats.h"

namespace pagoda::bench {

std::string latency_svg(const std::vector<RequestResult>& results, const std::string& title);

}  // namespace pagoda::bench
