// libFuzzer target: parse_model_config on arbitrary config.json text (with and without a
// generation config) must either succeed or throw pagoda::Error, with no UB in the size math.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/model_config.h"
#include "model/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Split at the first NUL: before it config.json, after it generation_config.json.
  const size_t nul = text.find('\0');
  const std::string config = text.substr(0, nul);
  const std::string generation = nul == std::string::npos ? "" : text.substr(nul + 1);
  try {
    const pagoda::ModelConfig c = pagoda::parse_model_config(config, generation);
    volatile int64_t sink = c.kv_bytes_per_token(pagoda::DType::F32) +
                            c.state_bytes_per_sequence() + c.conv_dim() + c.rotary_dim;
    (void)sink;
  } catch (const pagoda::Error&) {
  }
  return 0;
}
