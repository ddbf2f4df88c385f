#include "io/quantization.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

void read_block(const json& v, const std::string& where, WeightQuantization& q) {
  check(v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer() &&
            v[0].get<int64_t>() > 0 && v[1].get<int64_t>() > 0,
        "config.json: " + where + " must be two positive integers [rows, columns]");
  q.block_n = v[0].get<int64_t>();
  q.block_k = v[1].get<int64_t>();
}

void read_names(const json& q, const char* key, WeightQuantization& out) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return;
  check(it->is_array(), std::string("config.json: quantization_config.") + key + " must be a list of module names");
  for (const json& n : *it) {
    check(n.is_string(), std::string("config.json: quantization_config.") + key + " must hold strings");
    out.not_converted.push_back(n.get<std::string>());
  }
}

// compressed-tensors: every config group must quantize weights to 8-bit floats (FP8); activations
// are left to pagoda (bf16: W8A16), whatever the group says about them.
void read_compressed_tensors(const json& qc, WeightQuantization& q) {
  const auto groups = qc.find("config_groups");
  check(groups != qc.end() && groups->is_object() && !groups->empty(),
        "config.json: quantization_config.config_groups is missing (compressed-tensors)");
  for (const auto& [name, g] : groups->items()) {
    const std::string where = "quantization_config.config_groups." + name + ".weights";
    const auto w = g.find("weights");
    check(w != g.end() && w->is_object(), "config.json: " + where + " is missing");
    const int64_t bits = w->value("num_bits", 0);
    const std::string type = w->value("type", "");
    if (bits != 8 || type != "float")
      throw Error("config.json: " + where + " is " + std::to_string(bits) + "-bit " + type +
                  "; pagoda loads compressed-tensors FP8 weights (8-bit float) only — 4-bit and integer "
                  "schemes are not implemented yet");
    const std::string strategy = w->value("strategy", "");
    if (strategy == "block") {
      read_block(w->value("block_structure", json()), where + ".block_structure", q);
    } else {
      check(strategy == "tensor" || strategy == "channel",
            "config.json: " + where + ".strategy is \"" + strategy + "\"; FP8 weights load with tensor, channel or "
            "block scales");
    }
  }
  read_names(qc, "ignore", q);
}

}  // namespace

bool WeightQuantization::keeps_dense(const std::string& weight_name) const {
  // As vLLM's online FP8: neither lm_head (nor the embedding, which is no projection) nor a mixture
  // of experts' router. In an FP8 checkpoint the tensor's own dtype decides instead.
  auto ends_with = [&](const std::string& tail) {
    return weight_name.size() >= tail.size() && weight_name.compare(weight_name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return weight_name == "lm_head.weight" || ends_with("mlp.gate.weight") || ends_with("shared_expert_gate.weight");
}

std::string WeightQuantization::describe() const {
  if (!fp8()) return "none";
  std::string s = "fp8 e4m3 weights";
  if (block_n > 0) s += ", " + std::to_string(block_n) + "x" + std::to_string(block_k) + " block scales";
  return s + (online ? " (quantized at load, per-channel scales)" : " (" + source + " checkpoint)");
}

WeightQuantization read_quantization_config(const json& config) {
  WeightQuantization q;
  const json* qc = nullptr;
  if (auto it = config.find("quantization_config"); it != config.end() && !it->is_null()) qc = &*it;
  if (auto it = config.find("text_config"); qc == nullptr && it != config.end() && it->is_object())
    if (auto jt = it->find("quantization_config"); jt != it->end() && !jt->is_null()) qc = &*jt;
  if (qc == nullptr) return q;
  check(qc->is_object(), "config.json: quantization_config must be an object");
  const std::string method = qc->value("quant_method", "");
  if (method == "fp8") {
    q.method = WeightQuantization::Method::Fp8;
    q.source = "fp8";
    if (auto it = qc->find("weight_block_size"); it != qc->end() && !it->is_null())
      read_block(*it, "quantization_config.weight_block_size", q);
    read_names(*qc, "modules_to_not_convert", q);
    return q;
  }
  if (method == "compressed-tensors") {
    q.method = WeightQuantization::Method::Fp8;
    q.source = "compressed-tensors";
    read_compressed_tensors(*qc, q);
    return q;
  }
  throw Error("config.json: quantization_config.quant_method is \"" + method +
              "\"; pagoda loads FP8 checkpoints (quant_method fp8 and compressed-tensors FP8) — AWQ, GPTQ and other "
              "formats are not implemented yet; serve the unquantized checkpoint (optionally with --quantization fp8)");
}

void apply_quantization_flag(const std::string& flag, WeightQuantization& q) {
  if (flag.empty()) return;
  check(flag == "fp8", "--quantization " + flag + ": pagoda implements fp8 (online per-channel FP8 of a bf16/fp16 "
                       "checkpoint); leave the flag out for a checkpoint that carries its own quantization_config");
  if (q.fp8() && !q.online) {
    q.source += ", --quantization fp8 is its own format";  // already FP8: nothing to do, as vLLM
    return;
  }
  q.method = WeightQuantization::Method::Fp8;
  q.source = "online";
  q.online = true;
}

}  // namespace pagoda
