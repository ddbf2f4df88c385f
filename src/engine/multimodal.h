// A prompt's images, as the engine carries them (docs/vision.md): each image preprocessed into
// patches (media/image_preprocess.h, by the server), placed at its run of placeholder tokens, and
// the multimodal rotary positions of the whole prompt (Qwen3.5's get_rope_index).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace pagoda {

struct ImageInput {
  uint64_t hash = 0;         // of the grid and the pixel values: the encoder cache's and prefix cache's key
  int32_t grid_t = 1, grid_h = 0, grid_w = 0;  // patches
  int64_t patch_dim = 0;     // channels · temporal patch · patch²
  std::vector<float> pixel_values;  // [grid_t · grid_h · grid_w, patch_dim], the processor's order
  int32_t num_tokens = 0;    // merged tokens = placeholders in the prompt
  int32_t offset = 0;        // prompt index of its first placeholder (set by make_multimodal_prompt)
};

// The hash of an image's grid and pixels (64-bit, well mixed).
uint64_t image_hash(int32_t grid_t, int32_t grid_h, int32_t grid_w, std::span<const float> pixels);

struct MultimodalPrompt {
  std::vector<std::shared_ptr<const ImageInput>> images;  // in prompt order, offsets set
  int32_t num_prompt = 0;
  // [3, num_prompt]: the temporal, height and width rotary position of every prompt token.
  std::vector<int32_t> positions;
  // Generated token at index p (p >= num_prompt) rotates at p + rope_delta (all three rows equal).
  int32_t rope_delta = 0;
  // The prompt as the prefix cache sees it: each placeholder replaced by a negative key of (image
  // hash, index within the image), so a cached block matches only the same image at the same place.
  std::vector<int32_t> cache_tokens;
};

// Places `images` (each with hash, grid and num_tokens set) at the runs of `image_token_id` in
// `prompt` — the k-th run of num_tokens placeholders is the k-th image — and computes the rotary
// positions as transformers' Qwen3.5 get_rope_index does: text continues from the last position,
// an image's merged tokens take (start, start + row, start + column) with start the position
// after the text before it, and the text after an image continues from start + max(rows, columns).
// Throws pagoda::Error when the runs and the images disagree.
std::shared_ptr<const MultimodalPrompt> make_multimodal_prompt(
    std::span<const int32_t> prompt, std::vector<std::shared_ptr<ImageInput>> images, int32_t image_token_id,
    int32_t spatial_merge_size);

}  // namespace pagoda
