// The tokenizer.json "pre_tokenizer": Split (regex or literal, any behaviour), ByteLevel, Metaspace
// (SentencePiece's "▁" for spaces), or a Sequence of those; null is one piece per segment. Pieces
// are handed to a callback one at a time so that no list of strings is built for a multi-megabyte
// text.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"

namespace pagoda {

class PreTokenizer {
 public:
  using PieceFn = std::function<void(std::string_view)>;
  struct Step;  // one Split, ByteLevel or Metaspace, defined in the .cpp

  static PreTokenizer from_json(const tokjson::Json& j, const tokjson::Where& where);
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Calls fn for every non-empty piece of `text` (valid UTF-8), in order. at_origin: text starts
  // at the very beginning of the input (Metaspace's prepend_scheme "first" looks at this, as HF
  // looks at the piece's original offset being 0).
  void for_each_piece(std::string_view text, const PieceFn& fn, bool at_origin = true) const;

  // True when the last step is ByteLevel: its byte-to-character mapping is then left to the BPE
  // model, which looks the raw bytes up directly (faster, and the same result).
  bool model_maps_bytes() const { return defer_byte_mapping_; }

  // The GPT-2 pattern that ByteLevel uses when use_regex is true.
  static const char* gpt2_pattern();

 private:
  void run(size_t step, std::string_view text, bool at_origin, const PieceFn& fn) const;
  void run_split(const Step& s, size_t step, std::string_view text, bool at_origin,
                 const PieceFn& fn) const;
  void run_byte_level(const Step& s, size_t step, std::string_view text, bool at_origin,
                      const PieceFn& fn) const;
  void run_metaspace(const Step& s, size_t step, std::string_view text, bool at_origin,
                     const PieceFn& fn) const;

  std::vector<std::unique_ptr<Step>> steps_;
  bool defer_byte_mapping_ = false;
};

}  // namespace pagoda
