// A vision tower: an image's patches in, its merged tokens out (the decoder's input embeddings of
// the image's placeholder tokens). Built from the backend's primitives, so it runs where the decoder
// runs; Qwen3.5's is qwen3_5_vision.cpp (docs/vision.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"

namespace pagoda {

class VisionEncoder {
 public:
  virtual ~VisionEncoder() = default;
  virtual int64_t out_hidden() const = 0;  // = the decoder's hidden size
  virtual int64_t patch_dim() const = 0;   // channels · temporal patch · patch²
  virtual int64_t spatial_merge_size() const = 0;
  // Encodes one image of grid_t · grid_h · grid_w patches, pixels [patches, patch_dim] fp32 on the host
  // in the image processor's order, into out [patches / merge², out_hidden] (activations, on the device).
  virtual void encode(int32_t grid_t, int32_t grid_h, int32_t grid_w, std::span<const float> pixels,
                      Tensor& out) = 0;
  virtual std::vector<OpUse> required_ops() const = 0;
  virtual size_t weight_bytes() const = 0;
};

// The vision tower of a checkpoint whose config.json has a vision_config (Qwen3.5 / Qwen3-VL
// style: model.visual.*), or null when it has none. Throws pagoda::Error naming what is missing or
// unsupported, or the backend ops it lacks.
std::unique_ptr<VisionEncoder> load_vision_encoder(const Checkpoint& ckpt, Backend& backend);

}  // namespace pagoda
