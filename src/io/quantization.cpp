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

int64_t read_group_size(const json& v, const std::string& where) {
  check(v.is_number_integer() && (v.get<int64_t>() == -1 || (v.get<int64_t>() > 0 && v.get<int64_t>() % 8 == 0)),
        "config.json: " + where + " must be -1 (one group per row) or a positive multiple of 8");
  return v.get<int64_t>() == -1 ? 0 : v.get<int64_t>();
}

// compressed-tensors: every config group quantizes weights either to 8-bit floats (FP8) or to
// 4-bit integers packed eight to an int32 (W4A16, symmetric, in groups or per channel);
// activations are left to pagoda (bf16), whatever the group says about them.
void read_compressed_tensors(const json& qc, WeightQuantization& q) {
  const auto groups = qc.find("config_groups");
  check(groups != qc.end() && groups->is_object() && !groups->empty(),
        "config.json: quantization_config.config_groups is missing (compressed-tensors)");
  bool fp8 = false, int4 = false;
  for (const auto& [name, g] : groups->items()) {
    const std::string where = "quantization_config.config_groups." + name + ".weights";
    const auto w = g.find("weights");
    check(w != g.end() && w->is_object(), "config.json: " + where + " is missing");
    const int64_t bits = w->value("num_bits", 0);
    const std::string type = w->value("type", "");
    const std::string strategy = w->value("strategy", "");
    if (bits == 4 && type == "int") {
      int4 = true;
      check(qc.value("format", "pack-quantized") == "pack-quantized",
            "config.json: quantization_config.format is \"" + qc.value("format", "") +
                "\"; 4-bit compressed-tensors weights load from the pack-quantized format");
      check(w->value("symmetric", true),
            "config.json: " + where + " is asymmetric (zero points); pagoda loads symmetric 4-bit compressed-tensors "
            "weights so far — AWQ and GPTQ checkpoints with zero points load");
      if (strategy == "group") {
        q.group_size = read_group_size(w->value("group_size", json()), where + ".group_size");
      } else {
        check(strategy == "channel", "config.json: " + where + ".strategy is \"" + strategy +
                                         "\"; 4-bit weights load with group or channel scales");
        q.group_size = 0;
      }
      continue;
    }
    if (bits != 8 || type != "float")
      throw Error("config.json: " + where + " is " + std::to_string(bits) + "-bit " + type +
                  "; pagoda loads compressed-tensors FP8 (8-bit float) and W4A16 (4-bit int) weights; 8-bit integer "
                  "schemes are not implemented yet");
    fp8 = true;
    if (strategy == "block") {
      read_block(w->value("block_structure", json()), where + ".block_structure", q);
    } else {
      check(strategy == "tensor" || strategy == "channel",
            "config.json: " + where + ".strategy is \"" + strategy + "\"; FP8 weights load with tensor, channel or "
            "block scales");
    }
  }
  check(!(fp8 && int4), "config.json: quantization_config mixes FP8 and 4-bit config groups; pagoda loads one "
                        "format per checkpoint");
  if (int4) {
    q.method = WeightQuantization::Method::Int4;
    q.int4_layout = WeightQuantization::Int4Layout::PackQuantized;
  }
  read_names(qc, "ignore", q);
}

// AutoAWQ (`awq`) and GPTQ (`gptq`): 4-bit, in groups of input columns, with zero points.
void read_awq_gptq(const json& qc, const std::string& method, WeightQuantization& q) {
  const std::string where = "config.json: quantization_config";
  const json bits = qc.value("bits", json(4));
  check(bits.is_number_integer() && bits.get<int64_t>() == 4,
        where + ".bits is " + bits.dump() + "; pagoda loads 4-bit " + method + " checkpoints");
  q.method = WeightQuantization::Method::Int4;
  q.source = method;
  q.group_size = read_group_size(qc.value("group_size", json(128)), "quantization_config.group_size");
  if (method == "awq") {
    q.int4_layout = WeightQuantization::Int4Layout::Awq;
    const std::string version = qc.value("version", "gemm");
    check(version == "gemm" || version == "GEMM",
          where + ".version is \"" + version + "\"; pagoda loads AWQ's GEMM layout (the default, and what vLLM "
          "loads); re-export the checkpoint with version \"gemm\"");
    check(qc.value("zero_point", true), where + ".zero_point is false; pagoda loads AWQ with zero points");
    read_names(qc, "modules_to_not_convert", q);
    return;
  }
  q.int4_layout = WeightQuantization::Int4Layout::Gptq;
  const std::string format = qc.value("checkpoint_format", "gptq");
  check(format == "gptq" || format == "gptq_v2",
        where + ".checkpoint_format is \"" + format + "\"; pagoda loads gptq and gptq_v2");
  q.gptq_zero_offset = format == "gptq" ? 1 : 0;
  // desc_act (act-order) is checked per tensor: a g_idx that is not k / group_size is refused there.
  read_names(qc, "modules_to_not_convert", q);
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
  if (int4()) {
    const std::string group = group_size > 0 ? "groups of " + std::to_string(group_size) : "per-channel scales";
    return "int4 weights, " + group + " (" + source + " checkpoint; W4A16)";
  }
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
  if (method == "awq" || method == "gptq") {
    read_awq_gptq(*qc, method, q);
    return q;
  }
  throw Error("config.json: quantization_config.quant_method is \"" + method +
              "\"; pagoda loads fp8, compressed-tensors (FP8, W4A16), awq and gptq checkpoints; serve the "
              "unquantized checkpoint (optionally with --quantization fp8)");
}

void apply_quantization_flag(const std::string& flag, WeightQuantization& q) {
  if (flag.empty()) return;
  check(flag == "fp8", "--quantization " + flag + ": pagoda implements fp8 (online per-channel FP8 of a bf16/fp16 "
                       "checkpoint); leave the flag out for a checkpoint that carries its own quantization_config");
  check(!q.int4(), "--quantization fp8: the checkpoint is already quantized (" + q.source + ", 4-bit); leave the flag "
                   "out");
  if (q.fp8() && !q.online) {
    q.source += ", --quantization fp8 is its own format";  // already FP8: nothing to do, as vLLM
    return;
  }
  q.method = WeightQuantization::Method::Fp8;
  q.source = "online";
  q.online = true;
}

}  // namespace pagoda
