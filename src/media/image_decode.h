// Image inputs of multimodal models: encoded bytes (PNG, JPEG, WebP; told apart by their magic
// bytes, never by a name or a media type) decoded into 8-bit RGB. The bytes come from clients, so
// every size is checked against ImageLimits before pixel memory is allocated, and every failure of
// the decoding libraries (corrupt, truncated, unsupported) is a pagoda::Error, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

// Row-major HWC: rgb[(y * width + x) * 3 + c].
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
};

// Bounds on one image from outside. The defaults admit any photo a vision model can use (Qwen's
// processors downscale anything past ~16M pixels anyway) while keeping one decode under ~112 MiB:
// 4 bytes a pixel while decoding with alpha, 3 in the result.
struct ImageLimits {
  size_t max_bytes = size_t{20} << 20;        // encoded size (after base64 decoding): 20 MiB
  int64_t max_pixels = int64_t{4096} * 4096;  // width * height: 16.8M
  int max_side = 16384;                       // either side, so 1 x 16M strips are refused too
};

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp };

// What an image's transparency becomes in RGB.
enum class AlphaMode {
  // PIL's Image.convert("RGB"): alpha (and tRNS transparency) dropped, colours kept as stored.
  // This is what transformers' convert_to_rgb does (transformers 5.17, image_transforms.py).
  kDrop,
  // Composited over an opaque white background with PIL's integer Image.alpha_composite formula.
  kCompositeOverWhite,
};

struct DecodeOptions {
  ImageLimits limits;
  AlphaMode alpha = AlphaMode::kDrop;
};

ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
const char* image_format_name(ImageFormat format);  // "PNG", "JPEG", "WebP", "unknown"

// Decodes PNG (any colour type and depth; 16-bit samples keep their high byte, as PIL does for
// RGB), JPEG (baseline and progressive; greyscale, YCbCr, CMYK) or WebP (still images). Throws
// pagoda::Error saying what is wrong: over a limit (naming it), not an image, corrupt or truncated.
RgbImage decode_image(std::span<const uint8_t> bytes, const DecodeOptions& options = {});

// Pixel dimensions from the header alone (no pixel memory), after the same limit checks as
// decode_image. Throws pagoda::Error as decode_image does for a bad header.
struct ImageSize {
  int width = 0;
  int height = 0;
};
ImageSize read_image_size(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

// Standard base64 (RFC 4648, '+' '/', '=' padding optional; no whitespace). Throws pagoda::Error on
// a bad character or when the decoded size would pass `max_bytes` (checked before decoding).
std::vector<uint8_t> decode_base64(std::string_view text, size_t max_bytes);

// The bytes of a `data:image/{png,jpeg,jpg,webp};base64,...` URI (the media type must be one of
// those, but the format is still sniffed from the bytes). Bounded by options.limits.max_bytes.
std::vector<uint8_t> data_uri_bytes(std::string_view uri, const ImageLimits& limits = {});
RgbImage decode_data_uri(std::string_view uri, const DecodeOptions& options = {});

// PIL's ImagingAlphaComposite of one pixel (r, g, b, a) over opaque white: exposed for its test.
void composite_over_white(uint8_t rgba_in[4], uint8_t rgb_out[3]);

}  // namespace pagoda
