#include "server/pooling_runner.h"

#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"

namespace pagoda::server {
namespace {

// "pooling" or "generate" asked for by the flags, or "auto".
std::string runner_asked(const ServerOptions& o) {
  check(o.runner == "auto" || o.runner == "generate" || o.runner == "pooling",
        "--runner '" + o.runner + "' is not supported; choose auto, generate or pooling");
  std::string from_task = "auto";
  if (o.task == "embed" || o.task == "embedding") from_task = "pooling";
  else if (o.task == "generate") from_task = "generate";
  else check(o.task == "auto", "--task '" + o.task + "' is not supported; choose auto, generate or embed");
  check(o.convert == "auto" || o.convert == "none" || o.convert == "embed",
        "--convert '" + o.convert + "' is not supported; choose auto, none or embed");
  std::string runner = o.runner;
  for (const std::string& other : {from_task, std::string(o.convert == "embed" ? "pooling" : "auto")}) {
    if (other == "auto") continue;
    check(runner == "auto" || runner == other,
          "--runner " + o.runner + " contradicts --task " + o.task + " / --convert " + o.convert);
    runner = other;
  }
  return runner;
}

}  // namespace

std::shared_ptr<const PoolingRunner> resolve_runner(const ServerOptions& o, int64_t hidden_size) {
  const std::string asked = runner_asked(o);
  if (asked == "generate") return nullptr;
  auto r = std::make_shared<PoolingRunner>();
  if (asked == "pooling") {
    r->pooling = load_pooling_config(o.model_dir);
  } else {
    std::optional<PoolingConfig> st = load_sentence_transformers_pooling(o.model_dir);
    if (!st) return nullptr;
    r->pooling = *st;
  }
  r->hidden_size = hidden_size;
  LOG_INFO("pooling runner (" << r->pooling.source << "): last-token pooling"
                              << (r->pooling.normalize ? ", L2-normalised" : ", not normalised")
                              << "; /v1/embeddings serves it, the generation routes answer 400");
  return r;
}

void require_generate_runner(const ServerContext& ctx, const std::string& api) {
  if (ctx.pooling) throw bad_request("The model does not support " + api);
}

std::vector<float> embedding_head(const std::vector<float>& pooled, int64_t dimensions, bool normalize) {
  const size_t n = dimensions > 0 ? std::min(pooled.size(), static_cast<size_t>(dimensions)) : pooled.size();
  std::vector<float> out(pooled.begin(), pooled.begin() + static_cast<std::ptrdiff_t>(n));
  if (!normalize) return out;
  double sum = 0;
  for (float v : out) sum += static_cast<double>(v) * v;
  // torch.nn.functional.normalize: x / max(||x||, 1e-12).
  const double inv = 1.0 / std::max(std::sqrt(sum), 1e-12);
  for (float& v : out) v = static_cast<float>(v * inv);
  return out;
}

}  // namespace pagoda::server
