// The tokenizer.json "post_processor" as encode with add_special_tokens=True applies it to one
// sequence: TemplateProcessing (its "single" template), RobertaProcessing / BertProcessing (cls,
// the text, sep), ByteLevel (which changes only offsets), Sequence, null. Plain encode never needs
// it, so a type this does not know makes only apply() fail, not loading the tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace pagoda {

class PostProcessor {
 public:
  // j may be nullptr or null.
  static PostProcessor from_json(const tokjson::Json* j, const tokjson::Where& where);

  // ids of one encoded text -> the same with the special tokens added. Throws pagoda::Error when
  // the post_processor is of a type that is not supported.
  std::vector<int32_t> apply(const std::vector<int32_t>& ids) const;

 private:
  // One template: runs of special-token ids and the place(s) of the text.
  struct Template {
    std::vector<std::vector<int32_t>> parts;  // special-token ids (empty where is_text)
    std::vector<bool> is_text;                // parts[i] stands for the text itself
  };
  void parse(const tokjson::Json& j, const tokjson::Where& where, int depth);

  std::vector<Template> templates_;  // applied in order
  std::string unsupported_;          // non-empty: what apply() reports
};

}  // namespace pagoda
