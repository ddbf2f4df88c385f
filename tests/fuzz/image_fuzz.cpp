// libFuzzer target: client image bytes (PNG, JPEG, WebP, or anything) through decode_image and the
// Qwen2-VL preprocessing must give pixels or throw pagoda::Error, with no UB, no crash and memory
// bounded by the limits (docs/vision.md). Small limits keep each input fast.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "media/image_decode.h"
#include "media/image_preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::DecodeOptions opt;
  opt.limits.max_bytes = size_t{1} << 20;
  opt.limits.max_pixels = 512 * 512;
  opt.limits.max_side = 2048;
  // The first byte picks the alpha handling; the rest is the file.
  if (size > 0 && (data[0] & 1)) opt.alpha = pagoda::AlphaMode::kCompositeOverWhite;
  try {
    const pagoda::RgbImage img = pagoda::decode_image(std::span<const uint8_t>(data, size), opt);
    pagoda::Qwen2VLImageConfig cfg;
    cfg.patch_size = 8;
    cfg.min_pixels = 16 * 16;
    cfg.max_pixels = 64 * 64;
    const pagoda::ImagePatches p = pagoda::qwen2vl_preprocess(img, cfg);
    volatile float sink = p.pixel_values.empty() ? 0.0f : p.pixel_values.back();
    (void)sink;
  } catch (const pagoda::Error&) {
  }
  return 0;
}
