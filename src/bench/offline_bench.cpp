#include "bench/offline_bench.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda {

OfflineBenchPoint run_offline_point(Engine& engine, const std::string& name, int32_t batch,
                                    int32_t prompt_len, int32_t gen_len, uint64_t seed,
                                    const std::vector<int32_t>* fixed_prompt,
                                    std::shared_ptr<structured::GrammarRuntime> grammar) {
  if (fixed_prompt) prompt_len = static_cast<int32_t>(fixed_prompt->size());
  check(batch > 0 && prompt_len > 0 && gen_len > 0, "bench: batch, prompt and gen lengths must be > 0");
  std::mt19937_64 rng(seed);
  // Token ids from the middle of the vocabulary: real text tokens, no special ids.
  const int64_t vocab = engine.model_config().vocab_size;
  std::uniform_int_distribution<int32_t> pick(static_cast<int32_t>(vocab / 8),
                                              static_cast<int32_t>(vocab / 2));
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = gen_len;
  p.grammar = std::move(grammar);
  std::set<int64_t> waiting_first;
  for (int32_t b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (auto& t : prompt) t = pick(rng);
    if (fixed_prompt) prompt = *fixed_prompt;
    waiting_first.insert(engine.add_request(std::move(prompt), p));
  }
  const EngineStats spec0 = engine.core().stats();
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto t_first = t0;
  bool all_started = false;
  StepTimes at_first;
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step())
      if (!o.new_token_ids.empty()) waiting_first.erase(o.id);
    if (!all_started && waiting_first.empty()) {  // the prefill phase ends with the last first token
      t_first = clock::now();
      at_first = engine.step_times();
      all_started = true;
    }
  }
  const auto t1 = clock::now();
  const StepTimes at_end = engine.step_times();
  OfflineBenchPoint pt;
  pt.name = name;
  pt.batch = batch;
  pt.prompt_len = prompt_len;
  pt.gen_len = gen_len;
  pt.prefill_s = std::chrono::duration<double>(t_first - t0).count();
  pt.decode_s = std::chrono::duration<double>(t1 - t_first).count();
  pt.decode_steps = at_end.steps - at_first.steps;
  pt.decode_host_s = at_end.host_s() - at_first.host_s();
  const EngineStats spec1 = engine.core().stats();
  pt.spec_drafts = spec1.spec_num_drafts - spec0.spec_num_drafts;
  pt.spec_draft_tokens = spec1.spec_num_draft_tokens - spec0.spec_num_draft_tokens;
  pt.spec_accepted = spec1.spec_num_accepted_tokens - spec0.spec_num_accepted_tokens;
  return pt;
}

std::string offline_table(const std::vector<OfflineBenchPoint>& points) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "| %-18s | %5s | %5s | %5s | %10s | %12s | %10s | %12s | %12s | %8s | %8s |\n",
                "point", "B", "P", "G", "prefill s", "prefill tok/s", "decode s", "decode tok/s",
                "total tok/s", "step ms", "host ms");
  s += line;
  s += "|--------------------|-------|-------|-------|------------|---------------|------------|--------------|--------------|"
       "----------|----------|\n";
  for (const auto& p : points) {
    std::snprintf(line, sizeof line,
                  "| %-18s | %5d | %5d | %5d | %10.3f | %13.1f | %10.3f | %12.1f | %12.1f | %8.3f | %8.3f |\n",
                  p.name.c_str(), p.batch, p.prompt_len, p.gen_len, p.prefill_s, p.prefill_tok_s(),
                  p.decode_s, p.decode_tok_s(), p.total_tok_s(), p.step_ms(), p.host_ms());
    s += line;
  }
  bool spec = false;
  for (const auto& p : points) spec |= p.spec_drafts > 0;
  if (!spec) return s;
  s += "\nspeculative decoding:\n\n| point              | drafts | draft tokens | accepted | acceptance rate | mean acceptance length |\n"
       "|--------------------|--------|--------------|----------|-----------------|------------------------|\n";
  for (const auto& p : points) {
    std::snprintf(line, sizeof line, "| %-18s | %6lld | %12lld | %8lld | %14.1f%% | %22.2f |\n", p.name.c_str(),
                  static_cast<long long>(p.spec_drafts), static_cast<long long>(p.spec_draft_tokens),
                  static_cast<long long>(p.spec_accepted),
                  p.spec_draft_tokens > 0 ? 100.0 * double(p.spec_accepted) / double(p.spec_draft_tokens) : 0.0,
                  p.mean_acceptance_length());
    s += line;
  }
  return s;
}

std::string offline_json(const std::vector<OfflineBenchPoint>& points, const std::string& model,
                         const std::string& device) {
  nlohmann::json j;
  j["model"] = model;
  j["device"] = device;
  for (const auto& p : points)
    j["points"].push_back({{"name", p.name},
                           {"batch", p.batch},
                           {"prompt_len", p.prompt_len},
                           {"gen_len", p.gen_len},
                           {"prefill_s", p.prefill_s},
                           {"decode_s", p.decode_s},
                           {"prefill_tok_s", p.prefill_tok_s()},
                           {"decode_tok_s", p.decode_tok_s()},
                           {"total_tok_s", p.total_tok_s()},
                           {"decode_steps", p.decode_steps},
                           {"decode_step_ms", p.step_ms()},
                           {"decode_host_ms_per_step", p.host_ms()},
                           {"spec_num_drafts", p.spec_drafts},
                           {"spec_num_draft_tokens", p.spec_draft_tokens},
                           {"spec_num_accepted_tokens", p.spec_accepted},
                           {"spec_mean_acceptance_length", p.mean_acceptance_length()}});
  return j.dump(2);
}

}  // namespace pagoda
