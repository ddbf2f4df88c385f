#include "tokenizer/post_processor.h"

#include "core/error.h"

namespace pagoda {

namespace {

using tokjson::Json;
using tokjson::Where;

// A RobertaProcessing / BertProcessing ["token", id] pair: the id.
int32_t pair_id(const Json& j, const char* key, const Where& where) {
  const Json* v = tokjson::find(j, key, where);
  if (v == nullptr || !v->is_array() || v->size() != 2 || !(*v)[0].is_string()) {
    tokjson::fail(where.at(key), "expected [\"token\", id]");
  }
  return static_cast<int32_t>(tokjson::as_index((*v)[1], (1 << 24) - 1, where.at(key)));
}

}  // namespace

PostProcessor PostProcessor::from_json(const Json* j, const Where& where) {
  PostProcessor p;
  if (j != nullptr && !j->is_null()) p.parse(*j, where, 0);
  return p;
}

void PostProcessor::parse(const Json& j, const Where& where, int depth) {
  if (depth > 16) tokjson::fail(where, "post_processor Sequence nested too deeply");
  const std::string& type = tokjson::get_string(j, "type", where);
  if (type == "Sequence") {
    const Json* list = tokjson::find(j, "processors", where);
    const Where lw = where.at("processors");
    if (list == nullptr) tokjson::fail(lw, "missing");
    tokjson::require_array(*list, lw);
    for (size_t i = 0; i < list->size(); ++i) parse((*list)[i], lw.at(i), depth + 1);
  } else if (type == "ByteLevel") {
    // Only trims offsets.
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    Template t;
    t.parts = {{pair_id(j, "cls", where)}, {}, {pair_id(j, "sep", where)}};
    t.is_text = {false, true, false};
    templates_.push_back(std::move(t));
  } else if (type == "TemplateProcessing") {
    const Json* single = tokjson::find(j, "single", where);
    const Json* specials = tokjson::find(j, "special_tokens", where);
    const Where sw = where.at("single");
    if (single == nullptr) tokjson::fail(sw, "missing");
    tokjson::require_array(*single, sw);
    if (specials != nullptr) tokjson::require_object(*specials, where.at("special_tokens"));
    Template t;
    for (size_t i = 0; i < single->size(); ++i) {
      const Json& piece = (*single)[i];
      const Where pw = sw.at(i);
      if (const Json* seq = tokjson::find(piece, "Sequence", pw)) {
        if (tokjson::get_string(*seq, "id", pw.at("Sequence")) != "A") {
          tokjson::fail(pw.at("Sequence").at("id"), "the single template can only use sequence A");
        }
        t.parts.emplace_back();
        t.is_text.push_back(true);
      } else if (const Json* sp = tokjson::find(piece, "SpecialToken", pw)) {
        const std::string& name = tokjson::get_string(*sp, "id", pw.at("SpecialToken"));
        const Where nw = where.at("special_tokens").at(name);
        const Json* entry =
            specials == nullptr ? nullptr : tokjson::find(*specials, name.c_str(), nw);
        if (entry == nullptr) tokjson::fail(nw, "missing: the template uses it");
        const Json* ids = tokjson::find(*entry, "ids", nw);
        if (ids == nullptr) tokjson::fail(nw.at("ids"), "missing");
        tokjson::require_array(*ids, nw.at("ids"));
        std::vector<int32_t> part;
        for (size_t k = 0; k < ids->size(); ++k) {
          part.push_back(static_cast<int32_t>(
              tokjson::as_index((*ids)[k], (1 << 24) - 1, nw.at("ids").at(k))));
        }
        t.parts.push_back(std::move(part));
        t.is_text.push_back(false);
      } else {
        tokjson::fail(pw, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    templates_.push_back(std::move(t));
  } else if (unsupported_.empty()) {
    unsupported_ = where.str() + ": post_processor type '" + type +
                   "' is not supported (supported: TemplateProcessing, RobertaProcessing, "
                   "BertProcessing, ByteLevel, Sequence, null); encode without special tokens";
  }
}

std::vector<int32_t> PostProcessor::apply(const std::vector<int32_t>& ids) const {
  if (!unsupported_.empty()) throw Error(unsupported_);
  std::vector<int32_t> cur = ids;
  for (const Template& t : templates_) {
    std::vector<int32_t> next;
    for (size_t i = 0; i < t.parts.size(); ++i) {
      const std::vector<int32_t>& part = t.is_text[i] ? cur : t.parts[i];
      next.insert(next.end(), part.begin(), part.end());
    }
    cur = std::move(next);
  }
  return cur;
}

}  // namespace pagoda
