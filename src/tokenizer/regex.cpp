#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace pagoda {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof buf);
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buf));
}

// One JIT stack and match context per thread: PCRE2's default 32 KiB JIT stack is too small for
// long runs of whitespace or letters, and these objects must not be shared between threads.
struct ThreadMatchState {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchState() {
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    if (context != nullptr && stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;
};

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

}  // namespace

std::string Regex::unicode_whitespace(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    const char e = pattern[i + 1];
    if (e == 's') {
      out.append("\\p{White_Space}");
    } else if (e == 'S') {
      out.append("\\P{White_Space}");
    } else if (e == 'Q') {
      // \Q...\E is literal text: copy it untouched.
      const size_t end = pattern.find("\\E", i + 2);
      const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
      out.append(pattern.substr(i, stop - i));
      i = stop;
      continue;
    } else {
      out.push_back(c);
      out.push_back(e);
    }
    i += 2;
  }
  return out;
}

Regex::Regex(std::string_view pattern, bool literal, const std::string& where) : where_(where) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 refuses UCP together with LITERAL; a literal has no classes for UCP to change anyway.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  const std::string source = literal ? std::string(pattern) : unicode_whitespace(pattern);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &err,
                        &offset, nullptr);
  if (code_ == nullptr) {
    throw Error(where + ": cannot compile regex '" + std::string(pattern) + "' at offset " +
                std::to_string(offset) + ": " + pcre2_message(err));
  }
  // Without JIT the interpreter still gives the same matches, only slower.
  (void)pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local ThreadMatchState state;
  MatchData md(code_);
  if (md.data == nullptr) throw Error(where_ + ": out of memory for regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  uint32_t flags = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code_, subject, text.size(), pos, flags | PCRE2_NO_UTF_CHECK,
                               md.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) {
      if (flags == 0) break;
      // The empty match at pos was already reported; step over one character.
      flags = 0;
      ++pos;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (rc < 0) throw Error(where_ + ": regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (end < start) throw Error(where_ + ": regex uses \\K in a way that is not supported");
    out.emplace_back(start, end);
    pos = end;
    // After an empty match, insist on a non-empty one at the same place before moving on.
    flags = start == end ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
  }
}

}  // namespace pagoda
