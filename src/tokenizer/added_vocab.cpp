#include "tokenizer/added_vocab.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace pagoda {

namespace {

// Hugging Face tests single_word with the Rust regex crate's Unicode \w: Alphabetic, marks,
// decimal digits, connector punctuation and the two join controls.
bool is_word_char(std::string_view one_char) {
  static const Regex re("^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]", false,
                        "added token single_word check");
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all(one_char, m);
  return !m.empty();
}

size_t last_char_start(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool ends_with_word(std::string_view s) {
  return !s.empty() && is_word_char(s.substr(last_char_start(s)));
}

bool starts_with_word(std::string_view s) {
  return !s.empty() && is_word_char(s.substr(0, utf8::next(s, 0).len));
}

// Offset where the trailing whitespace of s begins.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    const size_t start = last_char_start(s.substr(0, end));
    if (!utf8::is_whitespace(utf8::next(s, start).cp)) break;
    end = start;
  }
  return end;
}

// Length of the leading whitespace of s.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const utf8::Step st = utf8::next(s, i);
    if (!utf8::is_whitespace(st.cp)) break;
    i += st.len;
  }
  return i;
}

AddedToken parse_token(const tokjson::Json& j, const tokjson::Where& w) {
  AddedToken t;
  const tokjson::Json* id = tokjson::find(j, "id", w);
  if (id == nullptr) tokjson::fail(w.at("id"), "missing");
  t.id = static_cast<int32_t>(tokjson::as_index(*id, BpeModel::kMaxId, w.at("id")));
  t.content = tokjson::get_string(j, "content", w);
  t.special = tokjson::get_bool(j, "special", false, w);
  t.lstrip = tokjson::get_bool(j, "lstrip", false, w);
  t.rstrip = tokjson::get_bool(j, "rstrip", false, w);
  t.single_word = tokjson::get_bool(j, "single_word", false, w);
  t.normalized = tokjson::get_bool(j, "normalized", !t.special, w);
  return t;
}

}  // namespace

AddedVocabulary::AddedVocabulary(const tokjson::Json* list, const BpeModel& model,
                                 const Normalizer& normalizer, const tokjson::Where& where) {
  if (list != nullptr && !list->is_null()) {
    tokjson::require_array(*list, where);
    for (size_t i = 0; i < list->size(); ++i) {
      const tokjson::Where w = where.at(i);
      AddedToken t = parse_token((*list)[i], w);
      // Hugging Face ignores empty and repeated contents.
      if (t.content.empty() || by_content_.count(t.content) != 0) continue;
      const auto model_id = model.token_to_id(t.content);
      const int32_t next_free =
          max_id_ < 0
              ? model.entry_count()
              : (max_id_ >= model.entry_count() || model.entry_count() == 0 ? max_id_ + 1
                                                                            : model.entry_count());
      const int32_t expected = model_id ? *model_id : next_free;
      if (t.id != expected) {
        tokjson::fail(w.at("id"), "added token '" + t.content + "' has id " + std::to_string(t.id) +
                                      " but Hugging Face tokenizers would give it id " +
                                      std::to_string(expected));
      }
      max_id_ = std::max(max_id_, t.id);
      by_content_.emplace(t.content, tokens_.size());
      by_id_.emplace(t.id, tokens_.size());
      tokens_.push_back(std::move(t));
    }
  }
  // tokens_ is complete: the matchers may now point into it.
  for (const AddedToken& t : tokens_) {
    if (t.normalized) {
      normalized_.add(&t, normalizer.normalize(t.content));
    } else {
      raw_.add(&t, t.content);
    }
  }
  raw_.finish();
  normalized_.finish();
}

const AddedToken* AddedVocabulary::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

void AddedVocabulary::Matcher::add(const AddedToken* token, std::string pattern) {
  if (pattern.empty()) return;  // normalization could in principle empty a token
  entries_.push_back(Entry{token, std::move(pattern)});
}

void AddedVocabulary::Matcher::finish() {
  trie_.assign(1, TrieNode{});
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    const std::string& p = entries_[i].pattern;
    starts_[static_cast<uint8_t>(p[0])] = true;
    uint32_t node = 0;
    for (char c : p) {
      const auto b = static_cast<uint8_t>(c);
      auto& next = trie_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& e, uint8_t v) { return e.first < v; });
      if (it == next.end() || it->first != b) {
        const auto child = static_cast<uint32_t>(trie_.size());
        it = next.insert(it, {b, child});
        trie_.emplace_back();  // invalidates `next` and `it`: not used below
        node = child;
      } else {
        node = it->second;
      }
    }
    if (trie_[node].entry < 0) trie_[node].entry = static_cast<int32_t>(i);
  }
}

// Leftmost match; among matches starting there, the longest (aho-corasick's LeftmostLongest).
auto AddedVocabulary::Matcher::find_next(std::string_view text, size_t from) const
    -> std::optional<Found> {
  if (entries_.empty()) return std::nullopt;
  for (size_t i = from; i < text.size(); ++i) {
    if (!starts_[static_cast<uint8_t>(text[i])]) continue;
    uint32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const auto b = static_cast<uint8_t>(text[j]);
      const auto& next = trie_[node].next;
      const auto it = std::lower_bound(next.begin(), next.end(), b, [](const auto& e, uint8_t v) { return e.first < v; });
      if (it == next.end() || it->first != b) break;
      node = it->second;
      if (trie_[node].entry >= 0) {
        best = trie_[node].entry;
        best_end = j + 1;
      }
    }
    if (best >= 0) return Found{i, best_end, &entries_[static_cast<size_t>(best)]};
  }
  return std::nullopt;
}

// Mirrors AddedVocabulary::find_matches in Hugging Face tokenizers, including that the search
// resumes at the end of the raw match even when rstrip consumed more.
void AddedVocabulary::Matcher::split(std::string_view text, const SegmentFn& fn,
                                     const std::vector<size_t>& literal_at) const {
  size_t emitted = 0;
  size_t search = 0;
  while (auto found = find_next(text, search)) {
    if (std::binary_search(literal_at.begin(), literal_at.end(), found->start)) {
      search = found->start + 1;  // text here; a token may still start inside it
      continue;
    }
    search = found->end;
    size_t start = found->start;
    size_t stop = found->end;
    const AddedToken& t = *found->entry->token;
    if (t.single_word) {
      const bool space_before = start == 0 || !ends_with_word(text.substr(0, start));
      const bool space_after = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!space_before || !space_after) continue;
    }
    if (t.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), emitted);
    if (t.rstrip) stop += leading_space_len(text.substr(stop));
    if (emitted < start) fn(text.substr(emitted, start - emitted), -1);
    fn(text.substr(start, stop - start), t.id);
    emitted = stop;
  }
  if (emitted < text.size()) fn(text.substr(emitted), -1);
}

}  // namespace pagoda
