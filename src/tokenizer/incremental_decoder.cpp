#include "tokenizer/tokenizer.h"

namespace pagoda {

// The tokenizer's decoder does the work (tokenizer/decoder.h), so that streaming and decode()
// share one code path.
std::string IncrementalDecoder::push(int32_t id) { return stream_->push(id); }

std::string IncrementalDecoder::flush() { return stream_->flush(); }

}  // namespace pagoda
