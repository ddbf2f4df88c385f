#include "media/image_preprocess.h"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

// --- the uint8 antialiased bicubic resize
// --------------------------------------------------------- Our implementation of the arithmetic of
// torch's CPU kernel for uint8 input (aten/src/ATen/native/cpu/UpSampleKernel.cpp,
// HelperInterpBase::_compute_index_ranges_weights and _compute_index_ranges_int16_weights; the AVX2
// kernel of UpSampleKernelAVXAntialias.h computes the same sums): Pillow's resampling filter
// support, weights in double normalised to sum 1, then scaled to int16 with the most precision that
// keeps the largest weight under 2^15; each output is (2^(p-1) + sum w16 * x) >> p clamped to [0,
// 255]. Width first, then height (the intermediate is uint8).

// Keys' cubic convolution with a = -0.5 (torch's choice for antialias=True, as PIL's BICUBIC).
double bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

struct ResampleTaps {
  int precision = 0;             // weights are w * 2^precision
  int taps = 0;                  // weights stored per output
  std::vector<int64_t> first;    // first input index of each output
  std::vector<int64_t> count;    // inputs used by each output
  std::vector<int16_t> weights;  // [out][taps]
};

ResampleTaps resample_taps(int64_t in_size, int64_t out_size) {
  constexpr int kInterpSize = 4;  // bicubic
  // area_pixel_compute_scale with align_corners=False and no scale given: in / out.
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = (scale >= 1.0) ? (kInterpSize * 0.5) * scale : kInterpSize * 0.5;
  const int taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  const double invscale = (scale >= 1.0) ? 1.0 / scale : 1.0;

  ResampleTaps r;
  r.taps = taps;
  r.first.resize(out_size);
  r.count.resize(out_size);
  std::vector<double> w(out_size * taps, 0.0);
  double wt_max = 0.0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    xsize = std::clamp<int64_t>(xsize, 0, taps);
    double* wi = &w[i * taps];
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      const double v = bicubic_filter((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      wi[j] = v;
      total += v;
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < xsize; ++j) {
        wi[j] /= total;
        wt_max = std::max(wt_max, wi[j]);
      }
    }
    r.first[i] = xmin;
    r.count[i] = xsize;
  }
  int precision = 0;
  for (precision = 0; precision < 22; ++precision) {
    const int next = static_cast<int>(0.5 + wt_max * (1 << (precision + 1)));
    if (next >= (1 << 15)) break;
  }
  r.precision = precision;
  r.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << precision);
    r.weights[k] =
        static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return r;
}

// One 1-D pass over an HWC image along width (horizontal) or height.
std::vector<uint8_t> resample_pass(const std::vector<uint8_t>& in, int in_h, int in_w, int out_h,
                                   int out_w, bool horizontal) {
  const ResampleTaps t = horizontal ? resample_taps(in_w, out_w) : resample_taps(in_h, out_h);
  std::vector<uint8_t> out(size_t(out_h) * out_w * 3);
  const int32_t bias = int32_t{1} << (t.precision - 1);
  for (int y = 0; y < out_h; ++y) {
    for (int x = 0; x < out_w; ++x) {
      const int o = horizontal ? x : y;
      const int16_t* w = &t.weights[size_t(o) * t.taps];
      for (int c = 0; c < 3; ++c) {
        int32_t sum = bias;
        for (int64_t j = 0; j < t.count[o]; ++j) {
          const int64_t src = t.first[o] + j;
          const uint8_t v = horizontal ? in[(size_t(y) * in_w + src) * 3 + c]
                                       : in[(size_t(src) * in_w + x) * 3 + c];
          sum += int32_t{v} * w[j];
        }
        out[(size_t(y) * out_w + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(sum >> t.precision, 0, 255));
      }
    }
  }
  return out;
}

template <typename T>
T json_value(const Json& j, const char* key, T fallback, const std::string& label) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const Json::exception&) {
    throw Error(label + ": '" + key + "' has the wrong type (" + j[key].dump().substr(0, 80) + ")");
  }
}

std::array<float, 3> json_triple(const Json& j, const char* key, std::array<float, 3> fallback,
                                 const std::string& label) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const Json& v = j[key];
  if (v.is_number()) {
    const float f = v.get<float>();  // torch.tensor(python float): float32
    return {f, f, f};
  }
  check(v.is_array() && v.size() == 3 && v[0].is_number() && v[1].is_number() && v[2].is_number(),
        label + ": '" + key + "' must be a number or a list of 3 numbers (one per RGB channel)");
  return {v[0].get<float>(), v[1].get<float>(), v[2].get<float>()};
}

}  // namespace

Qwen2VLImageConfig Qwen2VLImageConfig::from_json_text(const std::string& json_text,
                                                      const std::string& label) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const Json::exception& e) {
    throw Error(label + " is not valid JSON: " + e.what());
  }
  check(j.is_object(), label + " must be a JSON object");
  const std::string type = json_value<std::string>(j, "image_processor_type", "", label);
  check(type.empty() || type == "Qwen2VLImageProcessor" || type == "Qwen2VLImageProcessorFast",
        label + ": image_processor_type is '" + type +
            "'; pagoda implements Qwen2VLImageProcessor (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5)");
  Qwen2VLImageConfig c;
  c.patch_size = json_value<int>(j, "patch_size", c.patch_size, label);
  c.temporal_patch_size = json_value<int>(j, "temporal_patch_size", c.temporal_patch_size, label);
  c.merge_size = json_value<int>(j, "merge_size", c.merge_size, label);
  if (j.contains("size") && j["size"].is_object()) {
    c.min_pixels = json_value<int64_t>(j["size"], "shortest_edge", c.min_pixels, label + " size");
    c.max_pixels = json_value<int64_t>(j["size"], "longest_edge", c.max_pixels, label + " size");
  }
  c.min_pixels = json_value<int64_t>(j, "min_pixels", c.min_pixels, label);
  c.max_pixels = json_value<int64_t>(j, "max_pixels", c.max_pixels, label);
  c.image_mean = json_triple(j, "image_mean", c.image_mean, label);
  c.image_std = json_triple(j, "image_std", c.image_std, label);
  c.rescale_factor = json_value<double>(j, "rescale_factor", c.rescale_factor, label);
  c.do_resize = json_value<bool>(j, "do_resize", c.do_resize, label);
  c.do_rescale = json_value<bool>(j, "do_rescale", c.do_rescale, label);
  c.do_normalize = json_value<bool>(j, "do_normalize", c.do_normalize, label);
  c.do_convert_rgb = json_value<bool>(j, "do_convert_rgb", c.do_convert_rgb, label);
  const int resample = json_value<int>(j, "resample", 3, label);
  check(resample == 3, label + ": resample is " + std::to_string(resample) +
                           "; pagoda implements only 3 (bicubic), the Qwen processors' setting");

  check(c.patch_size > 0 && c.patch_size <= 1024, label + ": patch_size must be in 1..1024");
  check(c.temporal_patch_size > 0 && c.temporal_patch_size <= 16,
        label + ": temporal_patch_size must be in 1..16");
  check(c.merge_size > 0 && c.merge_size <= 16, label + ": merge_size must be in 1..16");
  check(c.min_pixels > 0 && c.max_pixels >= c.min_pixels,
        label + ": need 0 < size.shortest_edge (min_pixels) <= size.longest_edge (max_pixels)");
  check(c.rescale_factor > 0, label + ": rescale_factor must be positive");
  for (float s : c.image_std) check(s != 0.0f, label + ": image_std must not contain 0");
  return c;
}

Qwen2VLImageConfig Qwen2VLImageConfig::from_model_dir(const std::string& model_dir) {
  const std::string path = model_dir + "/preprocessor_config.json";
  std::ifstream file(path);
  check(file.good(),
        "cannot read " + path +
            ": an image model needs its preprocessor_config.json (download it with the "
            "model's other files)");
  std::stringstream text;
  text << file.rdbuf();
  return from_json_text(text.str(), path);
}

ResizedSize smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                         int64_t max_pixels) {
  check(height > 0 && width > 0,
        "image has an empty side (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  const double ratio =
      static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  check(ratio <= 200, "image is " + std::to_string(width) + "x" + std::to_string(height) +
                          ": the aspect ratio must be at most 200 (send a less elongated image)");
  const double f = static_cast<double>(factor);
  // Python's round(): half to even, as std::nearbyint in the default rounding mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(height) / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(static_cast<double>(width) / f)) * factor;
  const double area = static_cast<double>(height * width);  // Python int, exact below 2^53
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(area / static_cast<double>(max_pixels));
    h_bar = std::max(
        factor, static_cast<int64_t>(std::floor(static_cast<double>(height) / beta / f)) * factor);
    w_bar = std::max(
        factor, static_cast<int64_t>(std::floor(static_cast<double>(width) / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / area);
    h_bar = static_cast<int64_t>(std::ceil(static_cast<double>(height) * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(static_cast<double>(width) * beta / f)) * factor;
  }
  return {static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

ImageGrid qwen2vl_image_grid(const Qwen2VLImageConfig& config, int height, int width) {
  const int factor = config.patch_size * config.merge_size;
  ResizedSize size{height, width};
  if (config.do_resize) {
    size = smart_resize(height, width, factor, config.min_pixels, config.max_pixels);
  } else {
    check(height % factor == 0 && width % factor == 0,
          "image is " + std::to_string(width) + "x" + std::to_string(height) +
              " and the processor does not resize (do_resize false): both sides must be multiples "
              "of patch_size * merge_size = " +
              std::to_string(factor));
  }
  return {1, size.height / config.patch_size, size.width / config.patch_size};
}

int64_t qwen2vl_image_token_count(const Qwen2VLImageConfig& config, int height, int width) {
  const ImageGrid g = qwen2vl_image_grid(config, height, width);
  return int64_t{g.t} * g.h * g.w / (int64_t{config.merge_size} * config.merge_size);
}

RgbImage resize_bicubic_antialiased_uint8(const RgbImage& image, int out_height, int out_width) {
  check(out_height > 0 && out_width > 0, "resize to an empty image");
  if (out_height == image.height && out_width == image.width) return image;
  RgbImage out{image.width, image.height, image.rgb};
  if (out_width != image.width) {
    out.rgb = resample_pass(out.rgb, out.height, out.width, out.height, out_width, true);
    out.width = out_width;
  }
  if (out_height != image.height) {
    out.rgb = resample_pass(out.rgb, out.height, out.width, out_height, out.width, false);
    out.height = out_height;
  }
  return out;
}

ImagePatches qwen2vl_preprocess(const RgbImage& image, const Qwen2VLImageConfig& config) {
  check(image.width > 0 && image.height > 0 &&
            image.rgb.size() == size_t(image.width) * image.height * 3,
        "image has no pixels or a pixel buffer of the wrong size");
  const ImageGrid grid = qwen2vl_image_grid(config, image.height, image.width);
  const int P = config.patch_size, T = config.temporal_patch_size, M = config.merge_size;
  const int out_h = grid.h * P, out_w = grid.w * P;
  const RgbImage resized = resize_bicubic_antialiased_uint8(image, out_h, out_w);

  // Rescale and normalise as transformers' torchvision backend: with both on, the rescale factor is
  // folded into mean and std in float32 (_fuse_mean_std_and_rescale_factor) and tvF.normalize
  // computes (x - mean) / std in float32.
  std::array<float, 3> mean{}, stdev{};
  float scale = 1.0f;
  const float inv_rescale = static_cast<float>(1.0 / config.rescale_factor);
  for (int c = 0; c < 3; ++c) {
    mean[c] = config.image_mean[c];
    stdev[c] = config.image_std[c];
    if (config.do_rescale && config.do_normalize) {
      mean[c] = mean[c] * inv_rescale;
      stdev[c] = stdev[c] * inv_rescale;
    }
  }
  if (config.do_rescale && !config.do_normalize) scale = static_cast<float>(config.rescale_factor);
  std::vector<float> plane(size_t(out_h) * out_w * 3);  // HWC floats
  for (size_t i = 0; i < size_t(out_h) * out_w; ++i) {
    for (int c = 0; c < 3; ++c) {
      const float x = static_cast<float>(resized.rgb[i * 3 + c]);
      float v = x;
      if (config.do_normalize) {
        v = (x - mean[c]) / stdev[c];
      } else if (config.do_rescale) {
        v = x * scale;
      }
      plane[i * 3 + c] = v;
    }
  }

  ImagePatches out;
  out.grid = grid;
  out.num_patches = int64_t{grid.h} * grid.w;
  out.patch_dim = int64_t{3} * T * P * P;
  out.token_count = out.num_patches / (int64_t{M} * M);
  out.pixel_values.resize(size_t(out.num_patches * out.patch_dim));
  float* dst = out.pixel_values.data();
  // Row order: merge windows in raster order, then the m x m patches inside each; columns: channel,
  // temporal copy, row and column inside the patch (permute(0, 2, 5, 3, 6, 1, 4, 7) in patchify).
  for (int bh = 0; bh < grid.h / M; ++bh)
    for (int bw = 0; bw < grid.w / M; ++bw)
      for (int mh = 0; mh < M; ++mh)
        for (int mw = 0; mw < M; ++mw) {
          const int gy = bh * M + mh, gx = bw * M + mw;
          for (int c = 0; c < 3; ++c)
            for (int t = 0; t < T; ++t)
              for (int py = 0; py < P; ++py)
                for (int px = 0; px < P; ++px) {
                  const size_t y = size_t(gy) * P + py, x = size_t(gx) * P + px;
                  *dst++ = plane[(y * out_w + x) * 3 + c];
                }
        }
  return out;
}

}  // namespace pagoda
