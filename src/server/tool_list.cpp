#include "server/tool_list.h"

#include "server/api_error.h"
#include "server/request_fields.h"
#include "server/request_json.h"

namespace pagoda::server {

Json chat_function_tools(const Json& tools, const std::function<Json(const Json& tool, const std::string& key)>& to_function) {
  if (!tools.is_array()) wrong_type("tools", "an array", tools);
  if (nesting_exceeds(tools, kMaxChatNesting))
    throw bad_request("'tools' is nested too deeply (more than " + std::to_string(kMaxChatNesting) + " levels)",
                      "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string key = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) wrong_type(key, "an object", t);
    out.push_back({{"type", "function"}, {"function", to_function(t, key)}});
  }
  return out;
}

}  // namespace pagoda::server
