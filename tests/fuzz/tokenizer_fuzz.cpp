// libFuzzer target: (a) the input as a tokenizer.json must load or fail with pagoda::Error; (b) the
// input as text must encode, decode and stream-decode without fault with small fixed tokenizers:
// a byte-level one and two SentencePiece-style ones (Prepend/Replace or Metaspace, byte_fallback
// with gaps, unk, Strip/Metaspace decoders).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace {

// Byte-level BPE with a few merges, NFC, Qwen's split regex and added tokens using every option.
std::unique_ptr<pagoda::Tokenizer> make_fixed() {
  using nlohmann::json;
  json vocab = json::object();
  int32_t next = 0;
  for (int b = 0; b < 256; ++b)
    vocab[std::string(pagoda::byte_level::byte_to_utf8(static_cast<uint8_t>(b)))] = next++;
  json merges = json::array();
  for (const char* pair :
       {"t h", "th e", "i n", "Ġ t", "Ġ th", "Ġth e", "e r", "a n", "Ġ Ġ", "ĠĠ ĠĠ"}) {
    const std::string s = pair;
    const size_t sp = s.find(' ');
    const std::string a = s.substr(0, sp), b = s.substr(sp + 1);
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    merges.push_back(json::array({a, b}));
  }
  json added = json::array();
  auto add = [&](const char* content, bool special, bool lstrip, bool rstrip, bool single,
                 bool norm) {
    added.push_back({{"id", next++},
                     {"content", content},
                     {"special", special},
                     {"lstrip", lstrip},
                     {"rstrip", rstrip},
                     {"single_word", single},
                     {"normalized", norm}});
  };
  add("<|im_start|>", true, false, false, false, false);
  add("<L>", false, true, false, false, false);
  add("<R>", false, false, true, false, false);
  add("word", false, false, false, true, false);
  add("<N\u00e9>", false, false, false, false, true);
  const char* pattern =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  json pre = {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"},
                 {"pattern", {{"Regex", pattern}}},
                 {"behavior", "Isolated"},
                 {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  json j = {{"added_tokens", added},
            {"normalizer", {{"type", "NFC"}}},
            {"pre_tokenizer", pre},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  return pagoda::Tokenizer::from_json(j.dump(), "fuzz fixed tokenizer");
}

// SentencePiece-style BPE: byte tokens only below 0xF0 (so unk and fuse_unk are reached too).
std::unique_ptr<pagoda::Tokenizer> make_spm(bool metaspace) {
  using nlohmann::json;
  const std::string meta = "\u2581";
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  int32_t next = 3;
  char name[8];
  for (int b = 0; b < 0xF0; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = next++;
  }
  for (const std::string t : {meta, std::string("a"), std::string("b"), std::string("\u00e9")})
    vocab[t] = next++;
  json merges = json::array();
  for (const auto& [l, r] :
       {std::pair<std::string, std::string>{meta, "a"}, {"a", "b"}, {meta + "a", "b"}}) {
    if (!vocab.contains(l + r)) vocab[l + r] = next++;
    merges.push_back({l, r});
  }
  json added = json::array();
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", i},
                     {"content", i == 0   ? "<unk>"
                                 : i == 1 ? "<s>"
                                          : "</s>"},
                     {"special", true}});
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", meta}}}, {"content", " "}};
  json j = {{"added_tokens", added},
            {"model",
             {{"type", "BPE"},
              {"unk_token", "<unk>"},
              {"fuse_unk", true},
              {"byte_fallback", true},
              {"vocab", vocab},
              {"merges", merges}}}};
  if (metaspace) {
    j["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", meta}, {"prepend_scheme", "first"}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {{{"type", "Metaspace"}, {"replacement", meta}, {"prepend_scheme", "first"}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", "a"}, {"start", 1}, {"stop", 2}}}}};
  } else {
    j["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", meta}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", meta}}}}};
    j["decoder"] = {{"type", "Sequence"},
                    {"decoders",
                     {replace,
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}}}};
  }
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"</s>", 2}}};
  return pagoda::Tokenizer::from_json(j.dump(), "fuzz spm tokenizer");
}

// encode, decode, stream-decode (must equal decode), and decode of ids taken from the raw bytes.
void exercise(const pagoda::Tokenizer& tok, std::string_view input, const uint8_t* data,
              size_t size) {
  const auto ids = tok.encode(input);
  const std::string text = tok.decode(ids);
  pagoda::IncrementalDecoder dec(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += dec.push(id);
  streamed += dec.flush();
  if (streamed != text) __builtin_trap();
  (void)tok.encode_with_special_tokens(input.substr(0, 64));
  // Ids made from raw input bytes: valid or not, decode either works or throws pagoda::Error.
  std::vector<int32_t> raw_ids;
  for (size_t i = 0; i + 1 < size && i < 64; i += 2)
    raw_ids.push_back((data[i] | (data[i + 1] << 8)) % (tok.vocab_size() + 2));
  try {
    const std::string whole = tok.decode(raw_ids, size % 2 == 1);
    pagoda::IncrementalDecoder stream(tok, size % 2 == 1);
    std::string parts;
    for (int32_t id : raw_ids) parts += stream.push(id);
    parts += stream.flush();
    if (parts != whole) __builtin_trap();
  } catch (const pagoda::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<pagoda::Tokenizer> fixed = make_fixed();
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  try {
    auto tok = pagoda::Tokenizer::from_json(input, "fuzz input");
    // A tokenizer that loads must also encode and decode its own output.
    const auto ids = tok->encode(input.substr(0, 256));
    (void)tok->decode(ids, true);
  } catch (const pagoda::Error&) {
  }

  static const std::unique_ptr<pagoda::Tokenizer> spm = make_spm(false);
  static const std::unique_ptr<pagoda::Tokenizer> metaspace = make_spm(true);
  exercise(*fixed, input, data, size);
  exercise(*spm, input, data, size);
  exercise(*metaspace, input, data, size);
  return 0;
}
