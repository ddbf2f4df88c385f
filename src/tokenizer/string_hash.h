// Transparent hashing so that maps keyed by std::string can be probed with a string_view without
// building a temporary string (one per piece would dominate encoding time).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace pagoda {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  size_t operator()(const std::string& s) const { return std::hash<std::string_view>{}(s); }
  size_t operator()(const char* s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace pagoda
