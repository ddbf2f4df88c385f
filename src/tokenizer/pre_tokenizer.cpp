#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace pagoda {

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t start;
  size_t end;
  bool flag;  // before applying the behaviour: "is a match"; after: "is removed"
};

Behavior parse_behavior(const std::string& name, const tokjson::Where& where) {
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  tokjson::fail(where, "unknown Split behavior '" + name + "'");
}

// Hugging Face's SplitDelimiterBehavior, applied to the alternating match / non-match spans.
std::vector<Span> apply_behavior(std::vector<Span> spans, Behavior behavior) {
  std::vector<Span> out;
  out.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      for (Span& s : spans) out.push_back({s.start, s.end, false});
      break;
    case Behavior::kRemoved:
      for (Span& s : spans) out.push_back({s.start, s.end, s.flag});
      break;
    case Behavior::kMergedWithPrevious:
      for (Span& s : spans) {
        if (s.flag && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.start, s.end, false});
        }
        previous_match = s.flag;
      }
      break;
    case Behavior::kMergedWithNext:
      // Mirror image of MergedWithPrevious: walk backwards, then restore the order.
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->flag && !previous_match && !out.empty()) {
          out.back().start = it->start;
        } else {
          out.push_back({it->start, it->end, false});
        }
        previous_match = it->flag;
      }
      std::reverse(out.begin(), out.end());
      break;
    case Behavior::kContiguous:
      for (Span& s : spans) {
        if (s.flag == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.start, s.end, false});
        }
        previous_match = s.flag;
      }
      break;
  }
  return out;
}

}  // namespace

enum class PrependScheme { kAlways, kFirst, kNever };

struct PreTokenizer::Step {
  enum class Kind { kSplit, kByteLevel, kMetaspace } kind = Kind::kSplit;
  std::unique_ptr<Regex> regex;  // Split's pattern, or GPT-2's for ByteLevel with use_regex
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;
  std::string replacement;  // Metaspace: the one character that stands for a space
  PrependScheme prepend = PrependScheme::kAlways;
  bool split = true;  // Metaspace: split before each replacement character
};

const char* PreTokenizer::gpt2_pattern() {
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
}

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

static void parse_steps(const tokjson::Json& j, const tokjson::Where& where, int depth,
                        std::vector<std::unique_ptr<PreTokenizer::Step>>& steps);

static std::unique_ptr<PreTokenizer::Step> parse_split(const tokjson::Json& j,
                                                       const tokjson::Where& where) {
  auto step = std::make_unique<PreTokenizer::Step>();
  step->kind = PreTokenizer::Step::Kind::kSplit;
  const tokjson::Json* pattern = tokjson::find(j, "pattern", where);
  const tokjson::Where pw = where.at("pattern");
  if (pattern == nullptr) tokjson::fail(pw, "missing");
  tokjson::require_object(*pattern, pw);
  if (tokjson::find(*pattern, "Regex", pw) != nullptr) {
    step->regex = std::make_unique<Regex>(tokjson::get_string(*pattern, "Regex", pw), false,
                                          pw.at("Regex").str());
  } else if (tokjson::find(*pattern, "String", pw) != nullptr) {
    step->regex = std::make_unique<Regex>(tokjson::get_string(*pattern, "String", pw), true,
                                          pw.at("String").str());
  } else {
    tokjson::fail(pw, "expected {\"Regex\": ...} or {\"String\": ...}");
  }
  step->behavior = parse_behavior(tokjson::get_string(j, "behavior", where), where.at("behavior"));
  step->invert = tokjson::get_bool(j, "invert", false, where);
  return step;
}

// As HF deserializes Metaspace: the legacy add_prefix_space=false means prepend_scheme "never".
static std::unique_ptr<PreTokenizer::Step> parse_metaspace(const tokjson::Json& j,
                                                           const tokjson::Where& where) {
  auto step = std::make_unique<PreTokenizer::Step>();
  step->kind = PreTokenizer::Step::Kind::kMetaspace;
  step->replacement = tokjson::get_string(j, "replacement", where);
  if (step->replacement.empty() ||
      utf8::next(step->replacement, 0).len != step->replacement.size()) {
    tokjson::fail(where.at("replacement"), "expected exactly one character");
  }
  const tokjson::Json* scheme = tokjson::find(j, "prepend_scheme", where);
  const bool has_scheme = scheme != nullptr && !scheme->is_null();
  if (has_scheme) {
    const std::string& name = tokjson::get_string(j, "prepend_scheme", where);
    if (name == "always") {
      step->prepend = PrependScheme::kAlways;
    } else if (name == "first") {
      step->prepend = PrependScheme::kFirst;
    } else if (name == "never") {
      step->prepend = PrependScheme::kNever;
    } else {
      tokjson::fail(where.at("prepend_scheme"),
                    "unknown prepend_scheme '" + name + "' (expected always, first or never)");
    }
  }
  if (!tokjson::get_bool(j, "add_prefix_space", true, where)) {
    if (has_scheme && step->prepend != PrependScheme::kNever) {
      tokjson::fail(where.at("add_prefix_space"),
                    "add_prefix_space false does not match prepend_scheme");
    }
    step->prepend = PrependScheme::kNever;
  }
  step->split = tokjson::get_bool(j, "split", true, where);
  return step;
}

static void parse_steps(const tokjson::Json& j, const tokjson::Where& where, int depth,
                        std::vector<std::unique_ptr<PreTokenizer::Step>>& steps) {
  if (j.is_null()) return;
  if (depth > 16) tokjson::fail(where, "pre_tokenizer Sequence nested too deeply");
  const std::string& type = tokjson::get_string(j, "type", where);
  if (type == "Sequence") {
    const tokjson::Json* list = tokjson::find(j, "pretokenizers", where);
    const tokjson::Where lw = where.at("pretokenizers");
    if (list == nullptr) tokjson::fail(lw, "missing");
    tokjson::require_array(*list, lw);
    for (size_t i = 0; i < list->size(); ++i) parse_steps((*list)[i], lw.at(i), depth + 1, steps);
  } else if (type == "Split") {
    steps.push_back(parse_split(j, where));
  } else if (type == "ByteLevel") {
    auto step = std::make_unique<PreTokenizer::Step>();
    step->kind = PreTokenizer::Step::Kind::kByteLevel;
    step->add_prefix_space = tokjson::get_bool(j, "add_prefix_space", true, where);
    if (tokjson::get_bool(j, "use_regex", true, where)) {
      step->regex = std::make_unique<Regex>(PreTokenizer::gpt2_pattern(), false, where.str());
    }
    steps.push_back(std::move(step));
  } else if (type == "Metaspace") {
    steps.push_back(parse_metaspace(j, where));
  } else {
    tokjson::fail(where.at("type"),
                  "unsupported pre_tokenizer type '" + type +
                      "' (supported: Split, ByteLevel, Metaspace, Sequence, null)");
  }
}

PreTokenizer PreTokenizer::from_json(const tokjson::Json& j, const tokjson::Where& where) {
  PreTokenizer p;
  parse_steps(j, where, 0, p.steps_);
  p.defer_byte_mapping_ = !p.steps_.empty() && p.steps_.back()->kind == Step::Kind::kByteLevel;
  return p;
}

void PreTokenizer::for_each_piece(std::string_view text, const PieceFn& fn, bool at_origin) const {
  run(0, text, at_origin, fn);
}

void PreTokenizer::run(size_t step, std::string_view text, bool at_origin,
                       const PieceFn& fn) const {
  if (text.empty()) return;  // Hugging Face drops empty splits
  if (step == steps_.size()) {
    fn(text);
    return;
  }
  const Step& s = *steps_[step];
  switch (s.kind) {
    case Step::Kind::kSplit:
      run_split(s, step, text, at_origin, fn);
      break;
    case Step::Kind::kByteLevel:
      run_byte_level(s, step, text, at_origin, fn);
      break;
    case Step::Kind::kMetaspace:
      run_metaspace(s, step, text, at_origin, fn);
      break;
  }
}

// Alternating non-match / match spans of text for the given matches.
static std::vector<Span> match_spans(const std::vector<std::pair<size_t, size_t>>& matches,
                                     size_t size, bool invert) {
  std::vector<Span> spans;
  spans.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const auto& [start, end] : matches) {
    if (prev != start) spans.push_back({prev, start, invert});
    spans.push_back({start, end, !invert});
    prev = end;
  }
  if (prev != size) spans.push_back({prev, size, invert});
  return spans;
}

void PreTokenizer::run_split(const Step& s, size_t step, std::string_view text, bool at_origin,
                             const PieceFn& fn) const {
  std::vector<std::pair<size_t, size_t>> matches;
  s.regex->find_all(text, matches);
  for (const Span& piece :
       apply_behavior(match_spans(matches, text.size(), s.invert), s.behavior)) {
    if (!piece.flag) {
      run(step + 1, text.substr(piece.start, piece.end - piece.start),
          at_origin && piece.start == 0, fn);
    }
  }
}

// HF's Metaspace: spaces become the replacement character, one is prepended (always, or only to
// the piece at the start of the input, or never) unless the piece starts with one, and then the
// piece is split before every replacement character (MergedWithNext).
void PreTokenizer::run_metaspace(const Step& s, size_t step, std::string_view text, bool at_origin,
                                 const PieceFn& fn) const {
  std::string replaced;
  replaced.reserve(text.size() + s.replacement.size());
  for (char c : text) {
    if (c == ' ') {
      replaced.append(s.replacement);
    } else {
      replaced.push_back(c);
    }
  }
  const bool starts_with_it = replaced.compare(0, s.replacement.size(), s.replacement) == 0;
  if (!starts_with_it &&
      (s.prepend == PrependScheme::kAlways || (s.prepend == PrependScheme::kFirst && at_origin))) {
    replaced.insert(0, s.replacement);
  }
  const std::string_view out = replaced;
  if (!s.split) {
    run(step + 1, out, at_origin, fn);
    return;
  }
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t at = out.find(s.replacement); at != std::string_view::npos;
       at = out.find(s.replacement, at + s.replacement.size())) {
    matches.emplace_back(at, at + s.replacement.size());
  }
  for (const Span& piece :
       apply_behavior(match_spans(matches, out.size(), false), Behavior::kMergedWithNext)) {
    run(step + 1, out.substr(piece.start, piece.end - piece.start), at_origin && piece.start == 0,
        fn);
  }
}

void PreTokenizer::run_byte_level(const Step& s, size_t step, std::string_view text, bool at_origin,
                                  const PieceFn& fn) const {
  std::string prefixed;
  if (s.add_prefix_space && text.front() != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  const bool last = step + 1 == steps_.size();
  auto emit = [&](size_t start, size_t end) {
    const std::string_view piece = text.substr(start, end - start);
    const bool origin = at_origin && start == 0;
    if (last) {
      run(step + 1, piece, origin, fn);  // the model maps the bytes
    } else {
      run(step + 1, byte_level::encode(piece), origin, fn);
    }
  };
  if (s.regex == nullptr) {
    emit(0, text.size());
    return;
  }
  std::vector<std::pair<size_t, size_t>> matches;
  s.regex->find_all(text, matches);
  size_t prev = 0;
  for (const auto& [start, end] : matches) {
    if (prev != start) emit(prev, start);
    emit(start, end);
    prev = end;
  }
  if (prev != text.size()) emit(prev, text.size());
}

}  // namespace pagoda
