// The post-processor of a tokenizer.json: what Hugging Face's `tokenizer(text)` (add_special_tokens
// = True) adds around the ids of one sequence. Qwen3-Embedding's tokenizer.json appends
// <|endoftext|> this way (TemplateProcessing "$A <|endoftext|>"), and sentence-transformers and vLLM's
// embedding endpoint tokenize with it; the generation routes do not use it (pagoda's completions
// encode as add_special_tokens=False, which is the same for the Qwen tokenizers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

class PostProcessor {
 public:
  // The post_processor of `tokenizer_json` (null or absent: adds nothing). Understands
  // TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (no ids added) and Sequence of
  // those. Throws pagoda::Error, labelled `label`, for anything else or anything malformed.
  static PostProcessor from_json(std::string_view tokenizer_json, const std::string& label);
  // dir/tokenizer.json; adds nothing when there is none.
  static PostProcessor load_dir(const std::string& dir);

  // ids of one sequence -> the ids HF's post-processor makes of them (single, not pair).
  std::vector<int32_t> apply(const std::vector<int32_t>& ids) const;
  // Nothing is added.
  bool identity() const { return prefix_.empty() && suffix_.empty(); }
  const std::vector<int32_t>& prefix() const { return prefix_; }
  const std::vector<int32_t>& suffix() const { return suffix_; }

 private:
  // Every supported single template is prefix + $A + suffix.
  std::vector<int32_t> prefix_, suffix_;
};

}  // namespace pagoda
