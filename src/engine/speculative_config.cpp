#include "engine/speculative_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda {
namespace {

int32_t int_field(const nlohmann::json& j, const char* key, int32_t fallback, int32_t lo, int32_t hi) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const nlohmann::json& v = j[key];
  check(v.is_number_integer(), std::string("--speculative-config: \"") + key + "\" must be an integer");
  const auto x = v.get<int64_t>();
  check(x >= lo && x <= hi, std::string("--speculative-config: \"") + key + "\" must be in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
  return static_cast<int32_t>(x);
}

}  // namespace

const char* speculative_method_name(SpeculativeMethod m) {
  switch (m) {
    case SpeculativeMethod::None: return "off";
    case SpeculativeMethod::Ngram: return "ngram";
    case SpeculativeMethod::Mtp: return "mtp";
    case SpeculativeMethod::DraftModel: return "draft_model";
    case SpeculativeMethod::Eagle3: return "eagle3";
  }
  return "?";
}

std::string SpeculativeConfig::describe() const {
  if (!enabled()) return "off";
  std::string s = speculative_method_name(method);
  if (method == SpeculativeMethod::DraftModel || method == SpeculativeMethod::Eagle3) s += " " + model;
  s += " k=" + std::to_string(num_speculative_tokens);
  if (method == SpeculativeMethod::Ngram)
    s += " lookup " + std::to_string(prompt_lookup_min) + ".." + std::to_string(prompt_lookup_max);
  if (adaptive) s += " adaptive";
  if (disable_by_batch_size > 0) s += " off past " + std::to_string(disable_by_batch_size) + " sequences";
  return s;
}

SpeculativeConfig parse_speculative_config(const std::string& text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("--speculative-config is not valid JSON: ") + e.what());
  }
  check(j.is_object(), "--speculative-config must be a JSON object, e.g. "
                       "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}'");
  static const char* const kKnown[] = {"method",           "num_speculative_tokens", "prompt_lookup_min",
                                       "prompt_lookup_max", "model",                  "adaptive",
                                       "disable_by_batch_size"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known |= key == k;
    check(known, "--speculative-config: \"" + key +
                     "\" is not supported; pagoda takes method, num_speculative_tokens, prompt_lookup_min, "
                     "prompt_lookup_max, model, disable_by_batch_size and adaptive");
  }
  std::string method;
  if (j.contains("method") && !j["method"].is_null()) {
    check(j["method"].is_string(), "--speculative-config: \"method\" must be a string");
    method = j["method"].get<std::string>();
  }
  if (j.contains("model") && !j["model"].is_null()) {
    check(j["model"].is_string() && !j["model"].get<std::string>().empty(),
          "--speculative-config: \"model\" must be a directory path");
    c.model = j["model"].get<std::string>();
  }
  if (method.empty()) method = c.model.empty() ? "" : "draft_model";
  if (method == "ngram") c.method = SpeculativeMethod::Ngram;
  else if (method == "mtp" || method == "qwen3_next_mtp" || method == "qwen3_5_mtp") c.method = SpeculativeMethod::Mtp;
  else if (method == "draft_model") c.method = SpeculativeMethod::DraftModel;
  else if (method == "eagle3") c.method = SpeculativeMethod::Eagle3;
  else if (method == "eagle")
    throw Error("--speculative-config: method \"eagle\" (EAGLE-1 heads) is not supported yet; pagoda takes EAGLE-3 "
                "heads: {\"method\": \"eagle3\", \"model\": DIR, \"num_speculative_tokens\": k}");
  else
    throw Error("--speculative-config: method \"" + method +
                "\" is not supported; choose \"ngram\", \"mtp\", \"eagle3\" (with \"model\": the head's "
                "directory) or a draft model (\"model\": DIR)");
  const bool takes_model = c.method == SpeculativeMethod::DraftModel || c.method == SpeculativeMethod::Eagle3;
  check(!takes_model || !c.model.empty(), "--speculative-config: method \"" + method + "\" needs \"model\": the " +
                                              (c.method == SpeculativeMethod::Eagle3 ? "EAGLE-3 head's" : "draft model's") +
                                              " directory");
  check(takes_model || c.model.empty(),
        "--speculative-config: \"model\" is only for a draft model or an EAGLE-3 head; method \"" + method +
            "\" takes none");
  check(j.contains("num_speculative_tokens"), "--speculative-config: \"num_speculative_tokens\" is required");
  c.num_speculative_tokens = int_field(j, "num_speculative_tokens", 0, 1, kMaxSpeculativeTokens);
  c.disable_by_batch_size = int_field(j, "disable_by_batch_size", 0, 0, 1 << 20);
  c.adaptive = true;
  if (j.contains("adaptive") && !j["adaptive"].is_null()) {
    check(j["adaptive"].is_boolean(), "--speculative-config: \"adaptive\" must be true or false");
    c.adaptive = j["adaptive"].get<bool>();
  }
  const bool ngram = c.method == SpeculativeMethod::Ngram;
  check(ngram || (!j.contains("prompt_lookup_min") && !j.contains("prompt_lookup_max")),
        "--speculative-config: prompt_lookup_min / prompt_lookup_max are for method \"ngram\" only");
  if (ngram) {
    // vLLM's defaults: one bound alone sets both; neither = 5 and 5.
    const int32_t mx = int_field(j, "prompt_lookup_max", 0, 1, kMaxPromptLookup);
    const int32_t mn = int_field(j, "prompt_lookup_min", 0, 1, kMaxPromptLookup);
    c.prompt_lookup_max = mx ? mx : (mn ? mn : 5);
    c.prompt_lookup_min = mn ? mn : (mx ? mx : 5);
    check(c.prompt_lookup_min <= c.prompt_lookup_max,
          "--speculative-config: prompt_lookup_min (" + std::to_string(c.prompt_lookup_min) +
              ") must be <= prompt_lookup_max (" + std::to_string(c.prompt_lookup_max) + ")");
  }
  return c;
}

}  // namespace pagoda
