// tokenizer.json post-processors: what Hugging Face's tokenizer(text) adds around a sequence.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/post_processor.h"

namespace pagoda {
namespace {

PostProcessor parse(const std::string& post_processor) {
  return PostProcessor::from_json(R"({"model": {}, "post_processor": )" + post_processor + "}", "test");
}

TEST(PostProcessor, Qwen3EmbeddingAppendsEndOfText) {
  // As in Qwen3-Embedding's tokenizer.json.
  const PostProcessor pp = parse(R"({"type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
    "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}}})");
  EXPECT_EQ(pp.apply({1, 2, 3}), (std::vector<int32_t>{1, 2, 3, 151643}));
  EXPECT_EQ(pp.apply({}), (std::vector<int32_t>{151643}));
  EXPECT_FALSE(pp.identity());
}

TEST(PostProcessor, Llama3SequenceOfByteLevelAndBosTemplate) {
  const PostProcessor pp = parse(R"({"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
    {"type": "TemplateProcessing",
     "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
     "pair": [],
     "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]})");
  EXPECT_EQ(pp.apply({7, 8}), (std::vector<int32_t>{128000, 7, 8}));
}

TEST(PostProcessor, BertAndRobertaWrapInClsAndSep) {
  EXPECT_EQ(parse(R"({"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]})").apply({5}),
            (std::vector<int32_t>{101, 5, 102}));
  EXPECT_EQ(parse(R"({"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true,
                     "add_prefix_space": true})").apply({5}),
            (std::vector<int32_t>{0, 5, 2}));
}

TEST(PostProcessor, NullOrByteLevelAddsNothing) {
  EXPECT_TRUE(parse("null").identity());
  EXPECT_TRUE(parse(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false})").identity());
  EXPECT_TRUE(PostProcessor::from_json(R"({"model": {}})", "test").identity());
}

TEST(PostProcessor, MalformedOrUnsupportedIsAnError) {
  EXPECT_THROW(parse(R"({"type": "Unknown"})"), Error);
  EXPECT_THROW(parse(R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "x"}}],
                         "special_tokens": {}})"), Error);  // no $A, unknown special
  EXPECT_THROW(parse(R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "B"}}]})"), Error);
  EXPECT_THROW(parse(R"({"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "x"}}],
                         "special_tokens": {"x": {"id": "x"}}})"), Error);  // no ids
  EXPECT_THROW(parse(R"({"type": "BertProcessing", "sep": ["[SEP]", -1], "cls": ["[CLS]", 101]})"), Error);
  EXPECT_THROW(PostProcessor::from_json("not json", "test"), Error);
  // Sequences nested past the bound.
  std::string deep = R"({"type": "ByteLevel"})";
  for (int i = 0; i < 20; ++i) deep = R"({"type": "Sequence", "processors": [)" + deep + "]}";
  EXPECT_THROW(parse(deep), Error);
}

}  // namespace
}  // namespace pagoda
