#include "tokenizer/decoder.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace pagoda {

namespace {

using tokjson::Json;
using tokjson::Where;

const std::string kReplacementChar(utf8::kReplacement);

struct Item {
  enum class Kind { kStep, kByteLevel, kByteFallback, kFuse } kind = Kind::kStep;
  Decoder::Step step;
};

std::string one_char(const Json& j, const char* key, const Where& where) {
  std::string s = tokjson::get_string(j, key, where);
  if (s.empty() || utf8::next(s, 0).len != s.size()) {
    tokjson::fail(where.at(key), "expected exactly one character");
  }
  return s;
}

size_t get_count(const Json& j, const char* key, const Where& where) {
  const Json* v = tokjson::find(j, key, where);
  if (v == nullptr) tokjson::fail(where.at(key), "missing");
  // Bounded: a Strip of more characters than any text holds means "all of them" anyway.
  return static_cast<size_t>(tokjson::as_index(*v, 1 << 30, where.at(key)));
}

// As HF reads Metaspace: prepend_scheme defaults to "always", add_prefix_space=false means "never".
bool metaspace_strips_first(const Json& j, const Where& where) {
  std::string scheme = "always";
  const Json* s = tokjson::find(j, "prepend_scheme", where);
  if (s != nullptr && !s->is_null()) {
    scheme = tokjson::get_string(j, "prepend_scheme", where);
    if (scheme != "always" && scheme != "first" && scheme != "never") {
      tokjson::fail(where.at("prepend_scheme"),
                    "unknown prepend_scheme '" + scheme + "' (expected always, first or never)");
    }
  }
  if (!tokjson::get_bool(j, "add_prefix_space", true, where)) {
    if (s != nullptr && !s->is_null() && scheme != "never") {
      tokjson::fail(where.at("add_prefix_space"),
                    "add_prefix_space false does not match prepend_scheme");
    }
    scheme = "never";
  }
  return scheme != "never";
}

void flatten(const Json& j, const Where& where, int depth, std::vector<Item>& items) {
  if (depth > 16) tokjson::fail(where, "decoder Sequence nested too deeply");
  const std::string& type = tokjson::get_string(j, "type", where);
  Item item;
  if (type == "Sequence") {
    const Json* list = tokjson::find(j, "decoders", where);
    const Where lw = where.at("decoders");
    if (list == nullptr) tokjson::fail(lw, "missing");
    tokjson::require_array(*list, lw);
    for (size_t i = 0; i < list->size(); ++i) flatten((*list)[i], lw.at(i), depth + 1, items);
    return;
  } else if (type == "ByteLevel") {
    item.kind = Item::Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    item.kind = Item::Kind::kByteFallback;
  } else if (type == "Fuse") {
    item.kind = Item::Kind::kFuse;
  } else if (type == "Replace") {
    item.step.kind = Decoder::Step::Kind::kReplace;
    item.step.replace = ReplaceRule::from_json(j, where);
  } else if (type == "Metaspace") {
    item.step.kind = Decoder::Step::Kind::kMetaspace;
    item.step.ch = one_char(j, "replacement", where);
    item.step.strip_first = metaspace_strips_first(j, where);
  } else if (type == "Strip") {
    item.step.kind = Decoder::Step::Kind::kStrip;
    item.step.ch = one_char(j, "content", where);
    item.step.start = get_count(j, "start", where);
    item.step.stop = get_count(j, "stop", where);
  } else {
    tokjson::fail(where.at("type"), "unsupported decoder type '" + type +
                                        "' (supported: ByteLevel, Replace, ByteFallback, Fuse, "
                                        "Strip, Metaspace, Sequence, null)");
  }
  items.push_back(std::move(item));
}

// HF's Strip on one string: up to `start` leading and `stop` trailing `ch` removed. (HF panics
// when the two overlap; this returns what is left, possibly nothing.)
std::string strip(const Decoder::Step& s, std::string_view text) {
  size_t begin = 0;
  for (size_t n = 0; n < s.start && text.substr(begin).starts_with(s.ch); ++n) begin += s.ch.size();
  size_t end = text.size();
  for (size_t n = 0;
       n < s.stop && end >= begin + s.ch.size() && text.substr(0, end).ends_with(s.ch); ++n) {
    end -= s.ch.size();
  }
  return std::string(text.substr(begin, end - begin));
}

// HF's Metaspace decoder on the index-th token: the replacement becomes a space, except in token 0
// where it is dropped (unless prepend_scheme is "never").
std::string metaspace(const Decoder::Step& s, std::string_view text, size_t index) {
  std::string out;
  size_t done = 0;
  for (size_t at = text.find(s.ch); at != std::string_view::npos; at = text.find(s.ch, done)) {
    out.append(text.substr(done, at - done));
    if (index != 0 || !s.strip_first) out.push_back(' ');
    done = at + s.ch.size();
  }
  out.append(text.substr(done));
  return out;
}

std::string apply_steps(const std::vector<Decoder::Step>& steps, std::string text, size_t index) {
  for (const Decoder::Step& s : steps) {
    switch (s.kind) {
      case Decoder::Step::Kind::kReplace:
        text = s.replace.apply(text);
        break;
      case Decoder::Step::Kind::kMetaspace:
        text = metaspace(s, text, index);
        break;
      case Decoder::Step::Kind::kStrip:
        text = strip(s, text);
        break;
    }
  }
  return text;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// HF's test for a byte token: six bytes "<0x??>" where ?? parses with u8::from_str_radix(.., 16),
// which also takes a leading '+' ("<0x+A>" is byte 10).
int byte_token_value(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
  const int lo = hex_digit(t[4]);
  if (lo < 0) return -1;
  if (t[3] == '+') return lo;
  const int hi = hex_digit(t[3]);
  return hi < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

Decoder Decoder::from_json(const Json* j, const Where& where) {
  Decoder d;
  if (j == nullptr || j->is_null()) return d;
  std::vector<Item> items;
  flatten(*j, where, 0, items);
  if (items.size() == 1 && items[0].kind == Item::Kind::kByteLevel) {
    d.mode_ = Mode::kByteLevel;
    return d;
  }
  d.mode_ = Mode::kPieces;
  bool fused = false;
  for (Item& item : items) {
    switch (item.kind) {
      case Item::Kind::kByteLevel:
        tokjson::fail(where, "a ByteLevel decoder combined with other decoders is not supported");
      case Item::Kind::kFuse:
        fused = true;
        break;
      case Item::Kind::kByteFallback:
        if (fused || d.byte_fallback_) {
          tokjson::fail(where, "ByteFallback after Fuse or twice is not supported");
        }
        d.byte_fallback_ = true;
        break;
      case Item::Kind::kStep:
        if (fused && item.step.kind != Step::Kind::kStrip) {
          tokjson::fail(where, "only Strip may follow Fuse in a decoder Sequence");
        }
        if (item.step.kind == Step::Kind::kMetaspace && !fused && !d.byte_fallback_ &&
            item.step.strip_first) {
          d.first_differs_ = true;
        }
        (fused              ? d.strips_
         : d.byte_fallback_ ? d.after_
                            : d.before_)
            .push_back(std::move(item.step));
        break;
    }
  }
  return d;
}

void Decoder::build(int32_t size, const std::function<const std::string*(int32_t)>& token) {
  raw_.assign(static_cast<size_t>(size), nullptr);
  text_.assign(static_cast<size_t>(size), std::string());
  byte_.assign(static_cast<size_t>(size), -1);
  for (int32_t id = 0; id < size; ++id) {
    const std::string* t = token(id);
    if (t == nullptr) continue;
    const auto i = static_cast<size_t>(id);
    raw_[i] = t;
    switch (mode_) {
      case Mode::kJoin:
        text_[i] = *t;
        break;
      case Mode::kByteLevel:
        // HF keeps a token verbatim when any character is outside the byte-level alphabet.
        if (!byte_level::decode(*t, text_[i])) text_[i] = *t;
        break;
      case Mode::kPieces:
        text_[i] = apply_steps(before_, *t, 1);
        if (byte_fallback_) byte_[i] = static_cast<int16_t>(byte_token_value(text_[i]));
        break;
    }
  }
}

std::string Decoder::token_bytes(int32_t id) const {
  const auto i = static_cast<size_t>(id);
  if (byte_[i] >= 0) return std::string(1, static_cast<char>(byte_[i]));
  return text_[i];
}

std::string Decoder::token_text(int32_t id, size_t index) const {
  const auto i = static_cast<size_t>(id);
  if (index == 0 && first_differs_) return apply_steps(before_, *raw_[i], 0);
  return text_[i];
}

void Decoder::push(State& st, int32_t id, std::string& out) const {
  const size_t index = st.tokens++;
  if (mode_ != Mode::kPieces) {
    if (index > 0) st.bytes.append(separator());
    st.bytes.append(text_[static_cast<size_t>(id)]);
    // Maximal-subpart substitution decides each position from the bytes up to it plus at most the
    // next one, so emitting all but a still-completable tail matches decoding the whole.
    const size_t done = utf8::drain_complete(st.bytes, out);
    st.bytes.erase(0, done);
    return;
  }
  std::string text = token_text(id, index);
  if (byte_fallback_) {
    const int b =
        index == 0 && first_differs_ ? byte_token_value(text) : byte_[static_cast<size_t>(id)];
    if (b >= 0) {
      // A run of byte tokens is judged whole (valid UTF-8 or not) when it ends.
      st.bytes.push_back(static_cast<char>(b));
      return;
    }
    flush_run(st, out);
  }
  element(st, std::move(text), out);
}

void Decoder::flush_run(State& st, std::string& out) const {
  if (st.bytes.empty()) return;
  std::string run = std::move(st.bytes);
  st.bytes.clear();
  if (utf8::is_valid(run)) {
    element(st, std::move(run), out);
  } else {
    // HF's ByteFallback: one U+FFFD per byte token of an invalid run.
    for (size_t k = 0; k < run.size(); ++k) element(st, kReplacementChar, out);
  }
}

void Decoder::element(State& st, std::string text, std::string& out) const {
  const size_t index = st.elements++;
  if (!after_.empty()) text = apply_steps(after_, std::move(text), index);
  whole_text(st, text, out);
}

// The whole-text Strip steps, streamed: a leading `ch` is dropped while fewer than `start` were;
// trailing `ch` are held back (up to `stop`) until something else follows, and dropped at the end.
void Decoder::whole_text(State& st, std::string_view text, std::string& out) const {
  if (strips_.empty()) {
    out.append(text);
    return;
  }
  if (st.held.size() != strips_.size()) {
    st.lead_stripped.assign(strips_.size(), 0);
    st.lead_done.assign(strips_.size(), false);
    st.held.assign(strips_.size(), 0);
  }
  std::string cur(text);
  for (size_t k = 0; k < strips_.size(); ++k) {
    const Step& s = strips_[k];
    std::string next;
    size_t i = 0;
    while (i < cur.size()) {
      const size_t len = utf8::next(cur, i).len;
      const bool is_ch = std::string_view(cur).substr(i, len) == s.ch;
      i += len;
      if (!st.lead_done[k]) {
        if (is_ch && st.lead_stripped[k] < s.start) {
          ++st.lead_stripped[k];
          continue;
        }
        st.lead_done[k] = true;
      }
      if (is_ch) {
        if (++st.held[k] > s.stop) {
          next.append(s.ch);
          --st.held[k];
        }
      } else {
        for (; st.held[k] > 0; --st.held[k]) next.append(s.ch);
        next.append(cur, i - len, len);
      }
    }
    cur = std::move(next);
  }
  out.append(cur);
}

void Decoder::finish(State& st, std::string& out) const {
  if (mode_ != Mode::kPieces) {
    if (!st.bytes.empty()) out.append(utf8::to_valid_lossy(st.bytes));
  } else {
    flush_run(st, out);
    // What each whole-text Strip still holds is its trailing `ch`: dropped.
  }
  st = State{};
}

}  // namespace pagoda
