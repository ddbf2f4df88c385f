// Numeric JSON Schema keywords (minimum, maximum, exclusive bounds, multipleOf) as GBNF expressions
// that match only valid numbers. Bounds are handled as exact decimals, of any size: an integer
// range at ±2^63 and beyond is enforced digit by digit, never through int64 or double arithmetic.
// What cannot be enforced exactly is an Error naming the keyword.
#pragma once

#include <optional>
#include <string>

#include "core/error.h"

namespace pagoda::structured {

// A schema that admits no value at all (an empty range, a `false` schema, types with nothing in
// common): where the value is optional (a property, an anyOf alternative) it is left out.
struct EmptySchema : Error {
  using Error::Error;
};

// An exact decimal: sign, integer digits (no leading zeros; "0" for zero), fraction digits (no
// trailing zeros).
struct Decimal {
  bool neg = false;
  std::string int_part = "0";
  std::string frac;
  bool is_integer() const { return frac.empty(); }
  bool is_zero() const { return int_part == "0" && frac.empty(); }
};

// Parses a JSON number's text ("-12.5e3", "1e+19", "18446744073709551616"); nullopt when it is
// not one or its exponent is beyond ±400.
std::optional<Decimal> parse_decimal(const std::string& text);
int compare(const Decimal& a, const Decimal& b);

struct NumericBounds {
  std::optional<Decimal> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
  std::optional<Decimal> multiple_of;  // > 0
};

// A GBNF expression matching JSON integers within the bounds (integer-valued multipleOf only).
// Rules it needs (a remainder automaton for multipleOf) are appended to `rules` once, named with
// `prefix`.
std::string integer_range_gbnf(const NumericBounds& b, const std::string& prefix, std::string& rules);
// A GBNF expression matching JSON numbers within the bounds: fractions where the bounds allow
// them, with at most 15 significant digits at the edges so that a validator that reads them as
// doubles compares them as the decimals they are.
std::string number_range_gbnf(const NumericBounds& b, const std::string& prefix, std::string& rules);

}  // namespace pagoda::structured
