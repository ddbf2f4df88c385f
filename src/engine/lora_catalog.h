// The LoRA adapters an engine serves, by name: --lora-modules at start, and at run time those
// POST /v1/load_lora_adapter adds and /v1/unload_lora_adapter removes. Each adapter gets an id that
// is never reused, so a request, a prefix-cache key or a device slot naming an id always means the
// same weights — one unloaded and loaded again under its name is another adapter. Thread-safe: the
// server resolves names on its threads while the engine steps.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace pagoda {

struct LoraEntry {
  int32_t id = -1;
  std::string name;  // what a request's "model" names
  std::string path;  // the PEFT adapter directory
  std::string base_model_name;
  bool removed = false;  // unloaded: no new request may name it; running ones finish with it
};

class LoraCatalog {
 public:
  // Adds `name`; returns its id. Throws pagoda::Error when a served adapter has the name.
  int32_t add(const std::string& name, const std::string& path, const std::string& base_model_name = "");
  // Unloads `name`: false when no served adapter has it.
  bool remove(const std::string& name);
  // A served adapter by name (not removed ones).
  std::optional<LoraEntry> find(const std::string& name) const;
  // Any adapter ever added, by id (removed ones too: their running requests still need them).
  std::optional<LoraEntry> get(int32_t id) const;
  // The served adapters, in the order they were added.
  std::vector<LoraEntry> served() const;
  size_t num_served() const;

 private:
  mutable std::mutex mu_;
  std::map<int32_t, LoraEntry> entries_;
  int32_t next_id_ = 0;
};

}  // namespace pagoda
