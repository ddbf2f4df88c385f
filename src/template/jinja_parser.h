// Recursive-descent parser for the jinja2 subset chat templates use, following jinja2's grammar
// (operator precedence, tests, filters, tuples, slices) so templates parse as jinja2 parses them.
#pragma once

#include <string_view>

#include "template/jinja_ast.h"

namespace pagoda::jinja {

// Throws pagoda::Error("chat template syntax error at line L, column C: ...").
Body parse(std::string_view source);

}  // namespace pagoda::jinja
