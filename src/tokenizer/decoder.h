// The tokenizer.json "decoder" (ids -> text), compiled so that it can run one token at a time:
// decode() and the streaming IncrementalDecoder both push tokens through the same code, so they
// agree by construction.
//
// Supported: null (tokens joined by spaces, as HF does without a decoder), ByteLevel alone, and
// Sequences of the SentencePiece-style decoders Replace, Metaspace, Strip, ByteFallback and Fuse,
// where Replace / Metaspace / Strip before Fuse act on each token (HF's decode_chain), ByteFallback
// turns runs of <0xNN> tokens into text (one U+FFFD per byte when the run is not valid UTF-8), and
// after Fuse only Strip (on the whole text) may follow. Anything else is refused by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"

namespace pagoda {

class Decoder {
 public:
  // j may be nullptr or null (no decoder).
  static Decoder from_json(const tokjson::Json* j, const tokjson::Where& where);

  // Precomputes every id's text. token(id): the id's token string (added token content or vocab
  // entry, valid for the Decoder's lifetime), nullptr when no token has that id.
  void build(int32_t size, const std::function<const std::string*(int32_t)>& token);

  int32_t size() const { return static_cast<int32_t>(raw_.size()); }
  bool has(int32_t id) const {
    return id >= 0 && id < size() && raw_[static_cast<size_t>(id)] != nullptr;
  }
  // What one token stands for out of context (the logprobs "bytes"): a <0xNN> token's byte, a
  // ByteLevel token's bytes, else the token after the per-token steps. Requires has(id).
  std::string token_bytes(int32_t id) const;
  // What decode() puts between tokens: " " without a decoder (HF joins the tokens with spaces).
  std::string_view separator() const { return mode_ == Mode::kJoin ? " " : ""; }

  // Streaming state of one sequence.
  struct State {
    size_t tokens = 0;    // tokens pushed so far
    size_t elements = 0;  // pieces ByteFallback has let through so far
    std::string bytes;    // ByteLevel / no decoder: bytes not yet complete UTF-8; else the byte run
    std::vector<size_t> lead_stripped;  // per whole-text Strip: leading characters removed
    std::vector<bool> lead_done;        // per whole-text Strip: a kept character was seen
    std::vector<size_t> held;           // per whole-text Strip: trailing characters held back
  };
  // Appends to out the text that is final now that `id` follows the tokens pushed before.
  // Requires has(id).
  void push(State& st, int32_t id, std::string& out) const;
  // End of the sequence: appends what was held back and resets st for a new sequence.
  void finish(State& st, std::string& out) const;

  // One per-token step (Replace, Metaspace or Strip); public for the helpers in the .cpp.
  struct Step {
    enum class Kind { kReplace, kMetaspace, kStrip } kind = Kind::kReplace;
    ReplaceRule replace;
    std::string ch;            // Metaspace replacement / Strip content: one character
    bool strip_first = false;  // Metaspace: drop the replacement in the first token
    size_t start = 0;          // Strip: at most this many leading `ch`
    size_t stop = 0;           // Strip: at most this many trailing `ch`
  };

 private:
  enum class Mode { kJoin, kByteLevel, kPieces };

  std::string token_text(int32_t id, size_t index) const;
  void flush_run(State& st, std::string& out) const;
  void element(State& st, std::string text, std::string& out) const;
  void whole_text(State& st, std::string_view text, std::string& out) const;

  Mode mode_ = Mode::kJoin;
  std::vector<Step> before_;  // per token, before ByteFallback (or all of them without it)
  bool byte_fallback_ = false;
  std::vector<Step> after_;     // per piece, after ByteFallback and before Fuse
  std::vector<Step> strips_;    // Strip steps on the whole text, after Fuse
  bool first_differs_ = false;  // a `before_` step treats token 0 differently

  std::vector<const std::string*> raw_;  // per id: the token string, nullptr for a hole
  std::vector<std::string> text_;        // per id: bytes (ByteLevel / join) or text (pieces)
  std::vector<int16_t> byte_;            // per id: the byte of a <0xNN> token, else -1
};

}  // namespace pagoda
