#include "media/image_decode.h"

#include <array>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>
#include <zlib.h>

#include "core/error.h"

namespace pagoda {
namespace {

constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

std::string dims_text(int64_t width, int64_t height) {
  return std::to_string(width) + "x" + std::to_string(height);
}

// The one place sizes from a header meet the limits; called before any pixel memory exists.
void check_dimensions(ImageFormat format, int64_t width, int64_t height,
                      const ImageLimits& limits) {
  const std::string what = std::string(image_format_name(format)) + " image";
  check(width > 0 && height > 0,
        what + " declares " + dims_text(width, height) + " pixels: not a valid image");
  check(width <= limits.max_side && height <= limits.max_side,
        what + " is " + dims_text(width, height) + " pixels; the limit is " +
            std::to_string(limits.max_side) + " pixels a side (send a smaller image)");
  check(width * height <= limits.max_pixels,
        what + " is " + dims_text(width, height) + " = " + std::to_string(width * height) +
            " pixels; the limit is " + std::to_string(limits.max_pixels) +
            " pixels (send a smaller image)");
}

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// RGBA rows (4 bytes a pixel) to RGB in place of `out`, as AlphaMode says.
void rgba_to_rgb(const std::vector<uint8_t>& rgba, AlphaMode alpha, std::vector<uint8_t>& out) {
  const size_t pixels = rgba.size() / 4;
  out.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t* in = &rgba[i * 4];
    uint8_t* o = &out[i * 3];
    if (alpha == AlphaMode::kCompositeOverWhite) {
      uint8_t px[4] = {in[0], in[1], in[2], in[3]};
      composite_over_white(px, o);
    } else {
      o[0] = in[0];
      o[1] = in[1];
      o[2] = in[2];
    }
  }
}

// --- PNG
// ------------------------------------------------------------------------------------------ libpng
// reports errors through a callback that must not return: it longjmps back into png_decode_steps,
// which keeps everything that must survive the jump in PngState (memory reached through a pointer,
// never registers), so the caller can throw with the message.

struct PngState {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  char message[200] = {};
  const DecodeOptions* options = nullptr;
  png_structp png = nullptr;
  png_infop info = nullptr;
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // rows of `channels` bytes a pixel
  std::vector<png_bytep> rows;
  std::string limit_error;  // set when the header passes libpng but not our limits
};

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message ? message : "unknown error");
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}  // benign (bad ancillary chunks are skipped)

void on_png_read(png_structp png, png_bytep out, size_t n) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > state->bytes.size() - state->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, state->bytes.data() + state->pos, n);
  state->pos += n;
}

bool png_decode_steps(PngState* s) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_set_read_fn(s->png, s, on_png_read);
  const ImageLimits& limits = s->options->limits;
  // Bounds for libpng itself: the sides (ours are checked again below with a clearer message),
  // ancillary chunks (a zTXt/iCCP bomb inflates into at most chunk_malloc_max bytes) and their
  // number.
  png_set_user_limits(s->png, static_cast<png_uint_32>(limits.max_side),
                      static_cast<png_uint_32>(limits.max_side));
  png_set_chunk_malloc_max(s->png, 8u << 20);
  png_set_chunk_cache_max(s->png, 1000);
  png_read_info(s->png, s->info);

  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(s->png, s->info, &width, &height, &bit_depth, &color_type, nullptr, nullptr,
               nullptr);
  try {
    check_dimensions(ImageFormat::kPng, width, height, limits);
  } catch (const Error& e) {
    s->limit_error = e.what();
    return false;
  }
  s->width = static_cast<int>(width);
  s->height = static_cast<int>(height);

  // Everything to 8-bit RGB or RGBA, as PIL's PNG modes converted to RGB(A) would be.
  if (bit_depth == 16) png_set_strip_16(s->png);  // PIL keeps the high byte of 16-bit RGB
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(s->png);
  if (png_get_valid(s->png, s->info, PNG_INFO_tRNS)) {
    // tRNS transparency becomes an alpha channel only when it will be composited; PIL's
    // convert("RGB") ignores it.
    if (s->options->alpha == AlphaMode::kCompositeOverWhite) png_set_tRNS_to_alpha(s->png);
  }
  if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA)
    png_set_gray_to_rgb(s->png);
  png_set_interlace_handling(s->png);
  png_read_update_info(s->png, s->info);

  s->channels = png_get_channels(s->png, s->info);
  const size_t row_bytes = png_get_rowbytes(s->png, s->info);
  if ((s->channels != 3 && s->channels != 4) || row_bytes != size_t(s->width) * s->channels)
    png_error(s->png, "unsupported pixel layout");
  s->pixels.resize(row_bytes * s->height);
  s->rows.resize(s->height);
  for (int y = 0; y < s->height; ++y) s->rows[y] = s->pixels.data() + row_bytes * y;
  // From here on the file must be well formed: image data beyond what the size needs (a bomb that
  // would otherwise hide there) and a missing IEND are errors, not warnings.
  png_set_benign_errors(s->png, 0);
  png_read_image(s->png, s->rows.data());
  png_read_end(s->png, nullptr);
  return true;
}

// Refuses a PNG whose IDAT stream inflates to more than its rows need. libpng would say "Too much
// image data" too, but only after inflating all of it: a 20 MiB file of deflated zeros is 20 GB
// and most of a minute of CPU. Here inflating stops one buffer past the size the header implies.
// Chunk-structure problems are left to libpng.
void check_png_image_data_size(std::span<const uint8_t> bytes) {
  if (bytes.size() < 33) return;
  const uint8_t* ihdr = bytes.data() + 16;
  const uint64_t width = read_be32(ihdr), height = read_be32(ihdr + 4);
  const int depth = ihdr[8], color_type = ihdr[9], interlace = ihdr[12];
  const int channels = color_type == 2 ? 3 : color_type == 4 ? 2 : color_type == 6 ? 4 : 1;
  const uint64_t bits_per_pixel = uint64_t(channels) * depth;
  auto rows_size = [&](uint64_t w, uint64_t h) {
    return (w == 0 || h == 0) ? 0 : h * (1 + (w * bits_per_pixel + 7) / 8);  // + filter byte
  };
  uint64_t expected = 0;
  if (interlace == 0) {
    expected = rows_size(width, height);
  } else {  // Adam7: (x0, y0, dx, dy) of the seven passes
    constexpr int kPasses[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                   {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
    for (const auto& p : kPasses) {
      const uint64_t w = width > uint64_t(p[0]) ? (width - p[0] + p[2] - 1) / p[2] : 0;
      const uint64_t h = height > uint64_t(p[1]) ? (height - p[1] + p[3] - 1) / p[3] : 0;
      expected += rows_size(w, h);
    }
  }
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return;
  std::vector<uint8_t> scratch(64 << 10);
  uint64_t produced = 0;
  bool ended = false;
  size_t pos = 8;
  while (!ended && pos + 12 <= bytes.size()) {
    const size_t length = read_be32(bytes.data() + pos);
    if (length > bytes.size() - pos - 12) break;
    const uint8_t* type = bytes.data() + pos + 4;
    if (std::memcmp(type, "IEND", 4) == 0) break;
    if (std::memcmp(type, "IDAT", 4) == 0) {
      z.next_in = const_cast<uint8_t*>(bytes.data() + pos + 8);
      z.avail_in = static_cast<uInt>(length);
      while (z.avail_in > 0 && !ended && produced <= expected) {
        z.next_out = scratch.data();
        z.avail_out = static_cast<uInt>(scratch.size());
        const int ret = inflate(&z, Z_NO_FLUSH);
        produced += scratch.size() - z.avail_out;
        if (ret == Z_STREAM_END)
          ended = true;
        else if (ret != Z_OK)
          break;  // corrupt: libpng will say so
      }
      if (produced > expected) break;
    }
    pos += 12 + length;
  }
  inflateEnd(&z);
  check(produced <= expected, "PNG image is corrupt: its image data inflates to more than the " +
                                  std::to_string(expected) + " bytes its " +
                                  dims_text(int64_t(width), int64_t(height)) +
                                  " pixels need (a decompression bomb?)");
}

RgbImage decode_png(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  // The sides from IHDR first, so that an over-limit image gets our message, not libpng's.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0)
    check_dimensions(ImageFormat::kPng, read_be32(bytes.data() + 16), read_be32(bytes.data() + 20),
                     options.limits);
  check_png_image_data_size(bytes);
  auto s = std::make_unique<PngState>();
  s->bytes = bytes;
  s->options = &options;
  s->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s.get(), on_png_error, on_png_warning);
  check(s->png != nullptr, "PNG decoder: out of memory");
  s->info = png_create_info_struct(s->png);
  const bool ok = s->info != nullptr && png_decode_steps(s.get());
  png_destroy_read_struct(&s->png, &s->info, nullptr);
  if (!s->limit_error.empty()) throw Error(s->limit_error);
  check(ok, std::string("PNG image is corrupt or unsupported: ") + s->message);

  RgbImage image{s->width, s->height, {}};
  if (s->channels == 4) {
    rgba_to_rgb(s->pixels, options.alpha, image.rgb);
  } else {
    image.rgb = std::move(s->pixels);
  }
  return image;
}

// --- JPEG
// -----------------------------------------------------------------------------------------
// libjpeg's default error_exit calls exit(); ours longjmps back to jpeg_decode_steps, with the same
// care as for PNG. A truncated file is only a warning to libjpeg (it pads with grey); PIL refuses
// it ("image file is truncated"), and so do we.

constexpr int kMaxJpegScans = 1000;  // progressive scans: each re-walks the image (a CPU bomb)

struct JpegState {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  jpeg_progress_mgr progress{};
  jmp_buf jump{};
  char message[JMSG_LENGTH_MAX + 64] = {};
  const DecodeOptions* options = nullptr;
  std::span<const uint8_t> bytes;
  int width = 0, height = 0;
  bool cmyk = false, adobe_inverted = false;
  std::vector<uint8_t> pixels;  // 3 or 4 (CMYK) bytes a pixel
  std::string limit_error;
};

JpegState* jpeg_state(j_common_ptr cinfo) { return static_cast<JpegState*>(cinfo->client_data); }

[[noreturn]] void on_jpeg_error(j_common_ptr cinfo) {
  JpegState* s = jpeg_state(cinfo);
  (*cinfo->err->format_message)(cinfo, s->message);
  std::longjmp(s->jump, 1);
}

void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    JpegState* s = jpeg_state(cinfo);
    std::snprintf(s->message, sizeof s->message, "the file ends early (truncated)");
    std::longjmp(s->jump, 1);
  }
}

void on_jpeg_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxJpegScans) {
    JpegState* s = jpeg_state(cinfo);
    std::snprintf(s->message, sizeof s->message, "more than %d progressive scans", kMaxJpegScans);
    std::longjmp(s->jump, 1);
  }
}

bool jpeg_decode_steps(JpegState* s) {
  if (setjmp(s->jump)) return false;
  jpeg_create_decompress(&s->cinfo);
  s->cinfo.client_data = s;
  s->progress.progress_monitor = on_jpeg_progress;
  s->cinfo.progress = &s->progress;
  jpeg_mem_src(&s->cinfo, s->bytes.data(), static_cast<unsigned long>(s->bytes.size()));
  jpeg_read_header(&s->cinfo, TRUE);
  try {
    check_dimensions(ImageFormat::kJpeg, s->cinfo.image_width, s->cinfo.image_height,
                     s->options->limits);
  } catch (const Error& e) {
    s->limit_error = e.what();
    return false;
  }
  // Working memory beyond the pixels (progressive coefficient buffers): 16 bytes a pixel is
  // ample for 4:4:4 CMYK; libjpeg fails cleanly past it.
  s->cinfo.mem->max_memory_to_use =
      static_cast<long>(s->cinfo.image_width) * s->cinfo.image_height * 16 + (16l << 20);
  const J_COLOR_SPACE in = s->cinfo.jpeg_color_space;
  s->cmyk = in == JCS_CMYK || in == JCS_YCCK;
  s->adobe_inverted = s->cmyk && s->cinfo.saw_Adobe_marker;
  s->cinfo.out_color_space = s->cmyk ? JCS_CMYK : JCS_RGB;
  // PIL's decoding settings (libjpeg's defaults): accurate integer IDCT, fancy upsampling.
  s->cinfo.dct_method = JDCT_ISLOW;
  s->cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&s->cinfo);
  s->width = static_cast<int>(s->cinfo.output_width);
  s->height = static_cast<int>(s->cinfo.output_height);
  const int components = s->cinfo.output_components;
  if (components != (s->cmyk ? 4 : 3)) ERREXIT(&s->cinfo, JERR_CONVERSION_NOTIMPL);
  const size_t row_bytes = size_t(s->width) * components;
  s->pixels.resize(row_bytes * s->height);
  while (s->cinfo.output_scanline < s->cinfo.output_height) {
    JSAMPROW row = s->pixels.data() + row_bytes * s->cinfo.output_scanline;
    jpeg_read_scanlines(&s->cinfo, &row, 1);
  }
  return true;
}

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  auto s = std::make_unique<JpegState>();
  s->options = &options;
  s->bytes = bytes;
  s->cinfo.err = jpeg_std_error(&s->err);
  s->err.error_exit = on_jpeg_error;
  s->err.emit_message = on_jpeg_message;
  const bool ok = jpeg_decode_steps(s.get());
  jpeg_destroy_decompress(&s->cinfo);
  if (!s->limit_error.empty()) throw Error(s->limit_error);
  check(ok, std::string("JPEG image is corrupt or unsupported: ") + s->message);

  RgbImage image{s->width, s->height, {}};
  if (!s->cmyk) {
    image.rgb = std::move(s->pixels);
    return image;
  }
  // CMYK (print files): ink amounts to RGB, r = (255 - c)(255 - k) / 255. Adobe's files store the
  // inks inverted. Close to PIL's conversion, not bit-matched to it.
  const size_t pixels = size_t(s->width) * s->height;
  image.rgb.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    uint8_t cmyk[4];
    for (int c = 0; c < 4; ++c)
      cmyk[c] = s->adobe_inverted ? uint8_t(255 - s->pixels[i * 4 + c]) : s->pixels[i * 4 + c];
    const int not_k = 255 - cmyk[3];
    for (int c = 0; c < 3; ++c)
      image.rgb[i * 3 + c] = uint8_t(((255 - cmyk[c]) * not_k + 127) / 255);
  }
  return image;
}

// --- WebP
// -----------------------------------------------------------------------------------------

RgbImage decode_webp(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  WebPBitstreamFeatures features{};
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  check(status == VP8_STATUS_OK, status == VP8_STATUS_NOT_ENOUGH_DATA
                                     ? "WebP image is truncated: its header is incomplete"
                                     : "WebP image is corrupt: its header cannot be read");
  check(!features.has_animation, "animated WebP images are not supported; send a still image");
  check_dimensions(ImageFormat::kWebp, features.width, features.height, options.limits);

  RgbImage image{features.width, features.height, {}};
  const size_t pixels = size_t(features.width) * features.height;
  uint8_t* decoded = nullptr;
  if (features.has_alpha) {
    std::vector<uint8_t> rgba(pixels * 4);
    decoded = WebPDecodeRGBAInto(bytes.data(), bytes.size(), rgba.data(), rgba.size(),
                                 features.width * 4);
    check(decoded != nullptr,
          "WebP image is corrupt or truncated: its pixel data cannot be decoded");
    rgba_to_rgb(rgba, options.alpha, image.rgb);
  } else {
    image.rgb.resize(pixels * 3);
    decoded = WebPDecodeRGBInto(bytes.data(), bytes.size(), image.rgb.data(), image.rgb.size(),
                                features.width * 3);
    check(decoded != nullptr,
          "WebP image is corrupt or truncated: its pixel data cannot be decoded");
  }
  return image;
}

void check_encoded_size(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  check(!bytes.empty(), "the image is empty (0 bytes)");
  check(bytes.size() <= limits.max_bytes,
        "the image is " + std::to_string(bytes.size()) + " bytes; the limit is " +
            std::to_string(limits.max_bytes) + " bytes (send a smaller file)");
}

ImageFormat checked_format(std::span<const uint8_t> bytes) {
  const ImageFormat format = sniff_image_format(bytes);
  check(format != ImageFormat::kUnknown,
        "the image is not PNG, JPEG or WebP (its first bytes match none of them)");
  return format;
}

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> bytes) {
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPngMagic, 8) == 0) return ImageFormat::kPng;
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
    return ImageFormat::kJpeg;
  if (bytes.size() >= 12 && std::memcmp(bytes.data(), "RIFF", 4) == 0 &&
      std::memcmp(bytes.data() + 8, "WEBP", 4) == 0)
    return ImageFormat::kWebp;
  return ImageFormat::kUnknown;
}

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

void composite_over_white(uint8_t rgba_in[4], uint8_t rgb_out[3]) {
  // Pillow's ImagingAlphaComposite (libImaging/AlphaComposite.c) with dst = (255, 255, 255, 255):
  // integer arithmetic with 7 extra bits of precision and rounded divisions by 255.
  constexpr uint32_t kPrecisionBits = 7;
  const uint32_t src_a = rgba_in[3];
  if (src_a == 0) {
    rgb_out[0] = rgb_out[1] = rgb_out[2] = 255;
    return;
  }
  const uint32_t blend = 255u * (255u - src_a);  // dst.a * (255 - src.a)
  const uint32_t out_a255 = src_a * 255u + blend;
  const uint32_t coef1 = src_a * 255u * 255u * (1u << kPrecisionBits) / out_a255;
  const uint32_t coef2 = 255u * (1u << kPrecisionBits) - coef1;
  auto div255_shift = [](uint32_t a) { return ((a >> 8) + a) >> 8; };  // SHIFTFORDIV255
  for (int c = 0; c < 3; ++c) {
    const uint32_t t = rgba_in[c] * coef1 + 255u * coef2;
    rgb_out[c] =
        static_cast<uint8_t>(div255_shift(t + (0x80u << kPrecisionBits)) >> kPrecisionBits);
  }
}

RgbImage decode_image(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  check_encoded_size(bytes, options.limits);
  switch (checked_format(bytes)) {
    case ImageFormat::kPng:
      return decode_png(bytes, options);
    case ImageFormat::kJpeg:
      return decode_jpeg(bytes, options);
    case ImageFormat::kWebp:
      return decode_webp(bytes, options);
    case ImageFormat::kUnknown:
      break;
  }
  throw InternalError("decode_image: unhandled format");
}

ImageSize read_image_size(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  check_encoded_size(bytes, limits);
  const ImageFormat format = checked_format(bytes);
  int64_t width = 0, height = 0;
  if (format == ImageFormat::kPng) {
    check(bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0,
          "PNG image is corrupt: no IHDR header");
    width = read_be32(bytes.data() + 16);
    height = read_be32(bytes.data() + 20);
  } else if (format == ImageFormat::kWebp) {
    int w = 0, h = 0;
    check(WebPGetInfo(bytes.data(), bytes.size(), &w, &h) != 0,
          "WebP image is corrupt: bad header");
    width = w;
    height = h;
  } else {
    // Markers up to the first SOFn: the frame header holds the size.
    size_t p = 2;
    while (true) {
      while (p < bytes.size() && bytes[p] == 0xFF) ++p;  // fill bytes and the marker's 0xFF
      check(p + 3 <= bytes.size(), "JPEG image is truncated before its frame header");
      const uint8_t marker = bytes[p];
      const size_t length = (size_t{bytes[p + 1]} << 8) | bytes[p + 2];
      check(length >= 2, "JPEG image is corrupt: a marker segment has length < 2");
      const bool sof =
          marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
      if (sof) {
        check(p + 8 <= bytes.size(), "JPEG image is truncated in its frame header");
        height = (int64_t{bytes[p + 4]} << 8) | bytes[p + 5];
        width = (int64_t{bytes[p + 6]} << 8) | bytes[p + 7];
        break;
      }
      check(marker != 0xDA && marker != 0xD9, "JPEG image is corrupt: no frame header before data");
      p += 1 + length;
    }
  }
  check_dimensions(format, width, height, limits);
  return {static_cast<int>(width), static_cast<int>(height)};
}

std::vector<uint8_t> decode_base64(std::string_view text, size_t max_bytes) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  // The decoded size is known from the length: refuse before allocating or decoding anything.
  const size_t decoded_size =
      text.size() / 4 * 3 + (text.size() % 4 == 0 ? 0 : text.size() % 4 - 1);
  check(text.size() % 4 != 1, "base64 data has an impossible length (" +
                                  std::to_string(text.size()) + " characters without padding)");
  check(decoded_size <= max_bytes, "base64 data decodes to " + std::to_string(decoded_size) +
                                       " bytes; the limit is " + std::to_string(max_bytes) +
                                       " bytes (send a smaller file)");
  // A table, and the error message built only on an error: megabytes of image per request.
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  std::vector<uint8_t> out(decoded_size);
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const int v = kValue[static_cast<uint8_t>(text[i])];
    if (v < 0)
      throw Error("base64 data has an invalid character at offset " + std::to_string(i) +
                  " (only A-Z a-z 0-9 + / and trailing = are allowed)");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = static_cast<uint8_t>(acc >> bits);
    }
  }
  out.resize(o);
  return out;
}

std::vector<uint8_t> data_uri_bytes(std::string_view uri, const ImageLimits& limits) {
  constexpr std::string_view kScheme = "data:";
  check(uri.substr(0, kScheme.size()) == kScheme, "an image URL must be a data: URI here");
  const size_t comma = uri.find(',');
  check(comma != std::string_view::npos, "the data: URI has no ',' before its data");
  const std::string_view header = uri.substr(kScheme.size(), comma - kScheme.size());
  constexpr std::string_view kBase64 = ";base64";
  check(header.size() >= kBase64.size() && header.substr(header.size() - kBase64.size()) == kBase64,
        "the data: URI must be base64-encoded (data:image/png;base64,...)");
  const std::string_view media_type = header.substr(0, header.size() - kBase64.size());
  check(media_type == "image/png" || media_type == "image/jpeg" || media_type == "image/jpg" ||
            media_type == "image/webp",
        "the data: URI's media type is '" + std::string(media_type.substr(0, 64)) +
            "'; supported are image/png, image/jpeg and image/webp");
  return decode_base64(uri.substr(comma + 1), limits.max_bytes);
}

RgbImage decode_data_uri(std::string_view uri, const DecodeOptions& options) {
  const std::vector<uint8_t> bytes = data_uri_bytes(uri, options.limits);
  return decode_image(bytes, options);
}

}  // namespace pagoda
