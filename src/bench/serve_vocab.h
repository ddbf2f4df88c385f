// Where `pagoda bench serve` gets the vocabulary of its random prompts, so that they are the
// server's own tokens without a flag: --tokenizer DIR (tokenizer.json read here, as vLLM's
// --tokenizer), else the server itself: the vocabulary size GET /v1/models gives (pagoda's
// "vocab_size", llama.cpp's meta.n_vocab) and, where the server has them, POST /tokenize and
// /detokenize (pagoda's and vLLM's) to turn the random ids into text.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "bench/serve_dataset.h"
#include "bench/serve_http.h"

namespace pagoda::bench {

// What GET /v1/models says of the model benchmarked.
struct ServedModel {
  std::string id;
  std::optional<int64_t> max_model_len;
  std::optional<int64_t> vocab_size;
};

// The entry of GET /v1/models named `model`, else its first; nullopt when the server answers none.
std::optional<ServedModel> served_model(const ServerUrl& url, const std::string& api_key, const std::string& model);

// tokenizer.json of `dir`: its ids (special tokens left out) and its text, read locally.
std::unique_ptr<PromptVocabulary> local_vocabulary(const std::string& dir);

// The server's vocabulary of `vocab_size` ids. With working /tokenize and /detokenize the prompts
// become text; the ids the server cannot detokenize (a model's padding rows past the tokenizer's
// vocabulary) are found once and left out. Without them, the ids themselves.
std::unique_ptr<PromptVocabulary> server_vocabulary(const ServerUrl& url, const std::string& api_key,
                                                   const std::string& model, int64_t vocab_size);

}  // namespace pagoda::bench
