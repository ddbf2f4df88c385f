#include "server/json_body.h"

#include <unordered_map>
#include <utility>
#include <vector>

namespace pagoda::server {

namespace {

using Json = nlohmann::ordered_json;
using Object = Json::object_t;  // ordered_map: a vector of (key, value) whose insert scans it
using Entries = Object::Container;

// Objects up to this many keys are searched by a scan (cheaper than hashing for the usual small
// objects); past it, by a hash index built once and kept up to date.
constexpr size_t kScanUpTo = 16;

// Builds the value the way nlohmann's DOM parser does (a stack of open containers, no recursion),
// but appends object members itself, finding repeats through the index.
class LinearBuilder final : public nlohmann::json_sax<Json> {
 public:
  explicit LinearBuilder(const JsonLimits& limits) : limits_(limits) {}

  Json take() { return std::move(root_); }
  JsonFault fault() const { return fault_; }
  const std::string& detail() const { return detail_; }

  bool null() override { return put(Json(nullptr)); }
  bool boolean(bool v) override { return put(Json(v)); }
  bool number_integer(number_integer_t v) override { return put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(Json(v)); }
  bool number_float(number_float_t v, const string_t& lexeme) override {
    // nlohmann parses an integer too large for 64 bits as a double; the lexeme tells.
    if (lexeme.find_first_of(".eE") == string_t::npos) {
      detail_ = lexeme.size() > 40 ? lexeme.substr(0, 40) + "..." : lexeme;
      return stop(JsonFault::big_integer);
    }
    return put(Json(v));
  }
  bool string(string_t& v) override { return put(Json(std::move(v))); }
  bool binary(binary_t&) override { return stop(JsonFault::syntax); }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool key(string_t& k) override {
    if (++total_keys_ > limits_.max_keys) return stop(JsonFault::total_keys);
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    if (fault_ == JsonFault::none) fault_ = JsonFault::syntax;
    return false;
  }

 private:
  struct Open {
    Json* value;
    std::unordered_map<std::string, size_t> index;  // key -> position; empty while scanned
  };

  bool stop(JsonFault f) {
    fault_ = f;
    return false;
  }

  bool put(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      last_ = &root_;
      return true;
    }
    Open& top = open_.back();
    if (top.value->is_array()) {
      top.value->push_back(std::move(v));
      last_ = &top.value->back();
      return true;
    }
    Entries& entries = top.value->get_ref<Object&>();
    if (const size_t at = find(top, entries); at != entries.size()) {
      entries[at].second = std::move(v);
      last_ = &entries[at].second;
      return true;
    }
    if (entries.size() >= limits_.max_object_keys) return stop(JsonFault::object_keys);
    entries.emplace_back(std::move(key_), std::move(v));
    if (!top.index.empty()) {
      top.index.emplace(entries.back().first, entries.size() - 1);
    } else if (entries.size() > kScanUpTo) {
      top.index.reserve(2 * entries.size());
      for (size_t i = 0; i < entries.size(); ++i) top.index.emplace(entries[i].first, i);
    }
    last_ = &entries.back().second;
    return true;
  }

  // The position of key_ in the innermost object, or entries.size().
  size_t find(const Open& top, const Entries& entries) const {
    if (!top.index.empty()) {
      const auto it = top.index.find(key_);
      return it == top.index.end() ? entries.size() : it->second;
    }
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].first == key_) return i;
    return entries.size();
  }

  bool open(Json container) {
    if (open_.size() >= limits_.max_depth) return stop(JsonFault::too_deep);
    if (!put(std::move(container))) return false;
    // Only the innermost open container grows, so pointers to the outer ones stay valid.
    open_.push_back(Open{last_, {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  const JsonLimits& limits_;
  Json root_;
  Json* last_ = nullptr;
  std::vector<Open> open_;
  std::string key_;
  size_t total_keys_ = 0;
  JsonFault fault_ = JsonFault::none;
  std::string detail_;
};

}  // namespace

JsonParse parse_json_limited(std::string_view text, const JsonLimits& limits) {
  LinearBuilder builder(limits);
  JsonParse out;
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder);
  if (ok && builder.fault() == JsonFault::none) {
    out.value = builder.take();
    return out;
  }
  out.value = Json(Json::value_t::discarded);
  out.fault = builder.fault() == JsonFault::none ? JsonFault::syntax : builder.fault();
  out.detail = builder.detail();
  return out;
}

std::string describe_json_fault(const JsonParse& p, const JsonLimits& limits, const std::string& what) {
  switch (p.fault) {
    case JsonFault::none: return "";
    case JsonFault::syntax: return what + " is not valid JSON";
    case JsonFault::too_deep:
      return what + " nests deeper than " + std::to_string(limits.max_depth) + " levels";
    case JsonFault::object_keys:
      return what + " has an object with more than " + std::to_string(limits.max_object_keys) +
             " keys; no request needs that many";
    case JsonFault::total_keys:
      return what + " has more than " + std::to_string(limits.max_keys) + " object keys in all; no request "
             "needs that many";
    case JsonFault::big_integer:
      return "the integer " + p.detail +
             " does not fit in 64 bits; pagoda would change its value, so it refuses it (send it as a string)";
  }
  return what + " is not valid JSON";
}

nlohmann::ordered_json parse_json_bounded(std::string_view text, int max_depth, std::string& error) {
  JsonLimits limits;
  limits.max_depth = static_cast<size_t>(max_depth);
  JsonParse p = parse_json_limited(text, limits);
  if (p.fault != JsonFault::none) {
    // The messages clients have always seen for these two.
    error = p.fault == JsonFault::too_deep ? "the JSON nests deeper than " + std::to_string(max_depth) + " levels"
            : p.fault == JsonFault::syntax ? "the request body is not valid JSON"
                                           : describe_json_fault(p, limits, "the JSON");
  }
  return std::move(p.value);
}

}  // namespace pagoda::server
