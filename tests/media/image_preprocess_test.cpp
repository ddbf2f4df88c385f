// The Qwen2-VL image processor against transformers 5.17's own output for the fixture images
// (tests/fixtures/vision/qwen3_5-tiny-vision/pixels.safetensors, made by
// tools/make_vision_fixtures.py with torch 2.11 on the CPU), and smart_resize against values worked
// by hand from the Python formula.
#include "media/image_preprocess.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/build_paths.h"
#include "media_test_util.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "media/image_decode.h"

namespace pagoda {
namespace {

using media_test::fixture_dir;
using media_test::read_bytes;

TEST(SmartResize, MatchesThePythonFormulaWorkedByHand) {
  struct Case {
    int64_t h, w, factor, min_px, max_px;
    int exp_h, exp_w;
  };
  const Case cases[] = {
      // 80/32 = 2.5: Python's round() goes to the even 2 (not 3): 64 x 64 = 4096, exactly min.
      {80, 80, 32, 4096, 65536, 64, 64},
      // 112/32 = 3.5 rounds to the even 4: 128 x 128.
      {112, 112, 32, 4096, 65536, 128, 128},
      // The fixture's four: 64x96 kept; 50x75 -> round(1.5625)=2, round(2.34)=2 -> 64x64; 200x300
      // ->
      // 6, 9 -> 192x288; 40x130 -> 1, 4 -> 32x128 (reference.json's resized_to).
      {64, 96, 32, 4096, 65536, 64, 96},
      {50, 75, 32, 4096, 65536, 64, 64},
      {200, 300, 32, 4096, 65536, 192, 288},
      {40, 130, 32, 4096, 65536, 32, 128},
      // Over max: 992 x 992 > 65536; beta = sqrt(1e6 / 65536) = 3.90625, 1000/3.90625/32 = 8 ->
      // 256.
      {1000, 1000, 32, 4096, 65536, 256, 256},
      // Under min: 0 x 32; beta = sqrt(4096/200) = 4.5255; ceil(10*4.5255/32 = 1.41) = 2 -> 64,
      // ceil(20*4.5255/32 = 2.83) = 3 -> 96.
      {10, 20, 32, 4096, 65536, 64, 96},
      // Over max with a short side: round(187.5) = 188 (even); beta = sqrt(192000/65536) = 1.7116;
      // floor(32/1.7116/32 = 0.58) = 0 -> max(32, 0) = 32; floor(6000/1.7116/32 = 109.5) -> 3488.
      {32, 6000, 32, 4096, 65536, 32, 3488},
      // Qwen2-VL's defaults (factor 28, 56*56 .. 28*28*1280) on 1080p: 1092 x 1932 too many;
      // beta = sqrt(2073600/1003520) = 1.43748; floor(26.83) = 26 -> 728, floor(47.70) = 47 ->
      // 1316.
      {1080, 1920, 28, 3136, 1003520, 728, 1316},
      // Ratio exactly 200 is allowed: round(62.5) = 62 (even) but 0 x 1984 < min -> 32 x 928.
      {10, 2000, 32, 4096, 65536, 32, 928},
  };
  for (const Case& c : cases) {
    const ResizedSize r = smart_resize(c.h, c.w, c.factor, c.min_px, c.max_px);
    EXPECT_EQ(r.height, c.exp_h) << c.h << "x" << c.w;
    EXPECT_EQ(r.width, c.exp_w) << c.h << "x" << c.w;
  }
}

TEST(SmartResize, AspectRatioOver200IsAnError) {
  EXPECT_THROW(smart_resize(10, 2010, 32, 4096, 65536), Error);
  EXPECT_THROW(smart_resize(2010, 10, 32, 4096, 65536), Error);
  try {
    smart_resize(1, 201, 32, 4096, 65536);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aspect ratio"), std::string::npos) << e.what();
  }
}

TEST(Qwen2VLImageConfig, ReadsTheFixturesPreprocessorConfig) {
  const Qwen2VLImageConfig c = Qwen2VLImageConfig::from_model_dir(fixture_dir());
  EXPECT_EQ(c.patch_size, 16);
  EXPECT_EQ(c.temporal_patch_size, 2);
  EXPECT_EQ(c.merge_size, 2);
  EXPECT_EQ(c.min_pixels, 4096);
  EXPECT_EQ(c.max_pixels, 65536);
  EXPECT_EQ(c.image_mean[1], 0.5f);
  EXPECT_EQ(c.image_std[2], 0.5f);
  EXPECT_DOUBLE_EQ(c.rescale_factor, 0.00392156862745098);
}

TEST(Qwen2VLImageConfig, RefusesWhatItDoesNotImplement) {
  EXPECT_THROW(Qwen2VLImageConfig::from_json_text(R"({"resample": 2})", "cfg"), Error);
  EXPECT_THROW(Qwen2VLImageConfig::from_json_text(
                   R"({"image_processor_type": "SiglipImageProcessor"})", "cfg"),
               Error);
  EXPECT_THROW(Qwen2VLImageConfig::from_json_text(R"({"image_std": [0.5, 0, 0.5]})", "cfg"), Error);
  EXPECT_THROW(Qwen2VLImageConfig::from_json_text("{not json", "cfg"), Error);
  EXPECT_THROW(Qwen2VLImageConfig::from_model_dir("/nonexistent"), Error);
  // Legacy top-level min_pixels / max_pixels override size, as in Qwen2VLImageProcessor.__init__.
  const auto c = Qwen2VLImageConfig::from_json_text(
      R"({"size": {"shortest_edge": 10, "longest_edge": 20}, "min_pixels": 100, "max_pixels": 200})",
      "cfg");
  EXPECT_EQ(c.min_pixels, 100);
  EXPECT_EQ(c.max_pixels, 200);
}

TEST(Qwen2VLImageProcessor, TokenCountWithoutPixels) {
  const Qwen2VLImageConfig c = Qwen2VLImageConfig::from_model_dir(fixture_dir());
  // reference.json's grids: [1,4,6] -> 24 patches / 4 = 6 tokens; [1,4,4] -> 4; [1,12,18] -> 54;
  // [1,2,8] -> 4 (the prompts hold that many image tokens, 509).
  EXPECT_EQ(qwen2vl_image_token_count(c, 64, 96), 6);
  EXPECT_EQ(qwen2vl_image_token_count(c, 50, 75), 4);
  EXPECT_EQ(qwen2vl_image_token_count(c, 200, 300), 54);
  EXPECT_EQ(qwen2vl_image_token_count(c, 40, 130), 4);
}

// pixel_values from pagoda against transformers' for each fixture image.
struct Comparison {
  double max_abs_diff = 0;
  int64_t values = 0;
  int64_t exact = 0;  // within 1e-6
};

TEST(Qwen2VLImageProcessor, MatchesTransformersPixelValues) {
  const Qwen2VLImageConfig config = Qwen2VLImageConfig::from_model_dir(fixture_dir());
  const auto pixels = SafetensorsFile::open(fixture_dir() + "/pixels.safetensors");
  auto find = [&](const std::string& name) -> const TensorView& {
    for (const TensorView& t : pixels->tensors())
      if (t.name == name) return t;
    throw Error("no tensor " + name);
  };
  std::ifstream ref_file(fixture_dir() + "/reference.json");
  const auto images = nlohmann::json::parse(ref_file)["images"];
  ASSERT_EQ(images.size(), 4u);
  const double one_level = 1.0 / 127.5;  // one uint8 step after (x - 127.5) / 127.5
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string file = images[i]["file"];
    SCOPED_TRACE(file);
    const RgbImage image = decode_image(read_bytes(fixture_dir() + "/images/" + file));
    const ImagePatches got = qwen2vl_preprocess(image, config);

    const TensorView& grid = find("image" + std::to_string(i) + ".grid_thw");
    ASSERT_EQ(grid.dtype, DType::I32);
    ASSERT_EQ(grid.numel(), 3);
    int32_t thw[3];
    std::memcpy(thw, grid.data, sizeof thw);
    EXPECT_EQ(got.grid.t, thw[0]);
    EXPECT_EQ(got.grid.h, thw[1]);
    EXPECT_EQ(got.grid.w, thw[2]);

    const TensorView& want = find("image" + std::to_string(i) + ".pixel_values");
    ASSERT_EQ(want.dtype, DType::F32);
    ASSERT_EQ(want.shape.size(), 2u);
    ASSERT_EQ(want.shape[0], got.num_patches);
    ASSERT_EQ(want.shape[1], got.patch_dim);
    ASSERT_EQ(got.pixel_values.size(), size_t(want.numel()));
    const float* ref = reinterpret_cast<const float*>(want.data);
    Comparison cmp;
    for (size_t k = 0; k < got.pixel_values.size(); ++k) {
      const double d = std::abs(double(got.pixel_values[k]) - double(ref[k]));
      cmp.max_abs_diff = std::max(cmp.max_abs_diff, d);
      cmp.exact += d <= 1e-6;
      ++cmp.values;
    }
    std::printf("  %s (%s): %lld of %lld values within 1e-6, max |diff| %.3g\n", file.c_str(),
                images[i]["resized"].get<bool>() ? "resized" : "not resized", (long long)cmp.exact,
                (long long)cmp.values, cmp.max_abs_diff);
    // Our resize is torch's uint8 integer arithmetic, so every value is expected to be equal, the
    // resized images included.
    EXPECT_EQ(cmp.exact, cmp.values);
    EXPECT_LE(cmp.max_abs_diff, 1e-6) << "one uint8 level is " << one_level;
  }
}

TEST(Qwen2VLImageProcessor, TransformersDropsAlphaRatherThanCompositing) {
  // transformers 5.17's convert_to_rgb is PIL's plain convert("RGB"): the RGBA fixture matches
  // only with alpha dropped (MatchesTransformersPixelValues); composited over white it differs.
  const Qwen2VLImageConfig config = Qwen2VLImageConfig::from_model_dir(fixture_dir());
  const auto pixels = SafetensorsFile::open(fixture_dir() + "/pixels.safetensors");
  const TensorView* want = nullptr;
  for (const TensorView& t : pixels->tensors())
    if (t.name == "image3.pixel_values") want = &t;
  ASSERT_NE(want, nullptr);
  const auto bytes = read_bytes(fixture_dir() + "/images/d_40x130_rgba.png");
  const ImagePatches composited =
      qwen2vl_preprocess(decode_image(bytes, {.alpha = AlphaMode::kCompositeOverWhite}), config);
  ASSERT_EQ(composited.pixel_values.size(), size_t(want->numel()));
  EXPECT_NE(std::memcmp(composited.pixel_values.data(), want->data, want->nbytes), 0);
}

TEST(Qwen2VLImageProcessor, ResizeKeepsAConstantImageConstant) {
  // Weights sum to 1 within int16 rounding: a flat image stays flat, up and down.
  RgbImage flat{37, 23, std::vector<uint8_t>(37 * 23 * 3, 200)};
  for (auto [h, w] : {std::pair{64, 96}, std::pair{8, 8}, std::pair{23, 100}}) {
    const RgbImage r = resize_bicubic_antialiased_uint8(flat, h, w);
    ASSERT_EQ(r.rgb.size(), size_t(h) * w * 3);
    for (uint8_t v : r.rgb) ASSERT_EQ(v, 200);
  }
}

}  // namespace
}  // namespace pagoda
