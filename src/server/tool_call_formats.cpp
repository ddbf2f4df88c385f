// The tool-call syntaxes of the families other than Qwen's: Llama 3 JSON, Mistral and pythonic.
// Each parser takes the whole answer and either finds every call in it or none (the answer is
// then content), as vLLM's parsers of the same names do.
#include <cctype>
#include <random>

#include "server/chat_output_parser.h"
#include "server/json_body.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

using OJson = nlohmann::ordered_json;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// End of the JSON object or array starting at s[0] (one past its closing bracket), or npos.
size_t json_end(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Mistral's chat template refuses a call id that is not 9 letters and digits ("Tool call IDs should
// be alphanumeric strings with length 9!"): the calls of its syntax get such ids, as vLLM's mistral
// parser gives, so that a client can send a call back in the conversation.
std::string mistral_call_id() {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlnum) - 2);
  std::string id(9, '\0');
  for (char& c : id) c = kAlnum[pick(rng)];
  return id;
}

bool call_from_json(const OJson& j, ParsedToolCall& out) {
  return j.is_object() && parse_tool_call_body(j.dump(), out);
}

// --- a Python literal reader for pythonic calls: str, int, float, True/False/None (and JSON's
// true/false/null, which models also write), lists, tuples and dicts ---
class PyReader {
 public:
  explicit PyReader(std::string_view s) : s_(s) {}

  bool calls(std::vector<ParsedToolCall>& out) {
    space();
    if (!eat('[')) return false;
    space();
    if (eat(']')) return false;  // no call
    do {
      ParsedToolCall call;
      if (!one_call(call)) return false;
      out.push_back(std::move(call));
      space();
    } while (eat(','));
    if (!eat(']')) return false;
    space();
    return pos_ == s_.size();
  }

 private:
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  std::string ident() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                                (pos_ > start && (s_[pos_] == '.' || s_[pos_] == '-'))))
      ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  bool one_call(ParsedToolCall& call) {
    space();
    call.name = ident();
    if (call.name.empty() || std::isdigit(static_cast<unsigned char>(call.name[0]))) return false;
    space();
    if (!eat('(')) return false;
    OJson args = OJson::object();
    space();
    if (!eat(')')) {
      do {
        space();
        const std::string key = ident();
        if (key.empty()) return false;
        space();
        if (!eat('=')) return false;
        OJson v;
        if (!value(v, 0)) return false;
        args[key] = std::move(v);
        space();
      } while (eat(','));
      if (!eat(')')) return false;
    }
    call.arguments = args.dump(-1, ' ', false, OJson::error_handler_t::replace);
    call.id = random_id("chatcmpl-tool-");
    return true;
  }

  bool value(OJson& v, int depth) {
    if (depth > kMaxJsonDepth) return false;
    space();
    if (pos_ >= s_.size()) return false;
    const char c = s_[pos_];
    if (c == '"' || c == '\'') return string(v);
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++pos_;
      v = OJson::array();
      space();
      while (!eat(close)) {
        OJson item;
        if (!value(item, depth + 1)) return false;
        v.push_back(std::move(item));
        space();
        if (!eat(',')) {
          space();
          if (!eat(close)) return false;
          break;
        }
        space();
      }
      return true;
    }
    if (c == '{') {
      ++pos_;
      v = OJson::object();
      space();
      while (!eat('}')) {
        OJson key;
        if (!string(key)) return false;
        space();
        if (!eat(':')) return false;
        OJson item;
        if (!value(item, depth + 1)) return false;
        v[key.get<std::string>()] = std::move(item);
        space();
        if (!eat(',')) {
          space();
          if (!eat('}')) return false;
          break;
        }
        space();
      }
      return true;
    }
    const std::string word = ident();
    if (word == "True" || word == "true") return v = true, true;
    if (word == "False" || word == "false") return v = false, true;
    if (word == "None" || word == "null") return v = nullptr, true;
    if (!word.empty() && !std::isdigit(static_cast<unsigned char>(word[0]))) return false;
    pos_ -= word.size();
    return number(v);
  }

  bool number(OJson& v) {
    const size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                                s_[pos_] == 'e' || s_[pos_] == 'E' ||
                                ((s_[pos_] == '-' || s_[pos_] == '+') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))))
      ++pos_;
    std::string text(s_.substr(start, pos_ - start));
    if (!text.empty() && text[0] == '+') text.erase(0, 1);
    std::string error;
    v = parse_json_bounded(text, 1, error);
    return !v.is_discarded() && v.is_number();
  }

  bool string(OJson& v) {
    const char q = s_[pos_];
    if (q != '"' && q != '\'') return false;
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      char c = s_[pos_++];
      if (c == '\\' && pos_ < s_.size()) {
        const char e = s_[pos_++];
        uint32_t cp = 0;
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case '0': c = '\0'; break;
          case 'u':
          case 'x':
            if (!hex(e == 'u' ? 4 : 2, cp)) return false;
            if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {  // a JSON surrogate pair
              uint32_t lo = 0;
              pos_ += 2;
              if (!hex(4, lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            append_utf8(out, cp);
            continue;
          default: c = e;  // \\ \' \" / and the rest as written
        }
      }
      out += c;
    }
    if (!eat(q)) return false;
    v = out;
    return true;
  }

  bool hex(int n, uint32_t& v) {
    v = 0;
    for (int i = 0; i < n; ++i, ++pos_) {
      if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_]))) return false;
      const char h = s_[pos_];
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return true;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<ToolCallFormat> tool_call_format_named(const std::string& name) {
  if (name == "hermes" || name == "qwen3" || name == "qwen2_5") return ToolCallFormat::kHermes;
  if (name == "llama3_json" || name == "llama4_json") return ToolCallFormat::kLlama3Json;
  if (name == "mistral") return ToolCallFormat::kMistral;
  if (name == "pythonic" || name == "llama4_pythonic") return ToolCallFormat::kPythonic;
  return std::nullopt;
}

ToolCallFormat resolve_tool_call_format(const std::string& option, const Tokenizer* tok) {
  if (auto f = tool_call_format_named(option)) return *f;
  auto has = [tok](const char* t) { return tok && tok->token_to_id(t).has_value(); };
  if (has("<tool_call>")) return ToolCallFormat::kHermes;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (has("<|python_tag|>")) return ToolCallFormat::kLlama3Json;
  if (has("<start_of_turn>")) return ToolCallFormat::kPythonic;  // Gemma 3
  return ToolCallFormat::kHermes;
}

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kPythonic: return "pythonic";
  }
  return "hermes";
}

bool parse_llama3_json_calls(std::string_view text, std::vector<ParsedToolCall>& out) {
  std::string_view s = trim(text);
  constexpr std::string_view kPythonTag = "<|python_tag|>";
  if (s.substr(0, kPythonTag.size()) == kPythonTag) s = trim(s.substr(kPythonTag.size()));
  while (!s.empty()) {
    if (s[0] != '{') return false;
    const size_t end = json_end(s);
    if (end == std::string_view::npos) return false;
    ParsedToolCall call;
    if (!parse_tool_call_body(s.substr(0, end), call)) return false;
    out.push_back(std::move(call));
    s = trim(s.substr(end));
    if (!s.empty() && s[0] == ';') s = trim(s.substr(1));
  }
  return !out.empty();
}

bool parse_mistral_calls(std::string_view text, std::vector<ParsedToolCall>& out) {
  std::string_view s = trim(text);
  constexpr std::string_view kTag = "[TOOL_CALLS]";
  if (s.substr(0, kTag.size()) == kTag) s = trim(s.substr(kTag.size()));
  std::string error;
  const OJson j = parse_json_bounded(s, kMaxJsonDepth, error);
  if (j.is_discarded()) return false;
  const OJson list = j.is_array() ? j : OJson::array({j});
  for (const OJson& c : list) {
    ParsedToolCall call;
    if (!call_from_json(c, call)) return false;
    call.id = mistral_call_id();
    out.push_back(std::move(call));
  }
  return !out.empty();
}

bool parse_pythonic_calls(std::string_view text, std::vector<ParsedToolCall>& out) {
  std::string_view s = trim(text);
  // Gemma 3 often fences its calls: ```tool_code\n[...]\n``` (or ```python / ```).
  if (s.substr(0, 3) == "```") {
    const size_t nl = s.find('\n');
    if (nl == std::string_view::npos || s.size() < 6 || s.substr(s.size() - 3) != "```") return false;
    s = trim(s.substr(nl + 1, s.size() - 3 - nl - 1));
  }
  std::vector<ParsedToolCall> calls;
  if (!PyReader(s).calls(calls)) return false;
  for (auto& c : calls) out.push_back(std::move(c));
  return true;
}

}  // namespace pagoda::server
