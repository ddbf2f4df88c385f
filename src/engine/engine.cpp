#include "engine/engine.h"

#include <filesystem>

#include "core/error.h"

namespace pagoda {

std::unique_ptr<Tokenizer> load_engine_tokenizer(const std::string& model_dir, const std::string& tokenizer_dir) {
  const std::string& dir = tokenizer_dir.empty() ? model_dir : tokenizer_dir;
  const bool has = std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json");
  if (!tokenizer_dir.empty()) check(has, "--tokenizer " + dir + " has no tokenizer.json");
  return has ? Tokenizer::load_dir(dir) : nullptr;
}

Engine::Engine(const std::string& model_dir, const EngineConfig& config, std::shared_ptr<LoraCatalog> shared_loras) {
  tokenizer_ = load_engine_tokenizer(model_dir, config.tokenizer_dir);  // before the weights: fails fast
  core_ = std::make_unique<EngineCore>(model_dir, config, std::move(shared_loras));
  processor_ = std::make_unique<OutputProcessor>(tokenizer_.get());
  stats_ = core_->stats();
}

Engine::~Engine() = default;

int64_t Engine::add_request(std::vector<int32_t> prompt, SamplingParams params) {
  processor_->validate(params);
  const SamplingParams kept = params;  // cheap: stop strings and logit bias are shared
  const int64_t id = core_->add_request(std::move(prompt), std::move(params));
  processor_->add_request(id, kept);
  return id;
}

int64_t Engine::add_embedding_request(std::vector<int32_t> prompt) {
  const int64_t id = core_->add_embedding_request(std::move(prompt));
  processor_->add_request(id, SamplingParams{});
  return id;
}

std::vector<RequestOutput> Engine::step() {
  EngineCoreOutputs core_out = core_->step();
  OutputProcessor::Result r = processor_->process(core_out.outputs);
  for (int64_t id : r.reqs_to_abort) core_->abort(id);
  stats_ = std::move(core_out.stats);
  core_->refresh_state(stats_);  // after the aborts
  return std::move(r.outputs);
}

}  // namespace pagoda
