#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace pagoda {

namespace {

void reject_unless_empty(const tokjson::Json& model, const char* key, const tokjson::Where& where) {
  const tokjson::Json* v = tokjson::find(model, key, where);
  if (v == nullptr || v->is_null()) return;
  if (!v->is_string()) tokjson::fail(where.at(key), "expected a string or null");
  if (!v->get_ref<const std::string&>().empty()) {
    tokjson::fail(where.at(key), "a non-empty value is not supported");
  }
}

// Split "a b" at the first space, as Hugging Face reads the older string form of merges.
std::pair<std::string, std::string> merge_parts(const tokjson::Json& m, const tokjson::Where& w) {
  if (m.is_string()) {
    const auto& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos) tokjson::fail(w, "cannot split merge '" + s + "' at a space");
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  tokjson::fail(w, "expected a pair of strings or an \"a b\" string");
}

struct HeapEntry {
  int32_t rank;
  int32_t pos;
  int32_t merged_id;
};

// std heap functions keep the "largest" on top; make that the lowest rank, then the leftmost.
bool lower_priority(const HeapEntry& a, const HeapEntry& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

BpeModel::BpeModel(const tokjson::Json& model, const tokjson::Where& where) {
  tokjson::require_object(model, where);
  const tokjson::Json* vocab = tokjson::find(model, "vocab", where);
  if (vocab == nullptr) tokjson::fail(where.at("vocab"), "missing");
  parse_vocab(*vocab, where.at("vocab"));
  const tokjson::Json* merges = tokjson::find(model, "merges", where);
  if (merges != nullptr && !merges->is_null()) parse_merges(*merges, where.at("merges"));
  parse_options(model, where);
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const auto id = token_to_id(byte_level::byte_to_utf8(static_cast<uint8_t>(b)));
    byte_ids_[b] = id ? *id : -1;
    // SentencePiece's byte tokens, spelled as HF looks them up: format!("<{b:#04X}>").
    const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    const auto fallback = token_to_id(name);
    fallback_ids_[b] = fallback ? *fallback : -1;
  }
}

void BpeModel::parse_vocab(const tokjson::Json& vocab, const tokjson::Where& where) {
  tokjson::require_object(vocab, where);
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (const auto& [token, value] : vocab.items()) {
    const int64_t id = tokjson::as_index(value, kMaxId, where.at(token));
    vocab_.emplace(token, static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  // Ids index a dense table; refuse files whose ids are mostly holes instead of allocating for
  // them.
  if (max_id + 1 > 2 * static_cast<int64_t>(vocab_.size()) + 1024) {
    tokjson::fail(where, "ids are too sparse: largest id " + std::to_string(max_id) + " for " +
                             std::to_string(vocab_.size()) + " tokens");
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab_) {
    const std::string*& slot = id_to_token_[static_cast<size_t>(id)];
    if (slot != nullptr) {
      tokjson::fail(where, "id " + std::to_string(id) + " is given to both '" + *slot + "' and '" +
                               token + "'");
    }
    slot = &token;
  }
}

int32_t BpeModel::require_token(const std::string& token, const tokjson::Where& where) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) tokjson::fail(where, "token '" + token + "' is not in the vocab");
  return it->second;
}

void BpeModel::parse_merges(const tokjson::Json& merges, const tokjson::Where& where) {
  tokjson::require_array(merges, where);
  if (merges.size() > static_cast<size_t>(kMaxId)) tokjson::fail(where, "too many merges");
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const tokjson::Where w = where.at(i);
    const auto [left, right] = merge_parts(merges[i], w);
    const int32_t left_id = require_token(left, w);
    const int32_t right_id = require_token(right, w);
    const int32_t merged_id = require_token(left + right, w);
    merges_.insert(left_id, right_id, MergeValue{static_cast<int32_t>(i), merged_id});
  }
}

void BpeModel::parse_options(const tokjson::Json& model, const tokjson::Where& where) {
  const tokjson::Json* dropout = tokjson::find(model, "dropout", where);
  if (dropout != nullptr && !dropout->is_null()) {
    if (!dropout->is_number()) tokjson::fail(where.at("dropout"), "expected a number or null");
    if (dropout->get<double>() != 0.0)
      tokjson::fail(where.at("dropout"), "BPE dropout is not supported");
  }
  const tokjson::Json* unk = tokjson::find(model, "unk_token", where);
  if (unk != nullptr && !unk->is_null()) {
    if (!unk->is_string()) tokjson::fail(where.at("unk_token"), "expected a string or null");
    unk_token_ = unk->get<std::string>();
  }
  reject_unless_empty(model, "continuing_subword_prefix", where);
  reject_unless_empty(model, "end_of_word_suffix", where);
  byte_fallback_ = tokjson::get_bool(model, "byte_fallback", false, where);
  fuse_unk_ = tokjson::get_bool(model, "fuse_unk", false, where);
  ignore_merges_ = tokjson::get_bool(model, "ignore_merges", false, where);
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  return id_to_token_[static_cast<size_t>(id)];
}

int32_t BpeModel::unk_id() const {
  auto id = token_to_id(*unk_token_);
  // Hugging Face fails the same way, at encode time, when the unk token is missing.
  if (!id) throw Error("BPE model: unk_token '" + *unk_token_ + "' is not in the vocab");
  return *id;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() > kMaxWordBytes) {
    // A word this long is never natural text (a client's 60 MiB without a space): merged in pieces
    // at character boundaries, so that the merge state (about 30 bytes per byte) stays bounded and
    // the thread's buffers small. Tokens may differ from Hugging Face's next to the cuts.
    for (size_t at = 0; at < piece.size();) {
      size_t end = std::min(piece.size(), at + kMaxWordBytes);
      while (end < piece.size() && end > at + 1 && (static_cast<uint8_t>(piece[end]) & 0xC0) == 0x80) --end;
      encode_uncached(piece.substr(at, end - at), out);
      at = end;
    }
    return;
  }
  if (piece.size() > PieceCache::kMaxPieceBytes) {
    encode_uncached(piece, out);
    return;
  }
  if (cache_.get(piece, out)) return;
  const size_t mark = out.size();
  encode_uncached(piece, out);
  cache_.put(piece, out.data() + mark, out.size() - mark);
}

void BpeModel::encode_uncached(std::string_view piece, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const auto id = map_bytes_ ? token_to_id(byte_level::encode(piece)) : token_to_id(piece);
    if (id) {
      out.push_back(*id);
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  initial_symbols(piece, symbols);
  merge_all(symbols);
  for (const Symbol& s : symbols) {
    if (!s.removed) out.push_back(s.id);
  }
}

// With byte_fallback, the <0xNN> tokens of each byte of `chars`; false (nothing added) unless every
// byte has one.
bool BpeModel::add_fallback_bytes(std::string_view chars, std::vector<Symbol>& symbols) const {
  if (!byte_fallback_) return false;
  for (char c : chars) {
    if (fallback_ids_[static_cast<uint8_t>(c)] < 0) return false;
  }
  for (char c : chars) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{fallback_ids_[static_cast<uint8_t>(c)], n - 1, n + 1, false});
  }
  return true;
}

// One symbol per character (per byte when map_bytes_). A character missing from the vocab becomes
// its <0xNN> byte tokens with byte_fallback, else the unk token (runs fused when fuse_unk) or,
// with no unk token, is dropped, as in Hugging Face. HF leaves a pending unk pending across byte
// tokens, so an unk can come out after byte tokens of later characters; this does the same.
void BpeModel::initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const {
  int32_t pending_unk = -1;  // an unk symbol not yet added (fuse_unk may extend it)
  auto add = [&symbols](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, n - 1, n + 1, false});
  };
  size_t i = 0;
  while (i < piece.size()) {
    int32_t id = -1;
    size_t len = 1;
    if (map_bytes_) {
      id = byte_ids_[static_cast<uint8_t>(piece[i])];
    } else {
      len = utf8::next(piece, i).len;
      auto it = vocab_.find(piece.substr(i, len));
      if (it != vocab_.end()) id = it->second;
    }
    const std::string_view chars = map_bytes_
                                       ? byte_level::byte_to_utf8(static_cast<uint8_t>(piece[i]))
                                       : piece.substr(i, len);
    i += len;
    if (id >= 0) {
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = -1;
      add(id);
    } else if (add_fallback_bytes(chars, symbols)) {
      continue;
    } else if (unk_token_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      if (pending_unk < 0 || !fuse_unk_) pending_unk = unk_id();
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (!symbols.empty()) symbols.back().next = -1;
}

// Hugging Face's Word::merge_all: a heap of candidate merges; stale entries are recognised by the
// pair at their position no longer producing the same merged id.
void BpeModel::merge_all(std::vector<Symbol>& symbols) const {
  if (symbols.size() < 2) return;
  thread_local std::vector<HeapEntry> heap;
  heap.clear();
  for (size_t p = 0; p + 1 < symbols.size(); ++p) {
    if (const MergeValue* m = merges_.find(symbols[p].id, symbols[p + 1].id)) {
      heap.push_back(HeapEntry{m->rank, static_cast<int32_t>(p), m->merged_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), lower_priority);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const HeapEntry top = heap.back();
    heap.pop_back();
    Symbol& cur = symbols[static_cast<size_t>(top.pos)];
    if (cur.removed || cur.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(cur.next)];
    const MergeValue* now = merges_.find(cur.id, right.id);
    if (now == nullptr || now->merged_id != top.merged_id) continue;
    cur.id = top.merged_id;
    right.removed = true;
    cur.next = right.next;
    if (cur.next >= 0) symbols[static_cast<size_t>(cur.next)].prev = top.pos;
    auto push = [&](int32_t left_pos, int32_t left_id, int32_t right_id) {
      if (const MergeValue* m = merges_.find(left_id, right_id)) {
        heap.push_back(HeapEntry{m->rank, left_pos, m->merged_id});
        std::push_heap(heap.begin(), heap.end(), lower_priority);
      }
    };
    if (cur.prev >= 0) push(cur.prev, symbols[static_cast<size_t>(cur.prev)].id, cur.id);
    if (cur.next >= 0) push(top.pos, cur.id, symbols[static_cast<size_t>(cur.next)].id);
  }
}

}  // namespace pagoda
