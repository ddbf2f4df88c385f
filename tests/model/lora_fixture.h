// Tiny random LoRA adapters for the family fixtures, written as PEFT writes them
// (adapter_config.json; adapter_model.safetensors with base_model.model.<module>.lora_A / lora_B),
// and the reference they are held to: a dense checkpoint of the merged weights W + s·B·A (PEFT's
// merge_and_unload; s = alpha / r, or alpha / √r with rsLoRA) computed in double. Shared by the
// model tests (lora_test.cpp) and the server's (tests/server/lora_server_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../io/io_test_util.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "reference_fixture.h"

namespace pagoda::lora_test {

inline const std::regex kProjection(
    R"(\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|in_proj_qkv|in_proj_z|out_proj)\.weight$)");

struct AdapterSpec {
  int64_t rank = 4;
  double alpha = 8;
  bool rslora = false;
  uint32_t seed = 1;
  // Only projections whose name contains this (empty: all of them).
  std::string only;
};

// One module's low-rank pair, row-major: A [r, in], B [out, r].
struct Pair {
  std::vector<float> a, b;
  int64_t in = 0, out = 0;
};

// Writes a PEFT adapter for fixture `fixture` into `dir` and returns its pairs by checkpoint name.
inline std::map<std::string, Pair> write_adapter(const std::string& fixture, const AdapterSpec& s, const std::string& dir) {
  const Checkpoint ckpt = Checkpoint::open_dir(testing::fixture_model_dir(fixture));
  std::mt19937 rng(s.seed);
  std::uniform_real_distribution<float> u(-0.25f, 0.25f);
  std::map<std::string, Pair> pairs;
  std::vector<io_test::Tensor> tensors;
  std::vector<std::string> targets;
  for (const TensorView* t : ckpt.all()) {
    if (!std::regex_search(t->name, kProjection) || t->shape.size() != 2) continue;
    if (!s.only.empty() && t->name.find(s.only) == std::string::npos) continue;
    Pair p;
    p.out = t->shape[0];
    p.in = t->shape[1];
    p.a.resize(static_cast<size_t>(s.rank * p.in));
    p.b.resize(static_cast<size_t>(p.out * s.rank));
    for (float& v : p.a) v = u(rng);
    for (float& v : p.b) v = u(rng);
    const std::string stem = "base_model.model." + t->name.substr(0, t->name.size() - 7);
    tensors.push_back({stem + ".lora_A.weight", "F32", {s.rank, p.in}, io_test::bytes_of(p.a)});
    tensors.push_back({stem + ".lora_B.weight", "F32", {p.out, s.rank}, io_test::bytes_of(p.b)});
    const std::string leaf = t->name.substr(0, t->name.size() - 7);
    targets.push_back(leaf.substr(leaf.rfind('.') + 1));
    pairs[t->name] = std::move(p);
  }
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  std::filesystem::create_directories(dir);
  const nlohmann::json config = {{"peft_type", "LORA"},         {"r", s.rank},
                                 {"lora_alpha", s.alpha},       {"use_rslora", s.rslora},
                                 {"target_modules", targets},   {"bias", "none"},
                                 {"fan_in_fan_out", false},     {"modules_to_save", nullptr},
                                 {"base_model_name_or_path", fixture}};
  io_test::write_file(dir + "/adapter_config.json", config.dump());
  io_test::write_file(dir + "/adapter_model.safetensors", io_test::build(tensors));
  return pairs;
}

// The fixture with every adapted weight replaced by W + s·B·A (in double, stored f32).
inline void write_merged(const std::string& fixture, const std::map<std::string, Pair>& pairs, const AdapterSpec& s,
                  const std::string& dir) {
  const std::string src = testing::fixture_model_dir(fixture);
  const Checkpoint ckpt = Checkpoint::open_dir(src);
  const double scale = s.rslora ? s.alpha / std::sqrt(static_cast<double>(s.rank)) : s.alpha / s.rank;
  std::vector<io_test::Tensor> tensors;
  for (const TensorView* t : ckpt.all()) {
    ASSERT_EQ(t->dtype, DType::F32) << t->name;
    std::vector<float> w(static_cast<size_t>(t->numel()));
    std::memcpy(w.data(), t->data, t->nbytes);
    if (const auto it = pairs.find(t->name); it != pairs.end()) {
      const Pair& p = it->second;
      for (int64_t o = 0; o < p.out; ++o)
        for (int64_t i = 0; i < p.in; ++i) {
          double d = 0;
          for (int64_t r = 0; r < s.rank; ++r)
            d += static_cast<double>(p.b[static_cast<size_t>(o * s.rank + r)]) * p.a[static_cast<size_t>(r * p.in + i)];
          float& v = w[static_cast<size_t>(o * p.in + i)];
          v = static_cast<float>(static_cast<double>(v) + scale * d);
        }
    }
    tensors.push_back({t->name, "F32", t->shape, io_test::bytes_of(w)});
  }
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(src + "/config.json", dir + "/config.json");
  io_test::write_file(dir + "/model.safetensors", io_test::build(tensors));
}

struct Req {
  std::vector<int32_t> prompt;
  int32_t lora = -1;
};

struct Out {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int32_t cached = 0;
};

// Greedy runs (logprobs too) of `reqs` on the model in `dir` with `adapters` (name = "a<i>"); together: all queued
// at once (else one after another).
inline std::vector<Out> run(const std::string& dir, const std::vector<std::string>& adapters,
                            const std::vector<Req>& reqs, bool together, bool caching = true, int32_t max_tokens = 10,
                            const std::string& device = "cpu", const std::string& dtype = "auto", int32_t tp = 1,
                            const std::function<void(EngineConfig&)>& tweak = {}) {
  EngineConfig config;
  config.device = device;
  config.tensor_parallel_size = tp;
  config.dtype = dtype;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 24;  // prompts are prefilled in chunks beside decodes
  config.max_model_len = 256;
  config.num_gpu_blocks_override = 200;
  config.enable_prefix_caching = caching;
  config.lora.enabled = !adapters.empty();
  config.lora.max_loras = std::max<int32_t>(1, static_cast<int32_t>(adapters.size()));
  config.lora.max_lora_rank = 8;
  for (size_t i = 0; i < adapters.size(); ++i) config.lora.modules.push_back({"a" + std::to_string(i), adapters[i], ""});
  if (tweak) tweak(config);
  Engine engine(dir, config);
  std::vector<Out> out(reqs.size());
  std::map<int64_t, size_t> index;
  auto drain = [&] {
    for (int steps = 0; engine.has_unfinished() && steps < 10000; ++steps)
      for (const RequestOutput& o : engine.step()) {
        Out& r = out[index.at(o.id)];
        r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        for (const SampleResult& s : o.samples) r.logprobs.push_back(s.logprob);
        if (o.finished) r.cached = o.num_cached_tokens;
      }
    EXPECT_FALSE(engine.has_unfinished());
  };
  for (size_t i = 0; i < reqs.size(); ++i) {
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = max_tokens;
    p.logprobs = 0;
    p.lora = reqs[i].lora;
    index[engine.add_request(reqs[i].prompt, p)] = i;
    if (!together) drain();
  }
  drain();
  return out;
}

// One greedy request (logprobs too) of `prompt` under adapter id `lora` on a running engine, stepped
// until idle: its output and the finish detail (why it failed, when it did).
inline std::pair<Out, std::string> generate_one(Engine& engine, const std::vector<int32_t>& prompt, int32_t lora,
                                                int32_t max_tokens = 10) {
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = max_tokens;
  p.logprobs = 0;
  p.lora = lora;
  const int64_t id = engine.add_request(prompt, p);
  Out out;
  std::string detail;
  for (int steps = 0; engine.has_unfinished() && steps < 1000; ++steps)
    for (const RequestOutput& o : engine.step())
      if (o.id == id) {
        out.tokens.insert(out.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        for (const SampleResult& s : o.samples) out.logprobs.push_back(s.logprob);
        if (o.finished) detail = o.finish_detail;
      }
  return {out, detail};
}

inline std::vector<int32_t> prompt_of(uint32_t seed, size_t len, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(len);
  for (int32_t& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab - 10)) + 5;
  return p;
}

inline int32_t vocab_of(const std::string& fixture) {
  std::ifstream in(testing::fixture_model_dir(fixture) + "/config.json");
  const nlohmann::json c = nlohmann::json::parse(in);
  return c.contains("vocab_size") ? c["vocab_size"].get<int32_t>() : c["text_config"]["vocab_size"].get<int32_t>();
}

// The adapters PEFT made for the family fixtures (tools/make_lora_fixtures.py, run with peft on the GPU
// machine): tests/fixtures/lora/<name>/ holds adapter_config.json, adapter_model.safetensors as
// save_pretrained wrote them and reference.json, PeftModel's fp32 greedy tokens and last-prompt logits.
inline std::string peft_fixture_dir(const std::string& name) {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/lora/" + name;
}

inline std::vector<std::string> peft_fixtures() {
  std::vector<std::string> names;
  const std::filesystem::path root = peft_fixture_dir("");
  if (std::filesystem::is_directory(root))
    for (const auto& e : std::filesystem::directory_iterator(root))
      if (std::filesystem::exists(e.path() / "reference.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The base fixture with PEFT's adapter, every reference prompt at once (prompts chunked beside
// decodes): PEFT's greedy tokens, and at the first generated position the whole vocabulary's
// logprobs equal to the log-softmax of PEFT's last-prompt logits within `tol`.
inline void expect_matches_peft(const std::string& name, const std::string& device, const std::string& dtype,
                                double tol) {
  std::ifstream in(peft_fixture_dir(name) + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::string base = ref.at("base").get<std::string>();
  const int32_t vocab = vocab_of(base);
  EngineConfig config;
  config.device = device;
  config.dtype = dtype;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 24;
  config.max_model_len = 256;
  config.num_gpu_blocks_override = 200;
  config.lora.enabled = true;
  config.lora.max_loras = 1;
  config.lora.max_lora_rank = 16;
  config.lora.modules.push_back({name, peft_fixture_dir(name), ""});
  Engine engine(testing::fixture_model_dir(base), config);
  const auto& cases = ref.at("cases");
  ASSERT_GE(cases.size(), 3u);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < cases.size(); ++i) {
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = static_cast<int32_t>(cases[i].at("generated_ids").size());
    p.logprobs = vocab;
    p.lora = 0;
    index[engine.add_request(cases[i].at("prompt_ids").get<std::vector<int32_t>>(), p)] = i;
  }
  std::vector<std::vector<int32_t>> tokens(cases.size());
  std::vector<std::vector<std::pair<int32_t, float>>> first(cases.size());
  for (int steps = 0; engine.has_unfinished() && steps < 10000; ++steps)
    for (const RequestOutput& o : engine.step()) {
      const size_t i = index.at(o.id);
      if (tokens[i].empty() && !o.samples.empty()) first[i] = o.samples.front().top_logprobs;
      tokens[i].insert(tokens[i].end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  ASSERT_FALSE(engine.has_unfinished());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(name + ", prompt of " + std::to_string(cases[i].at("prompt_ids").size()) + " tokens");
    EXPECT_EQ(tokens[i], cases[i].at("generated_ids").get<std::vector<int32_t>>());
    const auto logits = cases[i].at("prompt_last_logits").get<std::vector<double>>();
    ASSERT_EQ(logits.size(), static_cast<size_t>(vocab));
    const double top = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double l : logits) sum += std::exp(l - top);
    const double lse = top + std::log(sum);
    ASSERT_EQ(first[i].size(), static_cast<size_t>(vocab)) << "the whole vocabulary's logprobs were asked for";
    double worst = 0;
    for (const auto& [token, logprob] : first[i])
      worst = std::max(worst, std::abs(static_cast<double>(logprob) - (logits.at(static_cast<size_t>(token)) - lse)));
    EXPECT_LT(worst, tol) << "first-position logprobs differ from PEFT's";
  }
}

inline void expect_same(const Out& got, const Out& want, double tol) {
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  for (size_t t = 0; t < got.logprobs.size(); ++t) EXPECT_NEAR(got.logprobs[t], want.logprobs[t], tol) << "token " << t;
}

// Four adapters through two device slots (and two kept on the host, so that adapters are read again
// from their directories), every adapter's requests and the base model's queued at once: each
// sequence gets the tokens it gets when every adapter has a slot of its own.
inline void expect_swapping_changes_nothing(const std::string& fixture, const std::string& device,
                                            const std::string& dtype, double tol) {
  io_test::TempDir tmp;
  std::vector<std::string> dirs;
  for (uint32_t i = 0; i < 4; ++i) {
    dirs.push_back(tmp.file("a" + std::to_string(i)));
    write_adapter(fixture, {.rank = 2 + 2 * static_cast<int64_t>(i), .alpha = 8, .seed = 60 + i}, dirs.back());
  }
  const int32_t vocab = vocab_of(fixture);
  std::vector<Req> reqs;
  for (int32_t i = 0; i < 12; ++i)
    reqs.push_back({prompt_of(300 + static_cast<uint32_t>(i), 4 + 5 * static_cast<size_t>(i), vocab), i % 5 - 1});
  const std::string dir = testing::fixture_model_dir(fixture);
  const std::vector<Out> roomy = run(dir, dirs, reqs, true, false, 10, device, dtype);
  const std::vector<Out> tight = run(dir, dirs, reqs, true, false, 10, device, dtype, 1, [](EngineConfig& c) {
    c.lora.max_loras = 2;
    c.lora.max_cpu_loras = 2;
  });
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + ", adapter " + std::to_string(reqs[i].lora));
    expect_same(tight[i], roomy[i], tol);
  }
}

}  // namespace pagoda::lora_test
