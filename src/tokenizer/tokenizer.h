// A Hugging Face tokenizer.json with a BPE model: byte-level BPE (Qwen, Llama 3, DeepSeek-V3,
// gpt-oss: Split regex + ByteLevel) and SentencePiece-style BPE (Gemma, Llama 2: Replace / Prepend
// normalizers or the Metaspace pre-tokenizer, byte_fallback, and the matching decoders), with
// added tokens and the post_processor's special tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

// Streaming decode of one sequence; see IncrementalDecoder.
class DecodeStream {
 public:
  virtual ~DecodeStream() = default;
  virtual std::string push(int32_t id) = 0;
  virtual std::string flush() = 0;
};

class Tokenizer {
 public:
  // Reads dir/tokenizer.json (and nothing else). Throws pagoda::Error naming the file and problem.
  static std::unique_ptr<Tokenizer> load_dir(const std::string& dir);
  static std::unique_ptr<Tokenizer> load_file(const std::string& path);
  // From JSON text (tests, fuzzing). Throws pagoda::Error on anything malformed.
  static std::unique_ptr<Tokenizer> from_json(std::string_view json, const std::string& label);
  virtual ~Tokenizer() = default;

  // Text -> ids, as HF `tokenizer.encode(text, add_special_tokens=False)`; special tokens that
  // appear in the text are recognised. Invalid UTF-8 in `text` (which HF's &str cannot hold) is
  // first replaced by U+FFFD, one per maximal ill-formed subpart. Any text is accepted; the only
  // error is a pathological Split regex exceeding PCRE2's match limits (pagoda::Error).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // encode(), except that no added token is recognised where one would start at a byte offset in
  // `literal_at` (sorted): the text there is tokenized as text. What a chat prompt needs, where the
  // template's own special tokens count and those inside the client's messages must not. `text`
  // must be valid UTF-8 (the offsets would not survive the repair encode() makes).
  virtual std::vector<int32_t> encode_literal_at(std::string_view text, const std::vector<size_t>& literal_at) const = 0;
  // As HF `encode(text, add_special_tokens=True)`: encode() with the post_processor's special
  // tokens around it (Gemma's and Llama's BOS, for instance). Throws pagoda::Error when the
  // tokenizer.json's post_processor is of a type that is not supported.
  virtual std::vector<int32_t> encode_with_special_tokens(std::string_view text) const = 0;
  // ids -> text, as HF `decode(ids, skip_special_tokens=...)`. Invalid UTF-8 becomes U+FFFD (one
  // per maximal ill-formed subpart, as Rust's from_utf8_lossy). Unlike HF, which silently drops
  // unknown ids, an id outside the vocabulary throws pagoda::Error naming it.
  virtual std::string decode(const std::vector<int32_t>& ids,
                             bool skip_special_tokens = false) const = 0;
  // The bytes one token stands for out of context. ByteLevel decoder: the decoder undone (as in
  // HF, added tokens pass through it too: a token whose characters are all in the byte-level
  // alphabet maps back to bytes, printable ASCII such as "<think>" to itself, any other token is
  // kept verbatim). SentencePiece-style decoders: a <0xNN> token's byte, else the token after the
  // per-token steps ("▁the" -> " the"). Throws pagoda::Error for an unknown id.
  virtual std::string token_bytes(int32_t id) const = 0;
  // What decode() puts between tokens: " " when tokenizer.json has no decoder (HF joins the
  // tokens with spaces then), else "".
  virtual std::string_view token_separator() const { return {}; }
  // A fresh streaming decoder; IncrementalDecoder wraps it.
  virtual std::unique_ptr<DecodeStream> decode_stream(bool skip_special_tokens) const = 0;

  virtual int32_t vocab_size() const = 0;  // largest id + 1, added tokens included
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::vector<AddedToken>& added_tokens() const = 0;
  virtual bool is_special(int32_t id) const = 0;
};

// Streams text out of ids without ever emitting half a UTF-8 character: bytes are held back until
// they complete a character (or are known to be invalid, then U+FFFD). With ByteFallback, a run of
// <0xNN> tokens is held until it ends (HF judges the run as a whole); a trailing character a Strip
// decoder would remove is held until something follows.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens = false)
      : stream_(tok.decode_stream(skip_special_tokens)) {}
  // Returns the text that became complete with this token (possibly empty). Bytes that can no
  // longer become a valid character come out at once as U+FFFD. Concatenating every push() and the
  // final flush() gives exactly decode(ids). Throws pagoda::Error for an unknown id.
  std::string push(int32_t id);
  // Whatever is still held back (an incomplete tail becomes U+FFFD, as HF decode does); the decoder
  // can then be reused for a new sequence.
  std::string flush();

 private:
  std::unique_ptr<DecodeStream> stream_;
};

}  // namespace pagoda
