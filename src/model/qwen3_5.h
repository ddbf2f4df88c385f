// Qwen3.5's config reader and hybrid decoder (qwen3_5.cpp), for the family built on them:
// Qwen3.5-MoE (qwen3_5_moe.cpp) is the same decoder with the experts of its MoeFields.
#pragma once

#include <memory>

#include "io/config_reader.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/shard.h"

namespace pagoda {

class Backend;
class Model;

// Qwen3_5TextConfig's fields beyond the common core: rotary dim, layer types, Gated DeltaNet sizes.
void read_qwen3_5_config(const ConfigReader& r, ModelConfig* c);
// The hybrid decoder; sparse layers (moe_block.h) where the config carries MoeFields.
std::unique_ptr<Model> make_qwen3_5(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                    const ShardSpec& shard);

}  // namespace pagoda
