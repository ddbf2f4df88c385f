#include "model/model.h"

#include "backend/fallback_backend.h"
#include "core/error.h"
#include "model/registry.h"

namespace pagoda {

int Model::attention_index(int layer) const {
  return attention_index_.at(static_cast<size_t>(layer));
}

std::unique_ptr<Model> load_model(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend) {
  const ModelFamily& family = model_family_of(config);
  std::unique_ptr<Model> model = family.make(config, ckpt, backend);
  require_ops(backend, model->required_ops(), family.name);
  return model;
}

std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend) {
  const ModelConfig config = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  return load_model(config, ckpt, backend);
}

}  // namespace pagoda
