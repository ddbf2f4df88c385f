#include "engine/lora_catalog.h"

#include "core/error.h"

namespace pagoda {

int32_t LoraCatalog::add(const std::string& name, const std::string& path, const std::string& base_model_name) {
  std::lock_guard lock(mu_);
  check(!name.empty(), "a LoRA adapter needs a name");
  for (const auto& [id, e] : entries_)
    check(e.removed || e.name != name, "a LoRA adapter named '" + name + "' is already loaded");
  const int32_t id = next_id_++;
  entries_[id] = LoraEntry{id, name, path, base_model_name, false};
  return id;
}

bool LoraCatalog::remove(const std::string& name) {
  std::lock_guard lock(mu_);
  for (auto& [id, e] : entries_)
    if (!e.removed && e.name == name) {
      e.removed = true;
      return true;
    }
  return false;
}

std::optional<LoraEntry> LoraCatalog::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, e] : entries_)
    if (!e.removed && e.name == name) return e;
  return std::nullopt;
}

std::optional<LoraEntry> LoraCatalog::get(int32_t id) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<LoraEntry> LoraCatalog::served() const {
  std::lock_guard lock(mu_);
  std::vector<LoraEntry> out;
  for (const auto& [id, e] : entries_)
    if (!e.removed) out.push_back(e);
  return out;
}

size_t LoraCatalog::num_served() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [id, e] : entries_) n += e.removed ? 0 : 1;
  return n;
}

}  // namespace pagoda
