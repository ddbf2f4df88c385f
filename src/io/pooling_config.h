// How an embedding checkpoint turns hidden states into one vector, as vLLM decides it
// (vllm/transformers_utils/config.py get_pooling_config): a sentence-transformers `modules.json`
// with a Pooling module marks the directory as an embedding model (Qwen3-Embedding ships one,
// though its architecture is Qwen3ForCausalLM); the Pooling module's config.json names the mode,
// and a Normalize module asks for L2 normalisation. Matryoshka dimensions come from config.json
// (`is_matryoshka`, `matryoshka_dimensions`), as vLLM reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pagoda {

struct PoolingConfig {
  // The one pooling pagoda implements: the final-norm hidden state of the last token (Qwen3-Embedding,
  // sentence-transformers' pooling_mode_lasttoken, vLLM's LAST). Others are refused at load.
  enum class Type { Last };
  Type type = Type::Last;
  bool normalize = true;  // vLLM's default for embedding models without modules.json
  std::string source;     // where it came from, for the start-up log ("modules.json", "default")
  // config.json: is_matryoshka (absent = not said) and matryoshka_dimensions (the only sizes a
  // request's `dimensions` may take when given).
  std::optional<bool> is_matryoshka;
  std::vector<int64_t> matryoshka_dimensions;
};

// The sentence-transformers pooling of `dir`: nullopt when it has no modules.json, or one without a
// Pooling module (vLLM then does not treat it as an embedding model). Throws pagoda::Error, naming
// the file, for malformed files, a pooling mode other than last-token, several modes at once, or a
// module pagoda cannot apply (Dense projections and the like).
std::optional<PoolingConfig> load_sentence_transformers_pooling(const std::string& dir);

// What `--runner pooling` serves: the directory's own pooling when it has one, else vLLM's default
// for a causal LM converted to an embedding model (last token, normalised). Reads config.json's
// Matryoshka fields either way.
PoolingConfig load_pooling_config(const std::string& dir);

}  // namespace pagoda
