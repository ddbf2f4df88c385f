// Request data (JSON) as template values, the way transformers hands Python objects to jinja2:
// objects keep their key order, integers keep their exact value at any size. Client data decides
// the nesting, so the conversion walks it with an explicit stack and stops past kMaxJsonNesting.
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "template/jinja_value.h"

namespace pagoda::jinja {
namespace {

Value json_scalar(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::string: return Value::string(j.get<std::string>());
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::integer(static_cast<int64_t>(u));
      return Value::integer(BigInt::from_unsigned(u));
    }
    case T::number_float: return Value::real(j.get<double>());
    default: return Value::none();
  }
}

// One array or object being converted: its items so far, and the key it has in its parent.
struct JsonFrame {
  const nlohmann::ordered_json* node;
  nlohmann::ordered_json::const_iterator next;
  std::string key_in_parent;
  std::vector<Value> items;
  Dict dict;
};

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& root) {
  if (!root.is_structured()) return json_scalar(root);
  std::vector<JsonFrame> stack;
  stack.push_back(JsonFrame{&root, root.begin(), {}, {}, {}});
  auto finish = [](JsonFrame& f) {
    return f.node->is_object() ? dict_of(std::move(f.dict)) : list_of(std::move(f.items));
  };
  auto attach = [](JsonFrame& parent, std::string key, Value v) {
    if (parent.node->is_object()) {
      parent.dict.entries.emplace_back(string(std::move(key)), std::move(v));
    } else {
      parent.items.push_back(std::move(v));
    }
  };
  for (;;) {
    JsonFrame& top = stack.back();
    if (top.next == top.node->end()) {
      Value done = finish(top);
      std::string key = std::move(top.key_in_parent);
      stack.pop_back();
      if (stack.empty()) return done;
      attach(stack.back(), std::move(key), std::move(done));
      continue;
    }
    const auto it = top.next++;
    std::string key = top.node->is_object() ? it.key() : std::string();
    const nlohmann::ordered_json& child = *it;
    if (!child.is_structured()) {
      attach(top, std::move(key), json_scalar(child));
      continue;
    }
    if (stack.size() >= kMaxJsonNesting)
      throw Error("the request data is nested too deeply (more than " + std::to_string(kMaxJsonNesting) + " levels)");
    stack.push_back(JsonFrame{&child, child.begin(), std::move(key), {}, {}});
  }
}

}  // namespace pagoda::jinja
