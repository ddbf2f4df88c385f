// How a checkpoint directory says it is an embedding model (sentence-transformers modules.json), as
// vLLM's get_pooling_config reads it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/pooling_config.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using io_test::TempDir;

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// Qwen3-Embedding's files: Transformer, Pooling (1_Pooling, last token), Normalize.
const char* kModules = R"([
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])";
const char* kLastToken = R"({"word_embedding_dimension": 1024, "pooling_mode_cls_token": false,
  "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false,
  "pooling_mode_weightedmean_tokens": false, "pooling_mode_lasttoken": true, "include_prompt": true})";

TEST(PoolingConfig, Qwen3EmbeddingFilesMeanLastTokenNormalised) {
  TempDir d;
  write(d.file("modules.json"), kModules);
  write(d.file("1_Pooling/config.json"), kLastToken);
  const auto pc = load_sentence_transformers_pooling(d.path());
  ASSERT_TRUE(pc.has_value());
  EXPECT_EQ(pc->type, PoolingConfig::Type::Last);
  EXPECT_TRUE(pc->normalize);
  EXPECT_FALSE(pc->is_matryoshka.has_value());
  EXPECT_TRUE(pc->matryoshka_dimensions.empty());
}

TEST(PoolingConfig, NoNormalizeModuleMeansNotNormalised) {
  TempDir d;
  write(d.file("modules.json"), R"([{"path": "", "type": "sentence_transformers.models.Transformer"},
                                    {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  write(d.file("1_Pooling/config.json"), kLastToken);
  const auto pc = load_sentence_transformers_pooling(d.path());
  ASSERT_TRUE(pc.has_value());
  EXPECT_FALSE(pc->normalize);
}

TEST(PoolingConfig, NoModulesOrNoPoolingModuleIsNotAnEmbeddingModel) {
  TempDir d;
  EXPECT_FALSE(load_sentence_transformers_pooling(d.path()).has_value());
  write(d.file("modules.json"), R"([{"path": "", "type": "sentence_transformers.models.Transformer"}])");
  EXPECT_FALSE(load_sentence_transformers_pooling(d.path()).has_value());
  // --runner pooling on such a directory: vLLM's default for a converted causal LM.
  const PoolingConfig pc = load_pooling_config(d.path());
  EXPECT_EQ(pc.type, PoolingConfig::Type::Last);
  EXPECT_TRUE(pc.normalize);
}

TEST(PoolingConfig, MatryoshkaFieldsComeFromConfigJson) {
  TempDir d;
  write(d.file("config.json"), R"({"is_matryoshka": true, "matryoshka_dimensions": [32, 64, 128]})");
  const PoolingConfig pc = load_pooling_config(d.path());
  EXPECT_EQ(pc.is_matryoshka, true);
  EXPECT_EQ(pc.matryoshka_dimensions, (std::vector<int64_t>{32, 64, 128}));
  write(d.file("config.json"), R"({"matryoshka_dimensions": [0]})");
  EXPECT_THROW(load_pooling_config(d.path()), Error);
}

TEST(PoolingConfig, RefusesWhatItCannotApply) {
  auto expect_error = [](const std::string& modules, const std::string& pooling, const std::string& words) {
    TempDir d;
    write(d.file("modules.json"), modules);
    if (!pooling.empty()) write(d.file("1_Pooling/config.json"), pooling);
    try {
      load_sentence_transformers_pooling(d.path());
      ADD_FAILURE() << "no error for " << modules << " / " << pooling;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error(kModules, R"({"pooling_mode_mean_tokens": true})", "pooling_mode_mean_tokens");
  expect_error(kModules, R"({"pooling_mode_cls_token": true, "pooling_mode_lasttoken": true})", "several");
  expect_error(kModules, R"({"pooling_mode_lasttoken": false})", "no pooling_mode");
  expect_error(kModules, R"({"pooling_mode_lasttoken": true, "pooling_mode_mean_tokens": true})", "several");
  expect_error(kModules, "", "1_Pooling/config.json");
  expect_error(R"([{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                  {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])",
               kLastToken, "Dense");
  expect_error(R"([{"path": "../x", "type": "sentence_transformers.models.Pooling"}])", kLastToken, "leaves");
  expect_error(R"([{"path": "/etc", "type": "sentence_transformers.models.Pooling"}])", kLastToken, "relative");
  expect_error(R"({"not": "a list"})", "", "list");
  expect_error("[", "", "not valid JSON");
}

}  // namespace
}  // namespace pagoda
