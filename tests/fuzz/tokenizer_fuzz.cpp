// libFuzzer target: (a) the input as a tokenizer.json must load or fail with pagoda::Error; (b) the
// input as text must encode, decode and stream-decode with a small fixed tokenizer without fault.
#include <cstddef>
#include <cstdint>
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

  const auto ids = fixed->encode(input);
  const std::string text = fixed->decode(ids);
  pagoda::IncrementalDecoder dec(*fixed);
  std::string streamed;
  for (int32_t id : ids) streamed += dec.push(id);
  streamed += dec.flush();
  if (streamed != text) __builtin_trap();
  // Ids made from raw input bytes: valid or not, decode either works or throws pagoda::Error.
  std::vector<int32_t> raw_ids;
  for (size_t i = 0; i + 1 < size && i < 64; i += 2)
    raw_ids.push_back(data[i] | (data[i + 1] << 8));
  try {
    (void)fixed->decode(raw_ids);
  } catch (const pagoda::Error&) {
  }
  return 0;
}
