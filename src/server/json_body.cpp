#include "server/json_body.h"

namespace pagoda::server {

namespace {

// The first integer literal outside strings that does not fit 64 bits (nlohmann would make it a
// double, changing its value; Python would keep it exactly), or "" when there is none. A linear
// scan; syntax errors are left to the parser.
std::string first_oversized_integer(std::string_view text) {
  constexpr std::string_view kMaxU64 = "18446744073709551615";
  constexpr std::string_view kMinI64 = "9223372036854775808";  // magnitude of INT64_MIN
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    const size_t start = i;
    const bool negative = c == '-';
    if (negative) ++i;
    const size_t digits_from = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    const std::string_view digits = text.substr(digits_from, i - digits_from);
    const bool fraction_or_exponent = i < text.size() && (text[i] == '.' || text[i] == 'e' || text[i] == 'E');
    while (i < text.size() && (text[i] == '.' || text[i] == 'e' || text[i] == 'E' || text[i] == '+' ||
                               text[i] == '-' || (text[i] >= '0' && text[i] <= '9')))
      ++i;
    if (!fraction_or_exponent) {
      const std::string_view limit = negative ? kMinI64 : kMaxU64;
      if (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit))
        return std::string(text.substr(start, digits_from - start + digits.size()));
    }
    --i;
  }
  return "";
}

}  // namespace

nlohmann::ordered_json parse_json_bounded(std::string_view text, int max_depth, std::string& error) {
  using Json = nlohmann::ordered_json;
  bool too_deep = false;
  // The callback sees each value's depth before it is built; returning false drops the value, so
  // nothing below the limit is ever materialised.
  const Json::parser_callback_t bound = [&](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth) {
      too_deep = true;
      return false;
    }
    return !too_deep;
  };
  Json j = Json::parse(text.begin(), text.end(), bound, /*allow_exceptions=*/false);
  if (too_deep) {
    error = "the JSON nests deeper than " + std::to_string(max_depth) + " levels";
    return Json(Json::value_t::discarded);
  }
  if (j.is_discarded()) {
    error = "the request body is not valid JSON";
    return j;
  }
  if (const std::string big = first_oversized_integer(text); !big.empty()) {
    error = "the integer " + (big.size() > 40 ? big.substr(0, 40) + "..." : big) +
            " does not fit in 64 bits; pagoda would change its value, so it refuses it (send it as a string)";
    return Json(Json::value_t::discarded);
  }
  return j;
}

}  // namespace pagoda::server
