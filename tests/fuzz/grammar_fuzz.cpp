// libFuzzer target: the input as a GBNF grammar, a regex and a JSON schema (and, split on
// newlines, a choice list) must compile or fail with pagoda::Error; what compiles must run a
// few mask-and-advance steps over a small byte vocabulary without fault. CI runs it under
// -rss_limit_mb and -timeout per input: the parser budget must hold whatever the grammar.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "structured/compile.h"
#include "structured/matcher.h"

namespace {

std::shared_ptr<const pagoda::structured::TokenTrie> small_trie() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  v.emplace_back();  // EOS, id 256
  for (const char* t : {"{\"", "\":", "\"}", "ab", "abc", "\xC3\xA9", "12", "true", "null", "<tool_call>"}) v.emplace_back(t);
  return std::make_shared<pagoda::structured::TokenTrie>(v);
}

void run(const pagoda::structured::Constraint& c, const std::string& data) {
  using namespace pagoda::structured;
  static const auto trie = small_trie();
  try {
    auto rt = std::make_shared<GrammarRuntime>(compile_constraint(c), trie, std::vector<int32_t>{256});
    rt->probe();  // as the server compiles: ambiguity past the parser budget is refused here
    Matcher m(rt);
    TokenMask mask;
    for (size_t i = 0; i < 16; ++i) {
      m.fill_mask(mask);
      // Take the first allowed token at or after a position the input picks.
      const size_t start = data.empty() ? 0 : static_cast<uint8_t>(data[i % data.size()]);
      int32_t pick = -1;
      for (size_t k = 0; k < static_cast<size_t>(rt->vocab_size()) && pick < 0; ++k) {
        const auto id = static_cast<int32_t>((start + k) % static_cast<size_t>(rt->vocab_size()));
        if (mask_allows(mask, id)) pick = id;
      }
      if (pick < 0 || !m.accept(pick) || m.finished()) break;
    }
  } catch (const pagoda::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pagoda::structured::ConstraintKind;
  const std::string text(reinterpret_cast<const char*>(data), size);
  run({ConstraintKind::kGrammar, text, {}, {}, true}, text);
  run({ConstraintKind::kRegex, text, {}, {}, true}, text);
  run({ConstraintKind::kJsonSchema, text, {}, {}, true}, text);
  std::vector<std::string> choices;
  for (size_t a = 0, b; a <= text.size() && choices.size() < 64; a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    choices.push_back(text.substr(a, b - a));
  }
  run({ConstraintKind::kChoice, "", choices, {}, true}, text);
  run({ConstraintKind::kToolCalls, "", {"f"}, {text}, false}, text);
  return 0;
}
