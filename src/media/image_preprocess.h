// The Qwen2-VL image processor (used by Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5): RGB pixels to
// the vision tower's flattened patches, as transformers 5.17's Qwen2VLImageProcessor does with its
// torchvision backend on the CPU:
//   1. smart_resize picks (h, w), multiples of patch_size * merge_size with min_pixels <= h*w <=
//      max_pixels, close to the original aspect ratio;
//   2. a bicubic antialiased resize of the uint8 image (torch's uint8 kernel: int16 fixed-point
//      weights, horizontal pass then vertical, each rounded and clamped to uint8);
//   3. (x - mean*255) / (std*255) in float32 (rescale fused into normalize);
//   4. patches of C x temporal_patch_size x P x P, the image repeated temporal_patch_size times,
//      ordered by merge window: (grid_h/m, grid_w/m, m, m).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "media/image_decode.h"

namespace pagoda {

struct Qwen2VLImageConfig {
  int patch_size = 14;
  int temporal_patch_size = 2;
  int merge_size = 2;
  int64_t min_pixels = 56 * 56;                                              // size.shortest_edge
  int64_t max_pixels = 28 * 28 * 1280;                                       // size.longest_edge
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};  // OPENAI_CLIP_MEAN
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};  // OPENAI_CLIP_STD
  double rescale_factor = 1.0 / 255.0;
  bool do_resize = true;
  bool do_rescale = true;
  bool do_normalize = true;
  bool do_convert_rgb = true;

  // Reads <model_dir>/preprocessor_config.json (defaults as transformers' for absent keys; the
  // legacy top-level min_pixels/max_pixels override size, as in Qwen2VLImageProcessor.__init__).
  // Throws pagoda::Error for a missing or malformed file, a processor type that is not
  // Qwen2VLImageProcessor-compatible, or resample other than 3 (bicubic).
  static Qwen2VLImageConfig from_model_dir(const std::string& model_dir);
  static Qwen2VLImageConfig from_json_text(const std::string& json_text, const std::string& label);
};

struct ResizedSize {
  int height = 0;
  int width = 0;
};

// transformers' smart_resize, with Python's float arithmetic and round-half-to-even. Throws
// pagoda::Error when the aspect ratio is over 200.
ResizedSize smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                         int64_t max_pixels);

struct ImageGrid {
  int t = 1;
  int h = 0;  // in patches
  int w = 0;
};

// The grid and the number of LLM placeholder tokens for an image of this size, without pixels.
ImageGrid qwen2vl_image_grid(const Qwen2VLImageConfig& config, int height, int width);
int64_t qwen2vl_image_token_count(const Qwen2VLImageConfig& config, int height, int width);

struct ImagePatches {
  ImageGrid grid;
  int64_t num_patches = 0;          // grid.t * grid.h * grid.w
  int64_t patch_dim = 0;            // 3 * temporal_patch_size * patch_size^2
  std::vector<float> pixel_values;  // [num_patches, patch_dim], row-major
  int64_t token_count = 0;          // num_patches / merge_size^2
};

ImagePatches qwen2vl_preprocess(const RgbImage& image, const Qwen2VLImageConfig& config);

// torch.nn.functional.interpolate(uint8 NCHW, (out_h, out_w), mode="bicubic", antialias=True,
// align_corners=False) on the CPU, applied to an HWC RGB image; returns the input unchanged when
// the size is the same.
RgbImage resize_bicubic_antialiased_uint8(const RgbImage& image, int out_height, int out_width);

}  // namespace pagoda
