#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda {

std::string IncrementalDecoder::push(int32_t id) {
  std::string bytes = tok_.token_bytes(id);  // validates id even when it is skipped
  if (skip_special_ && tok_.is_special(id)) return {};
  if (started_) pending_.append(tok_.token_separator());
  started_ = true;
  pending_.append(bytes);
  // Maximal-subpart substitution decides each position from the bytes up to it plus at most the
  // next one, so emitting everything but a still-completable tail matches decode() of the whole.
  std::string out;
  const size_t done = utf8::drain_complete(pending_, out);
  pending_.erase(0, done);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  if (!pending_.empty()) out = utf8::to_valid_lossy(pending_);
  pending_.clear();
  started_ = false;
  return out;
}

}  // namespace pagoda
