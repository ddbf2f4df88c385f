// A regular expression (the subset structured-output clients send: literals, classes with
// \d \w \s, ., groups, |, * + ? {m,n}, ^ $ at the ends) as one GBNF expression. Features an
// automaton cannot enforce (backreferences, lookaround, \b) are an Error naming them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::structured {

// json_string: the regex constrains the decoded text of a JSON string, so `"`, `\` and control
// characters are written JSON-escaped (literals) or left out (classes).
// cap >= 0 bounds each unbounded repetition (* + {m,}) to at most `cap` more than its minimum: a
// subset of the language whose longest match is finite (for a pattern beside maxLength).
std::string regex_to_gbnf(std::string_view regex, bool json_string = false, int64_t cap = -1);
// Characters in the shortest and longest full match of the regex (capped as above; -1:
// unbounded), for checking a pattern against minLength/maxLength.
std::pair<int64_t, int64_t> regex_length_bounds(std::string_view regex, int64_t cap = -1);

// GBNF spellings shared by the front ends.
std::string gbnf_literal(std::string_view bytes);
std::string gbnf_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

}  // namespace pagoda::structured
