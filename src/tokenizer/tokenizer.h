// A Hugging Face tokenizer.json with byte-level BPE (the Qwen family): NFC normalizer, Split
// pre-tokenizer regex, ByteLevel, added tokens, BPE merges by rank, ByteLevel decoder.
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
  // ids -> text, as HF `decode(ids, skip_special_tokens=...)`. Invalid UTF-8 becomes U+FFFD (one
  // per maximal ill-formed subpart, as Rust's from_utf8_lossy). Unlike HF, which silently drops
  // unknown ids, an id outside the vocabulary throws pagoda::Error naming it.
  virtual std::string decode(const std::vector<int32_t>& ids,
                             bool skip_special_tokens = false) const = 0;
  // The bytes one token contributes to decode(): the ByteLevel decoder undone. As in HF, added
  // tokens pass through the decoder too: a token whose characters are all in the byte-level
  // alphabet maps back to bytes (printable ASCII such as "<think>" maps to itself), any other token
  // is kept verbatim. Throws pagoda::Error for an unknown id.
  virtual std::string token_bytes(int32_t id) const = 0;
  // What decode() puts between tokens: "" with the ByteLevel decoder, " " with none (HF joins the
  // tokens with spaces when tokenizer.json has no decoder).
  virtual std::string_view token_separator() const { return {}; }

  virtual int32_t vocab_size() const = 0;  // largest id + 1, added tokens included
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::vector<AddedToken>& added_tokens() const = 0;
  virtual bool is_special(int32_t id) const = 0;
};

// Streams text out of ids without ever emitting half a UTF-8 character: bytes are held back until
// they complete a character (or are known to be invalid, then U+FFFD).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens = false)
      : tok_(tok), skip_special_(skip_special_tokens) {}
  // Returns the text that became complete with this token (possibly empty). Bytes that can no
  // longer become a valid character come out at once as U+FFFD. Concatenating every push() and the
  // final flush() gives exactly decode(ids). Throws pagoda::Error for an unknown id.
  std::string push(int32_t id);
  // Whatever is still held back (an incomplete tail becomes U+FFFD, as HF decode does); the decoder
  // can then be reused for a new sequence.
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  bool started_ = false;  // a token was emitted, so the next one gets the separator
  std::string pending_;
};

}  // namespace pagoda
