#include "server/special_text.h"

#include <cstring>

#include "tokenizer/tokenizer.h"

namespace pagoda::server {

SpecialTextGuard::SpecialTextGuard(std::vector<std::string> specials) : specials_(std::move(specials)) {
  for (size_t i = 0; i < specials_.size(); ++i)
    if (!specials_[i].empty()) by_first_byte_[static_cast<uint8_t>(specials_[i][0])].push_back(static_cast<uint32_t>(i));
}

SpecialTextGuard SpecialTextGuard::for_tokenizer(const Tokenizer& tok) {
  std::vector<std::string> specials;
  for (const AddedToken& t : tok.added_tokens())
    if (t.special) specials.push_back(t.content);
  return SpecialTextGuard(std::move(specials));
}

std::string SpecialTextGuard::mark(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kMark.size(), kMark) == 0) {  // the client's own marks would forge ours
      i += kMark.size();
      continue;
    }
    out += text[i];
    for (uint32_t k : by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const std::string& s = specials_[k];
      if (text.size() - i >= s.size() && std::memcmp(text.data() + i, s.data(), s.size()) == 0) {
        out += kMark;
        break;
      }
    }
    ++i;
  }
  return out;
}

void SpecialTextGuard::mark_json(nlohmann::ordered_json& v) const {
  if (v.is_string()) {
    v = mark(v.get_ref<const std::string&>());
  } else if (v.is_array()) {
    for (auto& e : v) mark_json(e);
  } else if (v.is_object()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto& [k, e] : v.items()) {
      mark_json(e);
      out[mark(k)] = std::move(e);
    }
    v = std::move(out);
  }
}

std::string SpecialTextGuard::unmark(std::string_view rendered, std::vector<size_t>& literal_at) {
  literal_at.clear();
  std::string out;
  out.reserve(rendered.size());
  for (size_t i = 0; i < rendered.size();) {
    const size_t at = rendered.find(kMark, i);
    const size_t end = at == std::string_view::npos ? rendered.size() : at;
    out.append(rendered, i, end - i);
    if (at == std::string_view::npos) break;
    // The mark follows the special text's first byte.
    if (!out.empty()) literal_at.push_back(out.size() - 1);
    i = at + kMark.size();
  }
  return out;
}

}  // namespace pagoda::server
