// The model registry: architecture (config.json's model_type + architectures[0]) -> the family that
// parses its config and builds its model. Each family lives in one file, src/model/<family>.cpp,
// and is registered with one line in registry.cpp (docs/architecture.md, "Adding a model family").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/config_reader.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/shard.h"

namespace pagoda {

class Backend;
class Model;

struct ModelFamily {
  const char* name;          // what `pagoda info` prints, e.g. Qwen3.5
  const char* model_type;    // config.json model_type
  const char* architecture;  // config.json architectures[0]
  bool nested = false;       // decoder settings under text_config (multimodal checkpoints)
  int64_t default_head_dim = 0;  // transformers' dataclass default when head_dim is absent
  // Reads the family's own fields after the common core (read_common_config) is in `c`.
  void (*read_config)(const ConfigReader& r, ModelConfig* c) = nullptr;
  // Builds rank `shard.rank`'s part of the model (the whole model when shard.world is 1).
  std::unique_ptr<Model> (*make)(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                 const ShardSpec& shard) = nullptr;
  // Optional: the family's own settings for `pagoda info` (rope scaling, sliding window, ...), as
  // {label, value} lines printed after the common ones; null when the common core says it all.
  std::vector<std::pair<std::string, std::string>> (*describe)(const ModelConfig& config) = nullptr;
};

// Every registered family, in registration order (one entry per model_type).
const std::vector<ModelFamily>& model_families();
// The family of `model_type` whose architecture is `architecture` (any when empty); null if none.
const ModelFamily* find_model_family(const std::string& model_type,
                                     const std::string& architecture);
// The family a parsed config belongs to; throws if it is not registered.
const ModelFamily& model_family_of(const ModelConfig& config);

// Reads dir/config.json (required) and dir/generation_config.json (optional). Throws pagoda::Error
// for a missing file, bad JSON, an unsupported architecture (listing the supported ones) or a
// missing/invalid field (naming it).
ModelConfig load_model_config(const std::string& dir);
// The same from JSON text (tests, fuzzing). `generation_json` may be empty.
ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_json);

}  // namespace pagoda
