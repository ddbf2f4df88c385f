#include "server/json_body.h"

namespace pagoda::server {

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
  if (j.is_discarded()) error = "the request body is not valid JSON";
  return j;
}

}  // namespace pagoda::server
