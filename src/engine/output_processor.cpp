#include "engine/output_processor.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace pagoda {

struct OutputProcessor::RequestState {
  StopStrings stop;
  bool include_stop_str = false;
  size_t max_stop_len = 0;
  std::optional<IncrementalDecoder> decoder;  // with a tokenizer
  std::string pending;  // decoded, not yet sent (it may be the start of a stop string)
  // The last max_stop_len - 1 bytes sent, where a stop string may begin when
  // include_stop_str_in_output sends text without holding it back.
  std::string sent_tail;
};

OutputProcessor::OutputProcessor(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
OutputProcessor::~OutputProcessor() = default;

void OutputProcessor::validate(const SamplingParams& params) const {
  check(params.stop.empty() || tokenizer_,
        "stop strings need a tokenizer, and this model directory has no tokenizer.json");
}

void OutputProcessor::add_request(int64_t id, const SamplingParams& params) {
  validate(params);
  auto rs = std::make_unique<RequestState>();
  rs->stop = params.stop;
  rs->include_stop_str = params.include_stop_str_in_output;
  for (const std::string& s : rs->stop) rs->max_stop_len = std::max(rs->max_stop_len, s.size());
  if (tokenizer_) rs->decoder.emplace(*tokenizer_, params.skip_special_tokens);
  requests_[id] = std::move(rs);
}

void OutputProcessor::remove_request(int64_t id) { requests_.erase(id); }

namespace {

// The earliest stop string in `text` at or after `from`: (position, index in stops), or npos.
std::pair<size_t, size_t> find_stop(const std::string& text, const StopStrings& stops) {
  size_t at = std::string::npos, which = 0;
  for (size_t i = 0; i < stops.size(); ++i) {
    const size_t p = text.find(stops[i]);
    if (p != std::string::npos && (at == std::string::npos || p < at)) {
      at = p;
      which = i;
    }
  }
  return {at, which};
}

// Length of the longest tail of `text` that is a proper prefix of some stop string.
size_t stop_prefix_tail(const std::string& text, const StopStrings& stops) {
  size_t hold = 0;
  for (const std::string& s : stops)
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

}  // namespace

void OutputProcessor::emit_text(RequestState& rs, RequestOutput& out) {
  if (!rs.decoder) return;
  // A model's vocabulary may be larger than its tokenizer's (padding rows): such ids have no text,
  // and decode to nothing, as Hugging Face's decode drops them.
  for (int32_t t : out.new_token_ids)
    if (t < tokenizer_->vocab_size()) rs.pending += rs.decoder->push(t);
  if (!rs.stop.empty()) {
    // With include_stop_str_in_output a stop string may begin in text already sent.
    const std::string text = rs.sent_tail + rs.pending;
    const auto [at, which] = find_stop(text, rs.stop);
    if (at != std::string::npos) {
      const size_t end = rs.include_stop_str ? at + rs.stop[which].size() : at;
      out.stop_string = rs.stop[which];
      out.new_text = rs.pending.substr(0, end - rs.sent_tail.size());
      rs.pending.clear();
      return;
    }
  }
  if (out.finished) {
    rs.pending += rs.decoder->flush();
    out.new_text = std::move(rs.pending);
    rs.pending.clear();
    return;
  }
  const size_t hold = rs.include_stop_str ? 0 : stop_prefix_tail(rs.pending, rs.stop);
  out.new_text = rs.pending.substr(0, rs.pending.size() - hold);
  rs.pending.erase(0, rs.pending.size() - hold);
  if (rs.include_stop_str && rs.max_stop_len > 1) {
    rs.sent_tail += out.new_text;
    if (rs.sent_tail.size() >= rs.max_stop_len) rs.sent_tail.erase(0, rs.sent_tail.size() - (rs.max_stop_len - 1));
  }
}

OutputProcessor::Result OutputProcessor::process(std::vector<EngineCoreOutput>& core_outputs) {
  Result r;
  for (EngineCoreOutput& c : core_outputs) {
    auto it = requests_.find(c.id);
    if (it == requests_.end()) continue;  // finished here already (stop string), or never tracked
    RequestOutput& o = r.outputs.emplace_back();
    o.id = c.id;
    o.new_token_ids = std::move(c.new_token_ids);
    o.samples = std::move(c.samples);
    o.finished = c.finished;
    o.finish_reason = c.finish_reason;
    o.stop_token = c.stop_token;
    o.finish_detail = std::move(c.finish_detail);
    o.num_prompt_tokens = c.num_prompt_tokens;
    o.num_output_tokens = c.num_output_tokens;
    o.num_cached_tokens = c.num_cached_tokens;
    o.embedding = std::move(c.embedding);
    emit_text(*it->second, o);
    if (!o.stop_string.empty() && !o.finished) {
      // A stop string finishes the request now; the core frees it when the driver aborts it.
      o.finished = true;
      o.finish_reason = FinishReason::Stop;
      r.reqs_to_abort.push_back(o.id);
    }
    if (o.finished) requests_.erase(it);
  }
  return r;
}

}  // namespace pagoda
