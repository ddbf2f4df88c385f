// The BPE model of tokenizer.json: vocab, merges by rank, optional unk token (fuse_unk),
// SentencePiece byte_fallback (<0xNN> tokens for characters not in the vocab), ignore_merges.
// Encodes one pre-tokenized piece at a time with Hugging Face's merge order (lowest rank first,
// leftmost on a tie), caching results per piece.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/string_hash.h"

namespace pagoda {

class BpeModel {
 public:
  // Ids above this are refused: no real vocabulary comes near, and the id table is dense.
  static constexpr int64_t kMaxId = (1 << 24) - 1;
  // Longest piece merged as one word; longer ones are merged in pieces of this size (encode_piece).
  static constexpr size_t kMaxWordBytes = 64 << 10;

  BpeModel(const tokjson::Json& model, const tokjson::Where& where);

  // map_bytes: pieces are raw bytes and each byte stands for its byte-level character (the
  // pre-tokenizer ended with ByteLevel). Otherwise pieces are split into UTF-8 characters.
  void set_map_bytes(bool map_bytes) { map_bytes_ = map_bytes; }

  // Appends the ids of one piece to out.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when no token has this id.
  const std::string* id_to_token(int32_t id) const;
  // Number of entries, which is what Hugging Face calls the model's vocab size.
  int32_t entry_count() const { return static_cast<int32_t>(vocab_.size()); }
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool removed;
  };

  void parse_vocab(const tokjson::Json& vocab, const tokjson::Where& where);
  void parse_merges(const tokjson::Json& merges, const tokjson::Where& where);
  void parse_options(const tokjson::Json& model, const tokjson::Where& where);
  int32_t require_token(const std::string& token, const tokjson::Where& where) const;
  void encode_uncached(std::string_view piece, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  bool add_fallback_bytes(std::string_view chars, std::vector<Symbol>& symbols) const;
  void merge_all(std::vector<Symbol>& symbols) const;
  int32_t unk_id() const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<const std::string*>
      id_to_token_;  // points into vocab_ keys (stable in unordered_map)
  MergeTable merges_;
  std::array<int32_t, 256> byte_ids_{};      // id of each byte's byte-level character, -1 if absent
  std::array<int32_t, 256> fallback_ids_{};  // id of each byte's <0xNN> token, -1 if absent
  std::optional<std::string> unk_token_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool map_bytes_ = false;
  mutable PieceCache cache_;
};

}  // namespace pagoda
