#include "model/lora.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/text_file.h"
#include "io/weight_names.h"
#include "model/quantized_parts.h"

namespace pagoda {

namespace {

using Json = nlohmann::json;

using quantized_parts::shape_str;

constexpr size_t kMaxConfigBytes = 1 << 20;

// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" → ("model.layers.0.self_attn.
// q_proj.weight" canonical, 'A'); nullopt when it is no LoRA tensor.
std::optional<std::pair<std::string, char>> module_of(const std::string& tensor) {
  for (const char which : {'A', 'B'}) {
    const std::string tail = std::string(".lora_") + which + ".weight";
    if (tensor.size() <= tail.size() || tensor.compare(tensor.size() - tail.size(), tail.size(), tail) != 0) continue;
    std::string stem = tensor.substr(0, tensor.size() - tail.size());
    for (const std::string prefix : {"base_model.model.", "base_model."})
      if (stem.rfind(prefix, 0) == 0) {
        stem = stem.substr(prefix.size());
        break;
      }
    const std::optional<std::string> canonical = canonical_weight_name(stem + ".weight");
    if (!canonical) return std::nullopt;
    return std::make_pair(*canonical, which);
  }
  return std::nullopt;
}

}  // namespace

LoraAdapter load_lora_adapter(const std::string& name, const std::string& dir, int64_t max_rank) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  const std::string what = "LoRA adapter '" + name + "' (" + dir + ")";
  check(fs::is_directory(dir), what + ": no such directory");
  const Json cfg = Json::parse(read_text_file(config_path, kMaxConfigBytes), nullptr, false);
  check(cfg.is_object(), config_path + " is not a JSON object");
  auto field = [&](const char* key) -> const Json* {
    auto it = cfg.find(key);
    return it == cfg.end() || it->is_null() ? nullptr : &*it;
  };
  if (const Json* t = field("peft_type"))
    check(t->is_string() && t->get<std::string>() == "LORA",
          config_path + ": peft_type " + t->dump() + " is not LORA; only LoRA adapters are served");
  const Json* r = field("r");
  check(r && r->is_number_integer() && r->get<int64_t>() >= 1, config_path + ": 'r' (the rank) must be a positive integer");
  LoraAdapter a;
  a.name = name;
  a.dir = dir;
  a.rank = r->get<int64_t>();
  check(a.rank <= max_rank, what + " has rank " + std::to_string(a.rank) + ", above --max-lora-rank " +
                                std::to_string(max_rank) + ": raise --max-lora-rank");
  const Json* alpha = field("lora_alpha");
  const double alpha_v = alpha && alpha->is_number() ? alpha->get<double>() : static_cast<double>(a.rank);
  const Json* rs = field("use_rslora");
  const bool rslora = rs && rs->is_boolean() && rs->get<bool>();
  a.scaling = static_cast<float>(rslora ? alpha_v / std::sqrt(static_cast<double>(a.rank)) : alpha_v / a.rank);
  if (const Json* b = field("base_model_name_or_path"); b && b->is_string()) a.base_model = b->get<std::string>();
  // What PEFT can train beside the low-rank matrices, which pagoda does not apply: refused by name
  // rather than served wrongly.
  if (const Json* d = field("use_dora")) check(!(d->is_boolean() && d->get<bool>()), what + ": DoRA adapters (use_dora) are not supported");
  if (const Json* b = field("bias"))
    check(b->is_string() && b->get<std::string>() == "none", what + ": adapters that train biases (bias " + b->dump() +
                                                                 ") are not supported");
  if (const Json* m = field("modules_to_save"))
    check(m->is_array() && m->empty(), what + ": modules_to_save (whole modules trained beside the adapter) are not "
                                              "supported");
  if (const Json* f = field("fan_in_fan_out")) check(!(f->is_boolean() && f->get<bool>()), what + ": fan_in_fan_out "
                                                                                                   "adapters are not supported");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    if (const Json* p = field(key))
      check(p->is_object() && p->empty(), what + ": per-module ranks or alphas (" + key + ") are not supported");

  const std::string weights = (fs::path(dir) / "adapter_model.safetensors").string();
  check(fs::exists(weights), what + ": no adapter_model.safetensors (only the safetensors format is read)");
  a.file = SafetensorsFile::open(weights);
  for (const TensorView& t : a.file->tensors()) {
    const auto m = module_of(t.name);
    check(m.has_value(), weights + ": tensor '" + t.name + "' is not a LoRA matrix of a known layer "
                                                           "(lora_A / lora_B of a decoder projection)");
    check(t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16,
          weights + ": tensor '" + t.name + "' is " + dtype_name(t.dtype) + "; LoRA matrices must be F32, BF16 or F16");
    check(t.shape.size() == 2, weights + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) + "; 2-D expected");
    LoraAdapter::Module& mod = a.modules[m->first];
    (m->second == 'A' ? mod.a : mod.b) = &t;
    const int64_t r_dim = m->second == 'A' ? t.shape[0] : t.shape[1];
    check(r_dim == a.rank, weights + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) + "; rank " +
                               std::to_string(a.rank) + " (adapter_config.json's r) expected");
  }
  check(!a.modules.empty(), weights + " holds no LoRA matrices");
  for (const auto& [module, mod] : a.modules)
    check(mod.a && mod.b, weights + ": '" + module + "' has lora_" + (mod.a ? "A" : "B") + " but no lora_" +
                              (mod.a ? "B" : "A"));
  return a;
}

LoraSet::LoraSet(Backend& backend, std::vector<LoraAdapter> adapters, int64_t max_rank)
    : be_(backend), adapters_(std::move(adapters)), max_rank_(max_rank) {
  for (size_t i = 0; i < adapters_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      check(adapters_[i].name != adapters_[j].name, "two LoRA adapters are named '" + adapters_[i].name + "'");
}

int32_t LoraSet::slot_of(const std::string& name) const {
  for (size_t i = 0; i < adapters_.size(); ++i)
    if (adapters_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

void LoraSet::attached(int64_t in, int64_t out, int64_t rank_columns) {
  max_in_ = std::max(max_in_, in);
  max_out_ = std::max(max_out_, out);
  max_low_ = std::max(max_low_, rank_columns);
}

void LoraSet::check_all_used() const {
  for (size_t s = 0; s < adapters_.size(); ++s)
    for (const auto& [module, mod] : adapters_[s].modules)
      check(used_.count({static_cast<int32_t>(s), module}) > 0,
            "LoRA adapter '" + adapters_[s].name + "' (" + adapters_[s].dir + ") adapts '" + module +
                "', which this model has no projection for (or keeps unadapted: embeddings, lm_head, experts, "
                "routers): train it on this base model's projections");
}

void LoraSet::reserve(int32_t max_tokens) {
  max_tokens_ = max_tokens;
  const auto t = static_cast<size_t>(std::max(max_tokens, 1));
  const DType act = be_.activation_dtype();
  slots_ = be_.alloc(t * 4);
  weights_ = be_.alloc(t * 4);
  offsets_ = be_.alloc(static_cast<size_t>(num_slots() + 1) * 4);
  sorted_ = be_.alloc(t * 4);
  slot_rows_ = be_.alloc(t * 4);
  const size_t es = dtype_size(act);
  x_sorted_ = be_.alloc(t * static_cast<size_t>(std::max<int64_t>(max_in_, 1)) * es);
  low_ = be_.alloc(t * static_cast<size_t>(std::max<int64_t>(max_low_, 1)) * es);
  y_ = be_.alloc(t * static_cast<size_t>(std::max<int64_t>(max_out_, 1)) * es);
  delta_ = be_.alloc(t * static_cast<size_t>(std::max<int64_t>(max_out_, 1)) * es);
  host_slots_.assign(t, 0);
  host_weights_.assign(t, 0.0f);
  be_.copy_to_device(slots_.data(), host_slots_.data(), t * 4);
  be_.copy_to_device(weights_.data(), host_weights_.data(), t * 4);
}

void LoraSet::set_step(std::span<const int32_t> token_slots) {
  const auto t = static_cast<int32_t>(token_slots.size());
  check_invariant(t <= max_tokens_, "LoraSet::set_step: a step of " + std::to_string(t) + " tokens, reserved for " +
                                        std::to_string(max_tokens_));
  tokens_ = t;
  for (int32_t i = 0; i < t; ++i) {
    const int32_t s = token_slots[static_cast<size_t>(i)];
    check_invariant(s >= -1 && s < num_slots(), "LoraSet::set_step: slot " + std::to_string(s) + " out of range");
    host_slots_[static_cast<size_t>(i)] = std::max(s, 0);
    host_weights_[static_cast<size_t>(i)] = s >= 0 ? 1.0f : 0.0f;
  }
  if (t == 0) return;
  be_.copy_to_device(slots_.data(), host_slots_.data(), static_cast<size_t>(t) * 4);
  be_.copy_to_device(weights_.data(), host_weights_.data(), static_cast<size_t>(t) * 4);
}

LoraSet::Step LoraSet::step(int64_t in, int64_t rank_columns, int64_t out) const {
  const Device dev = be_.device();
  const DType act = be_.activation_dtype();
  const int64_t t = tokens_;
  Step s;
  s.slots = Tensor(slots_.data(), DType::I32, dev, {t, 1});
  s.weights = Tensor(weights_.data(), DType::F32, dev, {t, 1});
  s.offsets = Tensor(offsets_.data(), DType::I32, dev, {num_slots() + 1});
  s.sorted = Tensor(sorted_.data(), DType::I32, dev, {t});
  s.slot_rows = Tensor(slot_rows_.data(), DType::I32, dev, {t});
  s.x_sorted = Tensor(x_sorted_.data(), act, dev, {t, in});
  s.low = Tensor(low_.data(), act, dev, {t, rank_columns});
  s.y = Tensor(y_.data(), act, dev, {t, out});
  s.delta = Tensor(delta_.data(), act, dev, {t, out});
  return s;
}

void LoraWeights::apply(Backend& be, const Tensor& x, Tensor& out) const {
  const int64_t t = x.shape[0];
  if (t == 0) return;
  LoraSet::Step s = set->step(x.shape[1], rank_columns, out.shape[1]);
  check_invariant(s.slots.shape[0] == t, "LoRA: the step's adapter slots were set for " +
                                             std::to_string(s.slots.shape[0]) + " tokens, the projection got " +
                                             std::to_string(t));
  be.moe_permute(x, s.slots, s.offsets, s.sorted, s.slot_rows, s.x_sorted);
  be.moe_grouped_linear(s.x_sorted, a, s.offsets, s.low);
  be.moe_grouped_linear(s.low, b, s.offsets, s.y);
  be.moe_unpermute(s.y, s.weights, s.slot_rows, Tensor(), Tensor(), s.delta);
  be.add(out, s.delta, out);
}

}  // namespace pagoda
