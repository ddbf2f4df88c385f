// Builds small tokenizer.json documents for the tokenizer tests: a byte-level BPE whose first 256
// ids are the bytes themselves (id == byte value), then one id per merge result, then extra tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {

struct AddedSpec {
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

struct MiniTokenizer {
  std::vector<std::pair<std::string, std::string>> merges;  // raw bytes, in rank order
  std::vector<AddedSpec> added;
  nlohmann::json normalizer = nullptr;
  nlohmann::json pre_tokenizer = {{"type", "ByteLevel"},
                                  {"add_prefix_space", false},
                                  {"trim_offsets", false},
                                  {"use_regex", false}};
  nlohmann::json decoder = {{"type", "ByteLevel"}};

  nlohmann::json json() const {
    nlohmann::json vocab = nlohmann::json::object();
    int32_t next = 0;
    for (int b = 0; b < 256; ++b) {
      vocab[std::string(byte_level::byte_to_utf8(static_cast<uint8_t>(b)))] = next++;
    }
    nlohmann::json merge_list = nlohmann::json::array();
    for (const auto& [a, b] : merges) {
      const std::string merged = byte_level::encode(a + b);
      if (!vocab.contains(merged)) vocab[merged] = next++;
      merge_list.push_back({byte_level::encode(a), byte_level::encode(b)});
    }
    nlohmann::json added_list = nlohmann::json::array();
    for (const AddedSpec& t : added) {
      added_list.push_back({{"id", next++},
                            {"content", t.content},
                            {"special", t.special},
                            {"lstrip", t.lstrip},
                            {"rstrip", t.rstrip},
                            {"single_word", t.single_word},
                            {"normalized", t.normalized}});
    }
    return {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added_list},
            {"normalizer", normalizer},
            {"pre_tokenizer", pre_tokenizer},
            {"post_processor", nullptr},
            {"decoder", decoder},
            {"model",
             {{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"vocab", vocab},
              {"merges", merge_list}}}};
  }

  std::unique_ptr<Tokenizer> build() const { return Tokenizer::from_json(json().dump(), "mini"); }
};

// The id of a token given by its raw bytes.
inline int32_t id_of(const Tokenizer& tok, const std::string& raw) {
  auto id = tok.token_to_id(byte_level::encode(raw));
  return id ? *id : -1;
}

inline std::vector<int32_t> bytes_as_ids(const std::string& raw) {
  std::vector<int32_t> ids;
  for (char c : raw) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

inline nlohmann::json qwen_split_pre_tokenizer() {
  const char* pattern =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", pattern}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", false},
             {"use_regex", false}}}}};
}

}  // namespace pagoda::test
