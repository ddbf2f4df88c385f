#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using io_test::build;
using io_test::bytes_of;
using io_test::contains;
using io_test::error_of;
using io_test::TempDir;
using io_test::write_file;

std::string f32s(std::vector<float> v) { return bytes_of(v); }

void write_index(const TempDir& dir, const nlohmann::json& weight_map) {
  write_file(dir.file("model.safetensors.index.json"),
             nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
}

// Two shards with three tensors, and an index that agrees with them.
void write_sharded(const TempDir& dir) {
  write_file(dir.file("model-00001-of-00002.safetensors"),
             build({{"model.norm.weight", "F32", {2}, f32s({1, 2})},
                    {"model.embed_tokens.weight", "F32", {1, 2}, f32s({3, 4})}}));
  write_file(dir.file("model-00002-of-00002.safetensors"),
             build({{"lm_head.weight", "F32", {1, 2}, f32s({5, 6})}}));
  write_index(dir, {{"model.norm.weight", "model-00001-of-00002.safetensors"},
                    {"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                    {"lm_head.weight", "model-00002-of-00002.safetensors"}});
}

float first_f32(const TensorView& t) { return reinterpret_cast<const float*>(t.data)[0]; }

TEST(Checkpoint, OpensSingleFile) {
  TempDir dir;
  write_file(dir.file("model.safetensors"), build({{"b", "F32", {1}, f32s({7})},
                                                   {"a", "F32", {2}, f32s({8, 9})}}));
  const Checkpoint ckpt = Checkpoint::open_dir(dir.path());
  ASSERT_EQ(ckpt.all().size(), 2u);
  EXPECT_EQ(ckpt.all()[0]->name, "a");  // sorted by name
  EXPECT_EQ(first_f32(ckpt.get("b")), 7.0f);
  EXPECT_EQ(ckpt.find("c"), nullptr);
  EXPECT_EQ(ckpt.total_bytes(), 12u);
}

TEST(Checkpoint, OpensShardsThroughIndex) {
  TempDir dir;
  write_sharded(dir);
  // A stray single-file checkpoint must be ignored when an index exists.
  write_file(dir.file("model.safetensors"), build({{"stray", "F32", {1}, f32s({0})}}));
  const Checkpoint ckpt = Checkpoint::open_dir(dir.path());
  ASSERT_EQ(ckpt.all().size(), 3u);
  EXPECT_EQ(first_f32(ckpt.get("model.norm.weight")), 1.0f);
  EXPECT_EQ(first_f32(ckpt.get("model.embed_tokens.weight")), 3.0f);
  EXPECT_EQ(first_f32(ckpt.get("lm_head.weight")), 5.0f);
  EXPECT_EQ(ckpt.find("stray"), nullptr);
  EXPECT_EQ(ckpt.total_bytes(), 24u);
}

TEST(Checkpoint, CopiesShareTheMappings) {
  TempDir dir;
  write_sharded(dir);
  Checkpoint copy = [&] { return Checkpoint::open_dir(dir.path()); }();
  EXPECT_EQ(first_f32(copy.get("lm_head.weight")), 5.0f);
}

TEST(Checkpoint, GetNamesMissingTensor) {
  TempDir dir;
  write_sharded(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir.path());
  EXPECT_TRUE(contains(error_of([&] { ckpt.get("model.layers.0.mlp.up_proj.weight"); }),
                       "tensor 'model.layers.0.mlp.up_proj.weight' is not in the checkpoint"));
}

TEST(Checkpoint, RejectsIndexPointingToMissingShard) {
  TempDir dir;
  write_sharded(dir);
  write_index(dir, {{"model.norm.weight", "model-00001-of-00002.safetensors"},
                    {"lm_head.weight", "model-00003-of-00003.safetensors"}});
  const std::string msg = error_of([&] { Checkpoint::open_dir(dir.path()); });
  EXPECT_TRUE(contains(msg, "model-00003-of-00003.safetensors"));
  EXPECT_TRUE(contains(msg, "does not exist"));
}

TEST(Checkpoint, RejectsIndexTensorMissingFromShard) {
  TempDir dir;
  write_sharded(dir);
  write_index(dir, {{"model.norm.weight", "model-00001-of-00002.safetensors"},
                    {"model.extra.weight", "model-00002-of-00002.safetensors"}});
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.path()); }),
                       "lists tensor 'model.extra.weight' in model-00002-of-00002.safetensors, "
                       "but model-00002-of-00002.safetensors does not contain it"));
  // Present, but in the other shard.
  write_index(dir, {{"lm_head.weight", "model-00001-of-00002.safetensors"},
                    {"model.norm.weight", "model-00002-of-00002.safetensors"}});
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.path()); }), "does not contain"));
}

TEST(Checkpoint, RejectsShardNamesOutsideTheDirectory) {
  for (const char* shard : {"../model.safetensors", "sub/model.safetensors", "..", "",
                            "/etc/passwd"}) {
    TempDir dir;
    write_sharded(dir);
    write_index(dir, {{"lm_head.weight", shard}});
    const std::string msg = error_of([&] { Checkpoint::open_dir(dir.path()); });
    EXPECT_TRUE(contains(msg, "not a file name inside the checkpoint directory")) << shard;
    EXPECT_TRUE(contains(msg, "'lm_head.weight'"));
  }
}

TEST(Checkpoint, RejectsBadIndex) {
  TempDir dir;
  write_sharded(dir);
  write_file(dir.file("model.safetensors.index.json"), "{\"weight_map\": [");
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.path()); }), "not valid JSON"));
  write_file(dir.file("model.safetensors.index.json"), R"({"metadata": {}})");
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.path()); }), "no weight_map"));
  write_index(dir, {{"lm_head.weight", 3}});
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.path()); }),
                       "entry for 'lm_head.weight' is not a shard file name"));
}

TEST(Checkpoint, RejectsTensorInTwoShards) {
  TempDir dir;
  write_file(dir.file("a.safetensors"), build({{"w", "F32", {1}, f32s({1})}}));
  write_file(dir.file("b.safetensors"), build({{"w", "F32", {1}, f32s({2})}}));
  write_index(dir, {{"w", "a.safetensors"}, {"v", "b.safetensors"}});
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.path()); }),
                       "tensor 'w' is in both"));
}

TEST(Checkpoint, ErrorsListWhatWasLookedFor) {
  TempDir dir;
  const std::string msg = error_of([&] { Checkpoint::open_dir(dir.path()); });
  EXPECT_TRUE(contains(msg, dir.file("model.safetensors.index.json")));
  EXPECT_TRUE(contains(msg, dir.file("model.safetensors")));
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.file("nope")); }),
                       "does not exist or is not a directory"));
}

TEST(Checkpoint, PropagatesShardErrorsWithThePath) {
  TempDir dir;
  write_sharded(dir);
  write_file(dir.file("model-00002-of-00002.safetensors"), "");
  EXPECT_TRUE(contains(error_of([&] { Checkpoint::open_dir(dir.path()); }),
                       "model-00002-of-00002.safetensors is empty"));
}

}  // namespace
}  // namespace pagoda
