#include "model/model.h"

#include "core/error.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"

namespace pagoda {

int Model::attention_index(int layer) const {
  return attention_index_.at(static_cast<size_t>(layer));
}

std::unique_ptr<Model> load_model(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend) {
  switch (config.arch) {
    case ModelArch::Qwen3: return make_qwen3(config, ckpt, backend);
    case ModelArch::Qwen3_5: return make_qwen3_5(config, ckpt, backend);
  }
  throw Error("unsupported model architecture");
}

std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend) {
  const ModelConfig config = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  return load_model(config, ckpt, backend);
}

}  // namespace pagoda
