// GBNF (llama.cpp's grammar dialect) into the grammar IR: `name ::= alternatives`, "literals",
// [classes] and [^negated] ones with ranges and \x \u \U escapes, `.`, ( groups ), and the
// repetitions * + ? {m} {m,} {m,n}. The root rule is `root`. Errors (pagoda::Error) name the line.
#pragma once

#include <string_view>

#include "structured/grammar.h"

namespace pagoda::structured {

Grammar parse_gbnf(std::string_view text);

// Fails when a rule can reach itself without consuming a byte (left recursion), which a
// top-down automaton cannot run.
void check_no_left_recursion(const Grammar& g);

}  // namespace pagoda::structured
