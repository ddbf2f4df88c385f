#include "server/request_json.h"

#include <utility>
#include <vector>

#include "server/api_error.h"

namespace pagoda::server {

bool nesting_exceeds(const Json& v, size_t limit) {
  if (!v.is_structured()) return false;
  std::vector<std::pair<const Json*, size_t>> todo{{&v, 1}};
  while (!todo.empty()) {
    const auto [node, depth] = todo.back();
    todo.pop_back();
    if (depth > limit) return true;
    for (const Json& child : *node)
      if (child.is_structured()) todo.emplace_back(&child, depth + 1);
  }
  return false;
}

namespace {

// Builds the value the way nlohmann's own DOM parser does (a stack of open containers, so no
// recursion), refusing to nest past the bound and refusing integers that do not fit 64 bits:
// nlohmann would turn those into doubles, and the template would then print another number.
class BoundedBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit BoundedBuilder(const std::string& param) : param_(param) {}
  Json take() { return std::move(root_); }

  bool null() override { return put(Json(nullptr)) != nullptr; }
  bool boolean(bool v) override { return put(Json(v)) != nullptr; }
  bool number_integer(number_integer_t v) override { return put(Json(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) override { return put(Json(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t& lexeme) override {
    if (lexeme.find_first_of(".eE") == string_t::npos)
      throw bad_request(param_ + " holds the integer " + lexeme +
                            ", which is beyond 64 bits; integers that large are not supported",
                        param_);
    return put(Json(v)) != nullptr;
  }
  bool string(string_t& v) override { return put(Json(std::move(v))) != nullptr; }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  Json* put(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    // A repeated key keeps its first place and takes the last value, as Python's json.loads.
    Json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool open(Json container) {
    if (open_.size() >= kMaxChatNesting)
      throw bad_request(param_ + " is nested too deeply (more than " + std::to_string(kMaxChatNesting) + " levels)",
                        param_);
    // Only the innermost open container grows, so pointers to the outer ones stay valid.
    open_.push_back(put(std::move(container)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  const std::string& param_;
  Json root_;
  std::vector<Json*> open_;
  std::string key_;
};

}  // namespace

std::optional<Json> parse_arguments_json(const std::string& text, const std::string& param) {
  BoundedBuilder builder(param);
  if (!Json::sax_parse(text, &builder)) return std::nullopt;
  return builder.take();
}

}  // namespace pagoda::server
