// The tiny multimodal Qwen3.5 fixture (tools/make_vision_fixtures.py, transformers 5.17 on the GPU
// machine): tests/fixtures/vision/qwen3_5-tiny-vision/ holds the checkpoint, its images,
// pixels.safetensors (the image processor's pixel_values and grid of each image, and the tower's
// merged output) and reference.json (greedy tokens and last-prompt logits of prompts with 1-3 images).
// Shared by the CPU tests (vision_reference_test.cpp) and the GPU ones.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/build_paths.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/multimodal.h"
#include "io/safetensors.h"
#include "model/vision_encoder.h"

namespace pagoda::vision_test {

// The dense decoder's fixture; qwen3_5_moe-tiny-vision has the same tower shape, images and prompts
// over a Qwen3.5-MoE decoder.
inline constexpr const char* kDense = "qwen3_5-tiny-vision";
inline constexpr const char* kMoe = "qwen3_5_moe-tiny-vision";

inline std::string fixture_dir(const std::string& name = kDense) {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/vision/" + name;
}

inline nlohmann::json reference(const std::string& name = kDense) {
  std::ifstream in(fixture_dir(name) + "/reference.json");
  return nlohmann::json::parse(in);
}

// A tensor of pixels.safetensors as floats / ints.
struct Pixels {
  explicit Pixels(const std::string& name = kDense) : file(SafetensorsFile::open(fixture_dir(name) + "/pixels.safetensors")) {}
  std::unique_ptr<SafetensorsFile> file;
  const TensorView& get(const std::string& name) const {
    for (const TensorView& t : file->tensors())
      if (t.name == name) return t;
    throw Error("pixels.safetensors has no " + name);
  }
  std::vector<float> floats(const std::string& name) const {
    const TensorView& t = get(name);
    EXPECT_EQ(t.dtype, DType::F32) << name;
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, t.nbytes);
    return v;
  }
  std::vector<int32_t> ints(const std::string& name) const {
    const TensorView& t = get(name);
    EXPECT_EQ(t.dtype, DType::I32) << name;
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, t.nbytes);
    return v;
  }
};

// Image i of the fixture as the engine takes it: transformers' pixel values and grid.
inline std::shared_ptr<ImageInput> image_input(const Pixels& px, int i) {
  auto img = std::make_shared<ImageInput>();
  const std::string p = "image" + std::to_string(i) + ".";
  const std::vector<int32_t> grid = px.ints(p + "grid_thw");
  img->grid_t = grid.at(0);
  img->grid_h = grid.at(1);
  img->grid_w = grid.at(2);
  img->pixel_values = px.floats(p + "pixel_values");
  img->patch_dim = static_cast<int64_t>(img->pixel_values.size()) / (int64_t{img->grid_t} * img->grid_h * img->grid_w);
  img->num_tokens = img->grid_t * img->grid_h * img->grid_w / 4;
  img->hash = image_hash(img->grid_t, img->grid_h, img->grid_w, img->pixel_values);
  return img;
}

// The fixture's vision tower on `be`: each image's merged output within `tol` (relative to the
// largest value, at least 1) of transformers'.
inline void expect_tower_matches(Backend& be, double tol, const std::string& name = kDense) {
  const Checkpoint ckpt = Checkpoint::open_dir(fixture_dir(name));
  std::unique_ptr<VisionEncoder> enc = load_vision_encoder(ckpt, be);
  ASSERT_NE(enc, nullptr);
  const Pixels px(name);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("image " + std::to_string(i));
    const auto img = image_input(px, i);
    const std::vector<float> want = px.floats("image" + std::to_string(i) + ".merged");
    ASSERT_EQ(static_cast<int64_t>(want.size()), int64_t{img->num_tokens} * enc->out_hidden());
    Buffer buf = be.alloc(want.size() * sizeof(float));
    Tensor out = buf.tensor(DType::F32, {img->num_tokens, enc->out_hidden()});
    enc->encode(img->grid_t, img->grid_h, img->grid_w, img->pixel_values, out);
    std::vector<float> got(want.size());
    be.copy_to_host(got.data(), out.data, got.size() * sizeof(float));
    double worst = 0, scale = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(got[k]) - want[k]));
      scale = std::max(scale, std::abs(static_cast<double>(want[k])));
    }
    EXPECT_GT(scale, 0.1) << "the reference output is not trivially small";
    EXPECT_LT(worst, tol * std::max(1.0, scale)) << "largest |pagoda - transformers| over " << want.size();
  }
}

struct Out {
  std::vector<int32_t> tokens;
  std::vector<std::pair<int32_t, float>> first;  // the first position's logprobs (the whole vocabulary)
  int32_t cached = 0;
};

inline EngineConfig engine_config(const std::string& device, const std::string& dtype) {
  EngineConfig c;
  c.device = device;
  c.dtype = dtype;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 24;  // the 54-token image and the prompts run in chunks beside decodes
  c.max_model_len = 256;
  c.num_gpu_blocks_override = 200;
  return c;
}

// Greedy runs of reference cases `which` (all at once when `together`), eos ignored, the first
// position's logprobs over the whole vocabulary.
inline std::vector<Out> run_cases(Engine& engine, const std::vector<size_t>& which, bool together,
                                  const std::string& name = kDense) {
  const nlohmann::json ref = reference(name);
  const Pixels px(name);
  const auto vocab = ref.at("config").at("text_config").at("vocab_size").get<int32_t>();
  std::vector<Out> out(which.size());
  std::map<int64_t, size_t> index;
  auto drain = [&] {
    for (int steps = 0; engine.has_unfinished() && steps < 10000; ++steps)
      for (const RequestOutput& o : engine.step()) {
        Out& r = out[index.at(o.id)];
        if (r.tokens.empty() && !o.samples.empty()) r.first = o.samples.front().top_logprobs;
        r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        if (o.finished) r.cached = o.num_cached_tokens;
      }
    EXPECT_FALSE(engine.has_unfinished());
  };
  for (size_t k = 0; k < which.size(); ++k) {
    const auto& c = ref.at("cases").at(which[k]);
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = static_cast<int32_t>(c.at("generated_ids").size());
    p.logprobs = vocab;
    for (int i : c.at("images").get<std::vector<int>>()) p.images.push_back(image_input(px, i));
    index[engine.add_request(c.at("prompt_ids").get<std::vector<int32_t>>(), p)] = k;
    if (!together) drain();
  }
  drain();
  return out;
}

// transformers' tokens, and its last-prompt logits as logprobs within `tol`.
inline void expect_reference(const Out& got, size_t case_index, double tol, const std::string& name = kDense) {
  const nlohmann::json ref = reference(name);
  const auto& c = ref.at("cases").at(case_index);
  SCOPED_TRACE("reference case " + std::to_string(case_index));
  EXPECT_EQ(got.tokens, c.at("generated_ids").get<std::vector<int32_t>>());
  const auto logits = c.at("prompt_last_logits").get<std::vector<double>>();
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double l : logits) sum += std::exp(l - top);
  const double lse = top + std::log(sum);
  ASSERT_EQ(got.first.size(), logits.size()) << "the whole vocabulary's logprobs were asked for";
  double worst = 0;
  for (const auto& [token, logprob] : got.first)
    worst = std::max(worst, std::abs(static_cast<double>(logprob) - (logits.at(static_cast<size_t>(token)) - lse)));
  EXPECT_LT(worst, tol) << "first-position logprobs differ from transformers'";
}

}  // namespace pagoda::vision_test
