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

LoraSet::LoraSet(Backend& backend, int32_t slots, int64_t max_rank, int32_t host_adapters, bool all_projections)
    : be_(backend),
      slots_count_(slots),
      max_rank_(max_rank),
      host_adapters_(std::max(host_adapters, 1)),
      all_projections_(all_projections) {}

void LoraSet::expect(int32_t id, LoraAdapter adapter) {
  for (const auto& [module, m] : adapter.modules) wanted_.insert(module);
  kept_.emplace_back(id, std::move(adapter));
  while (static_cast<int32_t>(kept_.size()) > host_adapters_) kept_.pop_front();
}

bool LoraSet::wants(const std::string& weight) const { return all_projections_ || wanted_.count(weight) > 0; }

void LoraSet::attach(LoraTarget target) {
  max_low_ = std::max(max_low_, target.weights->rank_columns);
  targets_.push_back(std::move(target));
}

void LoraSet::validate(const LoraAdapter& a) const {
  for (const auto& [module, m] : a.modules) {
    const LoraTarget::Part* part = nullptr;
    const LoraTarget* target = nullptr;
    for (const LoraTarget& t : targets_)
      for (const LoraTarget::Part& p : t.parts)
        if (p.weight == module) {
          part = &p;
          target = &t;
        }
    check(part != nullptr, "LoRA adapter '" + a.name + "' (" + a.dir + ") adapts '" + module +
                               "', which this model has no projection for (or keeps unadapted: embeddings, lm_head, "
                               "experts, routers): train it on this base model's projections");
    const std::string where = "LoRA adapter '" + a.name + "' (" + a.dir + "): '" + module + "'";
    check(m.a->shape[1] == target->in_features, where + " lora_A has " + std::to_string(m.a->shape[1]) +
                                                    " input columns; the base projection has " +
                                                    std::to_string(target->in_features) +
                                                    ": an adapter of another model");
    check(m.b->shape[0] == part->rows, where + " lora_B has " + std::to_string(m.b->shape[0]) +
                                           " output rows; the base projection has " + std::to_string(part->rows) +
                                           ": an adapter of another model");
  }
}

const LoraAdapter& LoraSet::adapter(int32_t id, const std::string& name, const std::string& dir) {
  for (auto it = kept_.begin(); it != kept_.end(); ++it)
    if (it->first == id) {
      kept_.splice(kept_.begin(), kept_, it);
      return kept_.front().second;
    }
  LoraAdapter a = load_lora_adapter(name, dir, max_rank_);
  validate(a);  // the directory may have changed since it was first checked
  kept_.emplace_front(id, std::move(a));
  while (static_cast<int32_t>(kept_.size()) > host_adapters_) kept_.pop_back();
  return kept_.front().second;
}

void LoraSet::load(int32_t slot, int32_t id, const std::string& name, const std::string& dir) {
  check_invariant(slot >= 0 && slot < slots_count_, "LoraSet::load: slot " + std::to_string(slot) + " out of range");
  const LoraAdapter& a = adapter(id, name, dir);
  for (const LoraTarget& t : targets_) write(t, slot, a);
}

// A fused projection (q | k | v) takes each part's A in its own rows (max_rank of them a part) and
// its B block-diagonally, zero where the adapter leaves a part alone; the scaling goes into B.
void LoraSet::write(const LoraTarget& t, int32_t slot, const LoraAdapter& ad) {
  const LoraWeights& w = *t.weights;
  const int64_t R = w.rank_columns, K = t.col_end - t.col_begin, N = w.b.shape[1], mr = max_rank_;
  std::vector<float> A(static_cast<size_t>(R * K), 0.0f), B(static_cast<size_t>(N * R), 0.0f);
  int64_t row0 = 0;
  for (size_t pi = 0; pi < t.parts.size(); ++pi) {
    const LoraTarget::Part& p = t.parts[pi];
    const auto it = ad.modules.find(p.weight);
    if (it != ad.modules.end()) {
      const TensorView& ta = *it->second.a;
      const TensorView& tb = *it->second.b;
      const int64_t r = ad.rank, in = ta.shape[1], base = static_cast<int64_t>(pi) * mr;
      std::vector<float> fa(static_cast<size_t>(r * in)), fb(static_cast<size_t>(tb.shape[0] * r));
      convert_float_elements(ta.data, ta.dtype, fa.data(), DType::F32, fa.size());
      convert_float_elements(tb.data, tb.dtype, fb.data(), DType::F32, fb.size());
      for (int64_t i = 0; i < r; ++i)
        for (int64_t k = 0; k < K; ++k)
          A[static_cast<size_t>((base + i) * K + k)] = fa[static_cast<size_t>(i * in + t.col_begin + k)];
      for (int64_t j = 0; j < p.hi - p.lo; ++j) {
        const int64_t src = p.order.empty() ? p.begin + p.lo + j : p.order[static_cast<size_t>(p.lo + j)];
        for (int64_t i = 0; i < r; ++i)
          B[static_cast<size_t>((row0 + j) * R + base + i)] = fb[static_cast<size_t>(src * r + i)] * ad.scaling;
      }
    }
    row0 += p.hi - p.lo;
  }
  const size_t es = dtype_size(t.dtype);
  auto put = [&](const std::vector<float>& host, const Tensor& dst) {
    std::vector<uint8_t> bytes(host.size() * es);
    convert_float_elements(host.data(), DType::F32, bytes.data(), t.dtype, host.size());
    be_.copy_to_device(static_cast<char*>(dst.data) + static_cast<size_t>(slot) * bytes.size(), bytes.data(),
                       bytes.size());
  };
  put(A, w.a);
  put(B, w.b);
}

void LoraSet::reserve(int32_t max_tokens) {
  max_tokens_ = max_tokens;
  const auto t = static_cast<size_t>(std::max(max_tokens, 1));
  slots_ = be_.alloc(t * 4);
  low_ = be_.alloc(t * static_cast<size_t>(num_slots() * std::max<int64_t>(max_low_, 1)) *
                   dtype_size(be_.activation_dtype()));
  const std::vector<int32_t> base(t, -1);
  be_.copy_to_device(slots_.data(), base.data(), t * 4);
}

void LoraSet::set_step(std::span<const int32_t> token_slots) {
  const auto t = static_cast<int32_t>(token_slots.size());
  check_invariant(t <= max_tokens_, "LoraSet::set_step: a step of " + std::to_string(t) + " tokens, reserved for " +
                                        std::to_string(max_tokens_));
  tokens_ = t;
  for (const int32_t s : token_slots)
    check_invariant(s >= -1 && s < num_slots(), "LoraSet::set_step: slot " + std::to_string(s) + " out of range");
  if (t > 0) be_.copy_to_device(slots_.data(), token_slots.data(), static_cast<size_t>(t) * 4);
}

LoraSet::Step LoraSet::step(int64_t rank_columns) const {
  const Device dev = be_.device();
  const int64_t t = tokens_;
  Step s;
  s.slots = Tensor(slots_.data(), DType::I32, dev, {t});
  s.low = Tensor(low_.data(), be_.activation_dtype(), dev, {t, num_slots() * rank_columns});
  return s;
}

void LoraWeights::apply(Backend& be, const Tensor& x, Tensor& out) const {
  const int64_t t = x.shape[0];
  if (t == 0) return;
  LoraSet::Step s = set->step(rank_columns);
  check_invariant(s.slots.shape[0] == t, "LoRA: the step's adapter slots were set for " +
                                             std::to_string(s.slots.shape[0]) + " tokens, the projection got " +
                                             std::to_string(t));
  // The shrink for every slot at once: S·R columns of one GEMM cost far less than sorting the rows by
  // adapter would (and read each A once); the expand picks each row's own slot.
  be.linear(x, a.reshape({a.shape[0] * a.shape[1], a.shape[2]}), s.low);
  be.lora_expand(s.low, b, s.slots, out);
}

}  // namespace pagoda
