// Tokenizer::from_json and the encode/decode pipeline: added tokens -> normalizer -> pre-tokenizer
// -> BPE (-> post_processor with special tokens), and back through the decoder.
#include "tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda {

namespace {

using tokjson::Json;
using tokjson::Where;

// Settings that would change what encode returns and that this implementation does not do.
void reject_unsupported_top_level(const Json& root, const Where& where) {
  for (const char* key : {"truncation", "padding"}) {
    const Json* v = tokjson::find(root, key, where);
    if (v != nullptr && !v->is_null()) tokjson::fail(where.at(key), "only null is supported");
  }
}

const Json& model_json(const Json& root, const Where& where) {
  const Json* model = tokjson::find(root, "model", where);
  if (model == nullptr) tokjson::fail(where.at("model"), "missing");
  tokjson::require_object(*model, where.at("model"));
  const Json* type = tokjson::find(*model, "type", where.at("model"));
  if (type != nullptr) {
    const std::string& name = tokjson::get_string(*model, "type", where.at("model"));
    if (name != "BPE") {
      tokjson::fail(where.at("model").at("type"),
                    "unsupported model type '" + name + "' (supported: BPE)");
    }
  }
  return *model;
}

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(const Json& root, const Where& where)
      : normalizer_(Normalizer::from_json(field_or_null(root, "normalizer", where),
                                          where.at("normalizer"))),
        pre_tokenizer_(PreTokenizer::from_json(field_or_null(root, "pre_tokenizer", where),
                                               where.at("pre_tokenizer"))),
        model_(model_json(root, where), where.at("model")),
        added_(tokjson::find(root, "added_tokens", where), model_, normalizer_,
               where.at("added_tokens")),
        decoder_(Decoder::from_json(tokjson::find(root, "decoder", where), where.at("decoder"))),
        post_processor_(PostProcessor::from_json(tokjson::find(root, "post_processor", where),
                                                 where.at("post_processor"))) {
    reject_unsupported_top_level(root, where);
    model_.set_map_bytes(pre_tokenizer_.model_maps_bytes());
    build_decode_table();
  }

  std::vector<int32_t> encode(std::string_view text) const override;
  std::vector<int32_t> encode_literal_at(std::string_view text, const std::vector<size_t>& literal_at) const override;
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const override {
    return post_processor_.apply(encode(text));
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::string token_bytes(int32_t id) const override {
    check_id(id);
    return decoder_.token_bytes(id);
  }
  int32_t vocab_size() const override { return decoder_.size(); }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    if (auto id = added_.token_to_id(token)) return id;
    return model_.token_to_id(token);
  }
  const std::vector<AddedToken>& added_tokens() const override { return added_.tokens(); }
  bool is_special(int32_t id) const override {
    const AddedToken* t = added_.find_id(id);
    return t != nullptr && t->special;
  }
  std::string_view token_separator() const override { return decoder_.separator(); }
  std::unique_ptr<DecodeStream> decode_stream(bool skip_special_tokens) const override;

  void check_id(int32_t id) const;
  const Decoder& decoder() const { return decoder_; }

 private:
  static const Json& field_or_null(const Json& root, const char* key, const Where& where) {
    static const Json null_json;
    const Json* v = tokjson::find(root, key, where);
    return v == nullptr ? null_json : *v;
  }
  void build_decode_table();
  void encode_plain(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const;

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  AddedVocabulary added_;
  Decoder decoder_;
  PostProcessor post_processor_;
};

class HfDecodeStream final : public DecodeStream {
 public:
  HfDecodeStream(const HfTokenizer& tok, bool skip) : tok_(tok), skip_(skip) {}
  std::string push(int32_t id) override {
    tok_.check_id(id);  // even when it is skipped
    std::string out;
    if (!(skip_ && tok_.is_special(id))) tok_.decoder().push(state_, id, out);
    return out;
  }
  std::string flush() override {
    std::string out;
    tok_.decoder().finish(state_, out);
    return out;
  }

 private:
  const HfTokenizer& tok_;
  bool skip_;
  Decoder::State state_;
};

std::unique_ptr<DecodeStream> HfTokenizer::decode_stream(bool skip_special_tokens) const {
  return std::make_unique<HfDecodeStream>(*this, skip_special_tokens);
}

void HfTokenizer::build_decode_table() {
  const int32_t size = std::max(model_.max_id(), added_.max_id()) + 1;
  decoder_.build(size, [this](int32_t id) -> const std::string* {
    // Added tokens win over model tokens with the same id, as in Hugging Face's decode, and pass
    // through the decoder too.
    const AddedToken* added = added_.find_id(id);
    return added != nullptr ? &added->content : model_.id_to_token(id);
  });
}

void HfTokenizer::check_id(int32_t id) const {
  if (!decoder_.has(id)) {
    throw Error("tokenizer decode: token id " + std::to_string(id) +
                " is not in the vocabulary (size " + std::to_string(vocab_size()) + ")");
  }
}

// at_origin: text starts at offset 0 of the input (for Metaspace's prepend_scheme "first").
void HfTokenizer::encode_plain(std::string_view text, bool at_origin,
                               std::vector<int32_t>& ids) const {
  auto on_piece = [&](std::string_view piece) { model_.encode_piece(piece, ids); };
  bool first = at_origin;
  auto on_normalized_segment = [&](std::string_view segment, int32_t id) {
    if (id >= 0) {
      ids.push_back(id);
    } else {
      pre_tokenizer_.for_each_piece(segment, on_piece, first);
    }
    first = false;
  };
  if (normalizer_.is_identity()) {
    added_.split_normalized(text, on_normalized_segment);
  } else {
    added_.split_normalized(normalizer_.normalize(text), on_normalized_segment);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  // Hugging Face takes a Rust &str, which cannot hold invalid UTF-8; we replace each ill-formed
  // subpart with U+FFFD first so that every later stage sees valid text.
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::to_valid_lossy(text);
    text = repaired;
  }
  return encode_literal_at(text, {});
}

std::vector<int32_t> HfTokenizer::encode_literal_at(std::string_view text, const std::vector<size_t>& literal_at) const {
  check(literal_at.empty() || utf8::is_valid(text), "encode_literal_at: the text is not valid UTF-8");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  bool first = true;
  added_.split_raw(text, [&](std::string_view segment, int32_t id) {
    if (id >= 0) {
      ids.push_back(id);
    } else {
      encode_plain(segment, first, ids);
    }
    first = false;
  }, literal_at);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  Decoder::State state;
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    if (skip_special_tokens && is_special(id)) continue;
    decoder_.push(state, id, out);
  }
  decoder_.finish(state, out);
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json(std::string_view json, const std::string& label) {
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::exception& e) {
    throw Error(label + ": not valid JSON: " + e.what());
  }
  const Where where{label, ""};
  tokjson::require_object(root, where);
  return std::make_unique<HfTokenizer>(root, where);
}

std::unique_ptr<Tokenizer> Tokenizer::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open tokenizer file");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw Error(path + ": read error");
  return from_json(buf.str(), path);
}

std::unique_ptr<Tokenizer> Tokenizer::load_dir(const std::string& dir) {
  return load_file(dir + "/tokenizer.json");
}

}  // namespace pagoda
