#include "tokenizer/post_processor.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/text_file.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

constexpr int kMaxSequenceDepth = 8;          // Sequence inside Sequence: real files nest one level
constexpr size_t kMaxTokenizerJsonBytes = size_t{512} << 20;

int32_t token_id(const json& v, const std::string& where) {
  check(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX,
        where + ": a token id must be a non-negative integer");
  return static_cast<int32_t>(v.get<int64_t>());
}

// BertProcessing / RobertaProcessing: "cls": ["[CLS]", 101], "sep": ["[SEP]", 102].
int32_t pair_id(const json& p, const char* key, const std::string& where) {
  const auto it = p.find(key);
  check(it != p.end() && it->is_array() && it->size() == 2, where + ": '" + key + "' must be [token, id]");
  return token_id((*it)[1], where + "." + key);
}

void apply_template(const json& p, const std::string& where, std::vector<int32_t>& prefix,
                    std::vector<int32_t>& suffix) {
  const auto single = p.find("single");
  check(single != p.end() && single->is_array(), where + ": TemplateProcessing needs a 'single' list");
  const auto specials = p.find("special_tokens");
  bool seen_a = false;
  for (const json& piece : *single) {
    check(piece.is_object() && piece.size() == 1, where + ": every template piece is {\"Sequence\"|\"SpecialToken\": ...}");
    if (piece.contains("Sequence")) {
      const json& seq = piece["Sequence"];
      check(seq.is_object() && seq.value("id", "") == "A",
            where + ": the single template may only use sequence $A");
      check(!seen_a, where + ": the single template uses $A twice");
      seen_a = true;
    } else if (piece.contains("SpecialToken")) {
      const json& st = piece["SpecialToken"];
      check(st.is_object() && st.contains("id") && st["id"].is_string(), where + ": SpecialToken needs an 'id'");
      const std::string name = st["id"].get<std::string>();
      check(specials != p.end() && specials->is_object() && specials->contains(name),
            where + ": special token '" + name + "' is not in special_tokens");
      const json& entry = (*specials)[name];
      const auto ids = entry.is_object() ? entry.find("ids") : entry.end();
      check(ids != entry.end() && ids->is_array() && ids->size() <= 64,
            where + ": special_tokens['" + name + "'].ids must be a short list");
      for (const json& id : *ids) (seen_a ? suffix : prefix).push_back(token_id(id, where + "." + name));
    } else {
      throw Error(where + ": unknown template piece " + piece.dump());
    }
  }
  check(seen_a, where + ": the single template has no $A");
}

void read_processor(const json& p, const std::string& where, int depth, std::vector<int32_t>& prefix,
                    std::vector<int32_t>& suffix) {
  if (p.is_null()) return;
  check(p.is_object() && p.contains("type") && p["type"].is_string(), where + " must be an object with a 'type'");
  const std::string type = p["type"].get<std::string>();
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") {
    // Processors of a Sequence apply in turn: the ones before wrap the sequence first.
    std::vector<int32_t> pre, suf;
    apply_template(p, where, pre, suf);
    prefix.insert(prefix.begin(), pre.begin(), pre.end());
    suffix.insert(suffix.end(), suf.begin(), suf.end());
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    prefix.insert(prefix.begin(), pair_id(p, "cls", where));
    suffix.push_back(pair_id(p, "sep", where));
    return;
  }
  if (type == "Sequence") {
    check(depth < kMaxSequenceDepth, where + ": Sequence nests too deeply");
    const auto list = p.find("processors");
    check(list != p.end() && list->is_array(), where + ": Sequence needs a 'processors' list");
    for (size_t i = 0; i < list->size(); ++i)
      read_processor((*list)[i], where + ".processors[" + std::to_string(i) + "]", depth + 1, prefix, suffix);
    return;
  }
  throw Error(where + ": post_processor type '" + type +
              "' is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
}

}  // namespace

PostProcessor PostProcessor::from_json(std::string_view tokenizer_json, const std::string& label) {
  const json root = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  check(!root.is_discarded() && root.is_object(), label + " is not a JSON object");
  PostProcessor pp;
  if (auto it = root.find("post_processor"); it != root.end())
    read_processor(*it, label + ": post_processor", 0, pp.prefix_, pp.suffix_);
  return pp;
}

PostProcessor PostProcessor::load_dir(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  if (!std::filesystem::exists(path)) return {};
  return from_json(read_text_file(path, kMaxTokenizerJsonBytes), path);
}

std::vector<int32_t> PostProcessor::apply(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> out;
  out.reserve(prefix_.size() + ids.size() + suffix_.size());
  out.insert(out.end(), prefix_.begin(), prefix_.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

}  // namespace pagoda
