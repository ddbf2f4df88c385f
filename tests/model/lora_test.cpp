// LoRA adapters on the CPU. A family fixture gets tiny random PEFT adapters (written here as PEFT
// writes them: adapter_config.json, adapter_model.safetensors with base_model.model.<module>.lora_A /
// lora_B) on every projection of its decoder; the reference is a dense checkpoint of the merged
// weights W + s·B·A (PEFT's merge_and_unload, s = alpha / r, or alpha / √r with rsLoRA) computed here
// in double, which pagoda runs as a plain model (the family fixtures hold that path to
// transformers). The adapter run must give its greedy tokens and logprobs; a batch mixing adapters
// and the base model gives each sequence what it gets alone; the prefix cache never serves one
// adapter's blocks to another; bad adapters are refused naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "../io/io_test_util.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "lora_fixture.h"
#include "reference_fixture.h"

namespace pagoda {
namespace {

using lora_test::AdapterSpec;
using lora_test::expect_same;
using lora_test::Out;
using lora_test::prompt_of;
using lora_test::Req;
using lora_test::run;
using lora_test::vocab_of;
using lora_test::write_adapter;
using lora_test::write_merged;

class LoraFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(LoraFamilies, TheAdapterGivesTheMergedWeightsTokensAndLogprobs) {
  const std::string fixture = GetParam();
  io_test::TempDir tmp;
  const AdapterSpec spec{.rank = 4, .alpha = 8, .rslora = false, .seed = 7};
  const auto pairs = write_adapter(fixture, spec, tmp.file("adapter"));
  ASSERT_GT(pairs.size(), 4u);
  write_merged(fixture, pairs, spec, tmp.file("merged"));
  const int32_t vocab = vocab_of(fixture);
  const std::vector<Req> with = {{prompt_of(1, 9, vocab), 0}, {prompt_of(2, 41, vocab), 0}};
  const std::vector<Req> plain = {{with[0].prompt}, {with[1].prompt}};
  const std::vector<Out> want = run(tmp.file("merged"), {}, plain, false);
  const std::vector<Out> got = run(testing::fixture_model_dir(fixture), {tmp.file("adapter")}, with, false);
  const std::vector<Out> base = run(testing::fixture_model_dir(fixture), {}, plain, false);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    expect_same(got[i], want[i], 1e-4);
  }
  EXPECT_NE(got[1].tokens, base[1].tokens) << "the adapter changed nothing: is it applied?";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LoraFamilies,
                         ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text", "llama3-tiny-tied-bias",
                                           "gemma3-tiny-text"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// PEFT's own adapters on the family fixtures (tools/make_lora_fixtures.py): its greedy tokens and
// its last-prompt logits (as logprobs over the whole vocabulary).
TEST(LoraPeftFixtures, EachFamilyHasPeftsAdapter) {
  const auto names = lora_test::peft_fixtures();
  EXPECT_GE(names.size(), 4u) << "tests/fixtures/lora: run tools/make_lora_fixtures.py (peft) and commit its output";
}

class LoraPeft : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraPeft, GivesPeftsTokensAndLogits) { lora_test::expect_matches_peft(GetParam(), "cpu", "auto", 1e-4); }

INSTANTIATE_TEST_SUITE_P(Fixtures, LoraPeft, ::testing::ValuesIn(lora_test::peft_fixtures()),
                         testing::FixtureParamName());
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LoraPeft);

// Four adapters (one rsLoRA, one on the attention alone, ranks 2-8) and the base model in one
// batch, prompts chunked beside decodes: each sequence gets the tokens it gets alone.
TEST(LoraBatch, AMixOfAdaptersAndTheBaseGivesEachSequenceItsTokensAlone) {
  const std::string fixture = "qwen3-tiny-untied-gqa4";
  io_test::TempDir tmp;
  const AdapterSpec specs[] = {{.rank = 4, .alpha = 8, .seed = 11},
                               {.rank = 8, .alpha = 4, .rslora = true, .seed = 12},
                               {.rank = 2, .alpha = 2, .seed = 13, .only = "self_attn"},
                               {.rank = 6, .alpha = 12, .seed = 14}};
  std::vector<std::string> dirs;
  for (size_t i = 0; i < 4; ++i) {
    dirs.push_back(tmp.file("a" + std::to_string(i)));
    write_adapter(fixture, specs[i], dirs.back());
  }
  const int32_t vocab = vocab_of(fixture);
  std::vector<Req> reqs;
  for (int32_t i = 0; i < 10; ++i)
    reqs.push_back({prompt_of(100 + static_cast<uint32_t>(i), 5 + 7 * static_cast<size_t>(i), vocab), i % 5 - 1});
  const std::vector<Out> alone = run(testing::fixture_model_dir(fixture), dirs, reqs, false, false);
  const std::vector<Out> together = run(testing::fixture_model_dir(fixture), dirs, reqs, true, false);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + ", adapter " + std::to_string(reqs[i].lora));
    expect_same(together[i], alone[i], 1e-4);
  }
  // The adapters differ from each other and from the base model.
  EXPECT_NE(alone[0].tokens, alone[5].tokens);
  std::set<std::vector<int32_t>> distinct;
  const std::vector<int32_t> p = prompt_of(5, 30, vocab);
  std::vector<Req> same;
  for (int32_t a = -1; a < 4; ++a) same.push_back({p, a});
  for (const Out& o : run(testing::fixture_model_dir(fixture), dirs, same, true, false)) distinct.insert(o.tokens);
  EXPECT_EQ(distinct.size(), 5u);
}

// Tensor parallelism: each rank holds its shard of every adapter (B's rows beside a column-parallel
// weight, A's columns beside a row-parallel one); a mix of adapters and the base model at 2 and 4
// ranks gives the one-rank tokens, on a dense and the hybrid fixture (its GDN projections adapted).
TEST(LoraTensorParallel, AMixOfAdaptersGivesTheOneRankTokensAtTwoAndFourRanks) {
  for (const std::string fixture : {"qwen3-tiny-untied-gqa4", "qwen3_5-tiny-text"}) {
    SCOPED_TRACE(fixture);
    io_test::TempDir tmp;
    const AdapterSpec specs[] = {{.rank = 4, .alpha = 8, .seed = 21}, {.rank = 8, .alpha = 4, .rslora = true, .seed = 22}};
    std::vector<std::string> dirs;
    for (size_t i = 0; i < 2; ++i) {
      dirs.push_back(tmp.file("a" + std::to_string(i)));
      write_adapter(fixture, specs[i], dirs.back());
    }
    const int32_t vocab = vocab_of(fixture);
    std::vector<Req> reqs;
    for (int32_t i = 0; i < 6; ++i)
      reqs.push_back({prompt_of(200 + static_cast<uint32_t>(i), 6 + 9 * static_cast<size_t>(i), vocab), i % 3 - 1});
    const std::vector<Out> one = run(testing::fixture_model_dir(fixture), dirs, reqs, true, false);
    for (const int32_t tp : {2, 4}) {
      SCOPED_TRACE("tensor parallel size " + std::to_string(tp));
      const std::vector<Out> many = run(testing::fixture_model_dir(fixture), dirs, reqs, true, false, 10, "cpu", "auto", tp);
      for (size_t i = 0; i < reqs.size(); ++i) {
        SCOPED_TRACE("request " + std::to_string(i) + ", adapter " + std::to_string(reqs[i].lora));
        expect_same(many[i], one[i], 1e-4);
      }
    }
  }
}

// One prompt under adapter 0, the base model, adapter 0 again and adapter 1: only the repeat hits
// the cache, and every run gives the tokens of a run without the cache.
TEST(LoraBatch, ThePrefixCacheIsNeverSharedAcrossAdapters) {
  const std::string fixture = "qwen3_5-tiny-text";
  io_test::TempDir tmp;
  const std::vector<std::string> dirs = {tmp.file("a0"), tmp.file("a1")};
  write_adapter(fixture, {.rank = 4, .alpha = 8, .seed = 21}, dirs[0]);
  write_adapter(fixture, {.rank = 4, .alpha = 8, .seed = 22}, dirs[1]);
  const std::vector<int32_t> p = prompt_of(9, 70, vocab_of(fixture));
  const std::vector<Req> reqs = {{p, 0}, {p, -1}, {p, 0}, {p, 1}};
  const std::vector<Out> cached = run(testing::fixture_model_dir(fixture), dirs, reqs, false, true);
  const std::vector<Out> uncached = run(testing::fixture_model_dir(fixture), dirs, reqs, false, false);
  EXPECT_EQ(cached[0].cached, 0);
  EXPECT_EQ(cached[1].cached, 0) << "the base model read adapter 0's blocks";
  EXPECT_GT(cached[2].cached, 0) << "adapter 0's own repeat missed the cache";
  EXPECT_EQ(cached[3].cached, 0) << "adapter 1 read adapter 0's blocks";
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    expect_same(cached[i], uncached[i], 1e-4);
  }
}

// Adapters that cannot be served are refused before anything runs, naming the file and the fix.
TEST(LoraAdapterFiles, BadAdaptersAreRefusedNamingTheFile) {
  const std::string fixture = "qwen3-tiny-tied";
  io_test::TempDir tmp;
  const std::string good = tmp.file("good");
  write_adapter(fixture, {.rank = 4, .alpha = 8, .seed = 3}, good);
  auto engine_error = [&](const std::string& dir, int32_t max_rank = 8) {
    return io_test::error_of([&] {
      EngineConfig c;
      c.lora.enabled = true;
      c.lora.max_lora_rank = max_rank;
      c.lora.modules = {{"x", dir, ""}};
      Engine e(testing::fixture_model_dir(fixture), c);
    });
  };
  EXPECT_TRUE(io_test::contains(engine_error(good, 2), "--max-lora-rank"));
  EXPECT_TRUE(io_test::contains(engine_error(tmp.file("missing")), "no such directory"));
  // A lora_A without its lora_B.
  {
    const std::string dir = tmp.file("half");
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(good + "/adapter_config.json", dir + "/adapter_config.json");
    const std::vector<float> a(4 * 64, 0.1f);
    io_test::write_file(dir + "/adapter_model.safetensors",
                        io_test::build({{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", "F32",
                                         {4, 64}, io_test::bytes_of(a)}}));
    const std::string e = engine_error(dir);
    EXPECT_TRUE(io_test::contains(e, "adapter_model.safetensors")) << e;
    EXPECT_TRUE(io_test::contains(e, "no lora_B")) << e;
  }
  // An adapter of another model (a wider input) and one for a layer this model lacks.
  for (const auto& [name, shape_a, shape_b, want] :
       {std::tuple{"model.layers.0.self_attn.q_proj", std::vector<int64_t>{4, 128}, std::vector<int64_t>{64, 4},
                   "an adapter of another model"},
        std::tuple{"model.layers.9.self_attn.q_proj", std::vector<int64_t>{4, 64}, std::vector<int64_t>{64, 4},
                   "which this model has no projection for"}}) {
    const std::string dir = tmp.file(std::string("bad") + std::to_string(shape_a[1]) + want[0]);
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(good + "/adapter_config.json", dir + "/adapter_config.json");
    const std::vector<float> a(static_cast<size_t>(shape_a[0] * shape_a[1]), 0.1f);
    const std::vector<float> b(static_cast<size_t>(shape_b[0] * shape_b[1]), 0.1f);
    io_test::write_file(dir + "/adapter_model.safetensors",
                        io_test::build({{std::string("base_model.model.") + name + ".lora_A.weight", "F32", shape_a,
                                         io_test::bytes_of(a)},
                                        {std::string("base_model.model.") + name + ".lora_B.weight", "F32", shape_b,
                                         io_test::bytes_of(b)}}));
    const std::string e = engine_error(dir);
    EXPECT_TRUE(io_test::contains(e, want)) << e;
    EXPECT_TRUE(io_test::contains(e, dir)) << e;
  }
  // What PEFT trains beside the matrices, which is not applied: refused by name.
  {
    const std::string dir = tmp.file("dora");
    std::filesystem::create_directories(dir);
    std::ifstream in(good + "/adapter_config.json");
    nlohmann::json cfg = nlohmann::json::parse(in);
    cfg["use_dora"] = true;
    io_test::write_file(dir + "/adapter_config.json", cfg.dump());
    std::filesystem::copy_file(good + "/adapter_model.safetensors", dir + "/adapter_model.safetensors");
    EXPECT_TRUE(io_test::contains(engine_error(dir), "DoRA"));
  }
  // Fewer adapters kept on the host than on the device; two of one name; a request for an adapter
  // that is not served.
  EngineConfig c;
  c.lora.enabled = true;
  c.lora.modules = {{"x", good, ""}, {"y", good, ""}};
  c.lora.max_loras = 2;
  c.lora.max_cpu_loras = 1;
  EXPECT_TRUE(io_test::contains(io_test::error_of([&] { validate_engine_config(c); }), "--max-cpu-loras"));
  c.lora.max_cpu_loras = 0;
  c.lora.modules[1].name = "x";
  EXPECT_TRUE(io_test::contains(io_test::error_of([&] { validate_engine_config(c); }), "twice"));
  EngineConfig one;
  one.lora.enabled = true;
  one.lora.max_lora_rank = 8;
  one.lora.modules = {{"x", good, ""}};
  Engine e(testing::fixture_model_dir(fixture), one);
  SamplingParams p;
  p.lora = 1;
  EXPECT_TRUE(io_test::contains(io_test::error_of([&] { e.add_request({5, 6, 7}, p); }), "not served"));
}

// Adapters on mixture-of-experts experts are not served yet: refused before anything runs, naming
// the file and the module (PEFT's per-expert names, as it saves them for Qwen3-MoE).
TEST(LoraAdapterFiles, AnAdapterOnExpertsIsRefusedNamingTheModule) {
  io_test::TempDir tmp;
  const std::string dir = tmp.file("experts");
  std::filesystem::create_directories(dir);
  io_test::write_file(dir + "/adapter_config.json",
                      nlohmann::json{{"peft_type", "LORA"}, {"r", 4}, {"lora_alpha", 8}, {"bias", "none"}}.dump());
  const std::vector<float> a(4 * 48, 0.1f), b(24 * 4, 0.1f);
  const std::string stem = "base_model.model.model.layers.1.mlp.experts.0.gate_proj";
  io_test::write_file(dir + "/adapter_model.safetensors",
                      io_test::build({{stem + ".lora_A.weight", "F32", {4, 48}, io_test::bytes_of(a)},
                                      {stem + ".lora_B.weight", "F32", {24, 4}, io_test::bytes_of(b)}}));
  const std::string e = io_test::error_of([&] {
    EngineConfig c;
    c.lora.enabled = true;
    c.lora.max_lora_rank = 8;
    c.lora.modules = {{"x", dir, ""}};
    Engine engine(testing::fixture_model_dir("qwen3_moe-tiny-raw-topk"), c);
  });
  EXPECT_TRUE(io_test::contains(e, dir)) << e;
  EXPECT_TRUE(io_test::contains(e, "experts")) << e;
}

// More adapters than device slots (lora_fixture.h: 4 adapters through 2 slots and 2 host copies).
TEST(LoraSwap, MoreAdaptersThanSlotsAreSwappedInAndGiveTheSameTokens) {
  lora_test::expect_swapping_changes_nothing("qwen3_5-tiny-text", "cpu", "auto", 1e-4);
}

// Two slots, four adapters: the scheduler never runs requests of a third adapter beside two others.
TEST(LoraSwap, NoStepRunsMoreAdaptersThanSlots) {
  const std::string fixture = "qwen3-tiny-tied";
  io_test::TempDir tmp;
  EngineConfig c;
  c.max_num_seqs = 8;
  c.lora.enabled = true;
  c.lora.max_loras = 2;
  c.lora.max_lora_rank = 8;
  for (uint32_t i = 0; i < 4; ++i) {
    c.lora.modules.push_back({"a" + std::to_string(i), tmp.file("a" + std::to_string(i)), ""});
    write_adapter(fixture, {.rank = 4, .alpha = 8, .seed = 70 + i}, c.lora.modules.back().path);
  }
  Engine engine(testing::fixture_model_dir(fixture), c);
  for (int32_t i = 0; i < 8; ++i) {
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = 6;
    p.lora = i % 4;
    engine.add_request(prompt_of(400 + static_cast<uint32_t>(i), 9, vocab_of(fixture)), p);
  }
  size_t most = 0, finished = 0;
  std::set<int32_t> seen;
  for (int steps = 0; engine.has_unfinished() && steps < 1000; ++steps) {
    for (const RequestOutput& o : engine.step()) finished += o.finished ? 1 : 0;
    const EngineStats s = engine.core().stats();
    most = std::max(most, s.running_loras.size());
    seen.insert(s.running_loras.begin(), s.running_loras.end());
  }
  EXPECT_EQ(finished, 8u);
  EXPECT_EQ(most, 2u) << "two slots: at most (and here exactly) two adapters run at once";
  EXPECT_EQ(seen.size(), 4u);
}

// An adapter that can no longer be read when a step needs it (its directory gone; one adapter kept on
// the host, so it must be read again): its request fails, naming the directory, and the next steps
// serve the other adapter and the base model with their own tokens; the directory back, the adapter
// is read anew (the slot its failed step had chosen is not taken to hold it).
TEST(LoraSwap, AnAdapterThatCannotBeReadFailsItsRequestAndTheOthersGoOn) {
  const std::string fixture = "qwen3-tiny-tied";
  io_test::TempDir tmp;
  const std::vector<std::string> dirs = {tmp.file("a0"), tmp.file("a1")};
  write_adapter(fixture, {.rank = 4, .alpha = 8, .seed = 91}, dirs[0]);
  write_adapter(fixture, {.rank = 4, .alpha = 8, .seed = 92}, dirs[1]);
  const std::vector<int32_t> prompt = prompt_of(93, 12, vocab_of(fixture));
  const std::vector<Out> want =
      run(testing::fixture_model_dir(fixture), dirs, {{prompt, 0}, {prompt, -1}, {prompt, 1}}, false);
  EngineConfig c;
  c.lora.enabled = true;
  c.lora.max_lora_rank = 8;
  c.lora.max_loras = 1;
  c.lora.max_cpu_loras = 1;
  c.lora.modules = {{"a0", dirs[0], ""}, {"a1", dirs[1], ""}};
  Engine engine(testing::fixture_model_dir(fixture), c);
  auto generate = [&](int32_t lora) { return lora_test::generate_one(engine, prompt, lora); };
  expect_same(generate(0).first, want[0], 1e-4);
  std::filesystem::remove_all(dirs[1]);  // a1 was read at start, then dropped for a0 (one kept)
  const auto [failed, why] = generate(1);
  EXPECT_TRUE(failed.tokens.empty());
  EXPECT_TRUE(io_test::contains(why, dirs[1])) << why;
  // Replaced by another model's adapter: refused each time it is needed (never kept once refused).
  std::filesystem::remove_all(dirs[1]);
  write_adapter("llama3-tiny-tied-bias", {.rank = 4, .alpha = 8, .seed = 94}, dirs[1]);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto [other, other_why] = generate(1);
    EXPECT_TRUE(other.tokens.empty()) << "attempt " << attempt;
    EXPECT_TRUE(io_test::contains(other_why, dirs[1])) << other_why;
  }
  std::filesystem::remove_all(dirs[1]);
  // Back again: a1 is read anew (the slot its failed step had chosen still holds a0's weights).
  write_adapter(fixture, {.rank = 4, .alpha = 8, .seed = 92}, dirs[1]);
  expect_same(generate(1).first, want[2], 1e-4);
  expect_same(generate(0).first, want[0], 1e-4);
  expect_same(generate(-1).first, want[1], 1e-4);
}

// Adapters loaded and unloaded while the engine runs (the server's /v1/load_lora_adapter): a
// loaded adapter gives its merged weights' tokens; an unloaded one is no longer served, and its name
// loaded again is a new adapter; a bad one is refused naming the file, the engine serving on; with
// runtime updates off, loading is refused naming the switch.
TEST(LoraRuntime, AdaptersLoadAndUnloadWhileTheEngineRuns) {
  const std::string fixture = "qwen3_5-tiny-text";
  io_test::TempDir tmp;
  const AdapterSpec spec{.rank = 4, .alpha = 8, .seed = 81};
  write_merged(fixture, write_adapter(fixture, spec, tmp.file("a")), spec, tmp.file("merged"));
  const int32_t vocab = vocab_of(fixture);
  const std::vector<int32_t> prompt = prompt_of(82, 23, vocab);
  const Out want = run(tmp.file("merged"), {}, {{prompt}}, false)[0];
  const Out base = run(testing::fixture_model_dir(fixture), {}, {{prompt}}, false)[0];
  ASSERT_NE(want.tokens, base.tokens);

  EngineConfig c;
  c.lora.enabled = true;
  c.lora.max_lora_rank = 8;
  c.lora.runtime_updates = true;
  Engine engine(testing::fixture_model_dir(fixture), c);
  auto generate = [&](int32_t lora) { return lora_test::generate_one(engine, prompt, lora).first; };
  expect_same(generate(-1), base, 1e-4);
  const int32_t first = engine.core().load_lora_adapter("sql", tmp.file("a"));
  expect_same(generate(first), want, 1e-4);
  expect_same(generate(-1), base, 1e-4);
  EXPECT_TRUE(io_test::contains(io_test::error_of([&] { engine.core().load_lora_adapter("sql", tmp.file("a")); }),
                                "already loaded"));
  EXPECT_TRUE(engine.core().unload_lora_adapter("sql"));
  EXPECT_FALSE(engine.core().unload_lora_adapter("sql"));
  EXPECT_TRUE(io_test::contains(io_test::error_of([&] { generate(first); }), "not served"));
  const int32_t again = engine.core().load_lora_adapter("sql", tmp.file("a"));
  EXPECT_NE(again, first) << "an adapter loaded again is another adapter (its cache blocks are its own)";
  expect_same(generate(again), want, 1e-4);
  // Another model's adapter: refused naming its file; the engine serves on.
  const std::string other = tmp.file("other");
  write_adapter("qwen3-tiny-tied", {.rank = 4, .alpha = 8, .seed = 83}, other);
  const std::string e = io_test::error_of([&] { engine.core().load_lora_adapter("other", other); });
  EXPECT_TRUE(io_test::contains(e, other)) << e;
  EXPECT_FALSE(engine.core().loras()->find("other").has_value());
  expect_same(generate(again), want, 1e-4);

  EngineConfig off = c;
  off.lora.runtime_updates = false;
  Engine fixed(testing::fixture_model_dir(fixture), off);
  EXPECT_TRUE(io_test::contains(io_test::error_of([&] { fixed.core().load_lora_adapter("sql", tmp.file("a")); }),
                                "VLLM_ALLOW_RUNTIME_LORA_UPDATING"));
}

}  // namespace
}  // namespace pagoda
