#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace pagoda {

namespace {

// Characters that are NFC by themselves, have canonical combining class 0 and are never the second
// half of a canonical composition: a string made only of them is already NFC. Deliberately narrow
// (Greek, for instance, has singletons such as U+037E that NFC rewrites).
bool is_nfc_inert(uint32_t cp) {
  return cp < 0x300 || (cp >= 0x400 && cp <= 0x482) || (cp >= 0x2010 && cp <= 0x2027) ||
         (cp >= 0x3000 && cp <= 0x3029) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
         (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xFF01 && cp <= 0xFF5E);
}

std::string utf8proc_nfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> holder(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace

ReplaceRule ReplaceRule::from_json(const tokjson::Json& j, const tokjson::Where& where) {
  ReplaceRule r;
  const tokjson::Json* pattern = tokjson::find(j, "pattern", where);
  const tokjson::Where pw = where.at("pattern");
  if (pattern == nullptr) tokjson::fail(pw, "missing");
  tokjson::require_object(*pattern, pw);
  if (tokjson::find(*pattern, "String", pw) != nullptr) {
    r.literal_ = tokjson::get_string(*pattern, "String", pw);
    // Hugging Face would insert `content` between every character; no real file wants that.
    if (r.literal_.empty()) tokjson::fail(pw.at("String"), "an empty pattern is not supported");
  } else if (tokjson::find(*pattern, "Regex", pw) != nullptr) {
    r.regex_ = std::make_shared<Regex>(tokjson::get_string(*pattern, "Regex", pw), false,
                                       pw.at("Regex").str());
  } else {
    tokjson::fail(pw, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  r.content_ = tokjson::get_string(j, "content", where);
  return r;
}

std::string ReplaceRule::apply(std::string_view text) const {
  std::string out;
  if (text.empty()) return out;  // HF reports no match at all in an empty string
  size_t done = 0;
  if (regex_ == nullptr) {
    if (text.find(literal_) == std::string_view::npos) return std::string(text);
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, done)) {
      out.append(text.substr(done, at - done)).append(content_);
      done = at + literal_.size();
    }
  } else {
    std::vector<std::pair<size_t, size_t>> matches;
    regex_->find_all(text, matches);
    for (const auto& [start, end] : matches) {
      out.append(text.substr(done, start - done)).append(content_);
      done = end;
    }
  }
  out.append(text.substr(done));
  return out;
}

void Normalizer::parse_into(const tokjson::Json& j, const tokjson::Where& where, int depth,
                            std::vector<Step>& steps) {
  if (j.is_null()) return;
  if (depth > 16) tokjson::fail(where, "normalizer Sequence nested too deeply");
  const std::string& type = tokjson::get_string(j, "type", where);
  Step step;
  if (type == "NFC") {
    step.kind = Step::Kind::kNfc;
  } else if (type == "Replace") {
    step.kind = Step::Kind::kReplace;
    step.replace = ReplaceRule::from_json(j, where);
  } else if (type == "Prepend") {
    step.kind = Step::Kind::kPrepend;
    step.prepend = tokjson::get_string(j, "prepend", where);
  } else if (type == "Sequence") {
    const tokjson::Json* list = tokjson::find(j, "normalizers", where);
    if (list == nullptr) tokjson::fail(where.at("normalizers"), "missing");
    tokjson::require_array(*list, where.at("normalizers"));
    for (size_t i = 0; i < list->size(); ++i) {
      parse_into((*list)[i], where.at("normalizers").at(i), depth + 1, steps);
    }
    return;
  } else {
    tokjson::fail(where.at("type"), "unsupported normalizer type '" + type +
                                        "' (supported: NFC, Replace, Prepend, Sequence, null)");
  }
  steps.push_back(std::move(step));
}

Normalizer Normalizer::from_json(const tokjson::Json& j, const tokjson::Where& where) {
  Normalizer n;
  parse_into(j, where, 0, n.steps_);
  return n;
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kNfc:
        s = nfc(s);
        break;
      case Step::Kind::kReplace:
        s = step.replace.apply(s);
        break;
      case Step::Kind::kPrepend:
        // HF prepends only to a non-empty string.
        if (!s.empty()) s.insert(0, step.prepend);
        break;
    }
  }
  return s;
}

// NFC never acts across an inert character: it has class 0 (so reordering stops there) and
// cannot compose with what precedes it. So only the stretches that contain other characters, each
// starting at the inert character just before them (which may compose with what follows), go
// through utf8proc; everything else is copied.
std::string nfc(std::string_view text) {
  std::string out;
  size_t clean_from = 0;                       // start of the stretch not yet written
  size_t dirty_from = std::string_view::npos;  // start of a stretch that needs utf8proc
  size_t prev_start = 0;                       // start of the previous character
  size_t i = 0;
  while (i < text.size()) {
    const bool ascii = static_cast<uint8_t>(text[i]) < 0x80;
    const utf8::Step st = ascii
                              ? utf8::Step{utf8::StepKind::kValid, 1, static_cast<uint8_t>(text[i])}
                              : utf8::next(text, i);
    const bool inert = st.kind == utf8::StepKind::kValid && is_nfc_inert(st.cp);
    if (inert && dirty_from != std::string_view::npos) {
      out += utf8proc_nfc(text.substr(dirty_from, i - dirty_from));
      dirty_from = std::string_view::npos;
      clean_from = i;
    } else if (!inert && dirty_from == std::string_view::npos) {
      dirty_from = i > clean_from ? prev_start : i;
      out.append(text.substr(clean_from, dirty_from - clean_from));
    }
    prev_start = i;
    i += st.len;
  }
  if (dirty_from != std::string_view::npos) {
    out += utf8proc_nfc(text.substr(dirty_from));
  } else if (clean_from == 0) {
    return std::string(text);
  } else {
    out.append(text.substr(clean_from));
  }
  return out;
}

}  // namespace pagoda
