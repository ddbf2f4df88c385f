#include "model/model.h"

#include "core/error.h"
#include "model/registry.h"

namespace pagoda {

int Model::attention_index(int layer) const {
  return attention_index_.at(static_cast<size_t>(layer));
}

std::unique_ptr<Model> load_model(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend) {
  return model_family_of(config).make(config, ckpt, backend);
}

std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend) {
  const ModelConfig config = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  return load_model(config, ckpt, backend);
}

}  // namespace pagoda
