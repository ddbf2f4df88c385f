// POST /v1/embeddings (OpenAI's Embeddings API, as vLLM serves it for pooling models): `input` a
// string, a list of strings, a list of token ids or a list of lists of token ids; text goes through
// the tokenizer and its post-processor (Qwen3-Embedding appends <|endoftext|>), token ids are used
// as given. Each input runs through the engine as an embedding request (last-token pooling of the
// final-norm hidden state); `dimensions` keeps the first d values (Matryoshka), then the vector is
// L2-normalised; `encoding_format` float or base64 (little-endian float32 bytes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "server/api_error.h"
#include "server/chat_output_parser.h"
#include "server/openai_request.h"
#include "server/generation.h"
#include "server/openai_response.h"
#include "server/pooling_runner.h"
#include "server/routes.h"

namespace pagoda::server {
namespace {

// OpenAI's limit on inputs per request.
constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingInput {
  std::optional<std::string> text;
  std::vector<int32_t> token_ids;
};

struct EmbeddingRequest {
  std::string model;
  std::vector<EmbeddingInput> inputs;
  bool base64 = false;
  int64_t dimensions = 0;            // 0 = the whole hidden state
  int64_t truncate_prompt_tokens = 0;  // vLLM: keep the last k tokens; -1 = max_model_len; 0 = off
  bool add_special_tokens = true;    // vLLM: the tokenizer's post-processor on text inputs
};

[[noreturn]] void bad_input() {
  throw bad_request("'input' must be a string, an array of strings, an array of token ids or an array of "
                    "arrays of token ids", "input");
}

int64_t integer(const Json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)))
    throw bad_request("'" + key + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                      key);
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    throw bad_request("'" + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          std::to_string(i), key);
  return i;
}

std::vector<int32_t> token_ids(const Json& v) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const Json& t : v) {
    if (!t.is_number_integer()) bad_input();
    ids.push_back(static_cast<int32_t>(integer(t, "input", 0, std::numeric_limits<int32_t>::max())));
  }
  return ids;
}

void read_inputs(const Json& in, EmbeddingRequest& r) {
  if (in.is_string()) {
    r.inputs.push_back({in.get<std::string>(), {}});
    return;
  }
  if (!in.is_array()) bad_input();
  if (in.empty()) throw bad_request("'input' cannot be an empty array", "input");
  if (in.front().is_number()) {  // one prompt of token ids
    r.inputs.push_back({std::nullopt, token_ids(in)});
    return;
  }
  if (in.size() > kMaxEmbeddingInputs)
    throw bad_request("'input' has " + std::to_string(in.size()) + " items; at most " +
                          std::to_string(kMaxEmbeddingInputs) + " are allowed", "input");
  for (const Json& item : in) {
    if (item.is_string()) r.inputs.push_back({item.get<std::string>(), {}});
    else if (item.is_array()) r.inputs.push_back({std::nullopt, token_ids(item)});
    else bad_input();
  }
}

EmbeddingRequest parse_embedding_request(const Json& j) {
  EmbeddingRequest r;
  auto present = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (present("model")) {
    if (!j["model"].is_string()) throw bad_request("'model' must be a string", "model");
    r.model = j["model"].get<std::string>();
  }
  if (!present("input")) throw bad_request("'input' is required", "input");
  read_inputs(j["input"], r);
  if (present("encoding_format")) {
    const Json& f = j["encoding_format"];
    if (f != "float" && f != "base64")
      throw bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    r.base64 = f == "base64";
  }
  if (present("dimensions")) {
    const Json& d = j["dimensions"];
    if (!d.is_number_integer()) throw bad_request("'dimensions' must be an integer", "dimensions");
    if (d.is_number_unsigned() ? d.get<uint64_t>() < 1 : d.get<int64_t>() < 1)
      throw bad_request("Dimensions must be greater than 0", "dimensions");  // vLLM's words
    r.dimensions = integer(d, "dimensions", 1, std::numeric_limits<int32_t>::max());
  }
  if (present("truncate_prompt_tokens"))
    r.truncate_prompt_tokens = integer(j["truncate_prompt_tokens"], "truncate_prompt_tokens", -1,
                                       std::numeric_limits<int32_t>::max());
  if (present("add_special_tokens")) {
    if (!j["add_special_tokens"].is_boolean())
      throw bad_request("'add_special_tokens' must be a boolean", "add_special_tokens");
    r.add_special_tokens = j["add_special_tokens"].get<bool>();
  }
  if (present("user") && !j["user"].is_string()) throw bad_request("'user' must be a string", "user");
  return r;
}

// vLLM's checks of `dimensions` (PoolingParams.verify), except that a model that does not say is
// accepted: Qwen3-Embedding is Matryoshka-trained but its config.json carries no is_matryoshka.
void check_dimensions(const ServerContext& ctx, const PoolingRunner& pr, int64_t dims) {
  if (dims == 0) return;
  const PoolingConfig& pc = pr.pooling;
  const std::string name = "Model \"" + ctx.model_name() + "\"";
  if (pc.is_matryoshka == false && pc.matryoshka_dimensions.empty())
    throw bad_request(name + " does not support matryoshka representation, changing output dimensions will "
                      "lead to poor results.", "dimensions");
  if (!pc.matryoshka_dimensions.empty() &&
      std::find(pc.matryoshka_dimensions.begin(), pc.matryoshka_dimensions.end(), dims) ==
          pc.matryoshka_dimensions.end()) {
    std::string list;
    for (int64_t d : pc.matryoshka_dimensions) list += (list.empty() ? "" : ", ") + std::to_string(d);
    throw bad_request(name + " only supports [" + list + "] matryoshka dimensions, use other output dimensions "
                      "will lead to poor results.", "dimensions");
  }
  if (dims > pr.hidden_size)
    throw bad_request("dimensions " + std::to_string(dims) + " is larger than the model's embedding size " +
                          std::to_string(pr.hidden_size), "dimensions");
}

std::vector<int32_t> input_ids(const ServerContext& ctx, const EmbeddingRequest& r,
                               const EmbeddingInput& in) {
  // Text through the tokenizer's post_processor, as tokenizer(text) in transformers and
  // sentence-transformers (Qwen3-Embedding appends <|endoftext|> so); ids as given, as in vLLM.
  std::vector<int32_t> ids;
  if (!in.text) {
    ids = in.token_ids;
  } else if (r.add_special_tokens && ctx.engine.tokenizer()) {
    check_tokenize_bytes(ctx, in.text->size(), "input");
    ids = ctx.engine.tokenizer()->encode_with_special_tokens(*in.text);
  } else {
    ids = encode_text(ctx, *in.text, "input");
  }
  const int64_t max_len = ctx.engine.max_model_len();
  const int64_t keep = r.truncate_prompt_tokens < 0 ? max_len : r.truncate_prompt_tokens;
  if (keep > 0 && static_cast<int64_t>(ids.size()) > keep) ids.erase(ids.begin(), ids.end() - keep);
  if (ids.empty()) throw bad_request("an input is empty", "input");
  if (static_cast<int64_t>(ids.size()) > max_len)
    throw bad_request("This model's maximum context length is " + std::to_string(max_len) +
                          " tokens. However, you requested " + std::to_string(ids.size()) +
                          " tokens in the input for embedding generation. Please reduce the length of the input.",
                      "input", "context_length_exceeded");
  const int32_t vocab = static_cast<int32_t>(ctx.engine.model_config().vocab_size);
  for (int32_t id : ids)
    if (id >= vocab)
      throw bad_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(vocab) + ")", "input");
  return ids;
}

std::string base64_of_floats(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {  // little-endian float32, whatever the host
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<size_t>(b)] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k)
      chunk = (chunk << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

}  // namespace

HttpReply handle_embeddings(ServerContext& ctx, const HttpRequest& req) {
  if (!ctx.pooling) throw bad_request("The model does not support Embeddings API");  // vLLM's words
  const PoolingRunner& pr = *ctx.pooling;
  const Json body = parse_json_body(req.body);
  const EmbeddingRequest r = parse_embedding_request(body);
  // Embeddings run the base model alone: a LoRA adapter's name would be answered without it.
  if (check_model_name(ctx, r.model) >= 0)
    throw bad_request("LoRA adapters are not applied to embeddings yet; name the base model", "model");
  check_dimensions(ctx, pr, r.dimensions);
  std::vector<std::vector<int32_t>> prompts;
  int64_t prompt_tokens = 0;
  for (const EmbeddingInput& in : r.inputs) {
    prompts.push_back(input_ids(ctx, r, in));
    prompt_tokens += static_cast<int64_t>(prompts.back().size());
  }
  const size_t n = prompts.size();
  std::string why;
  auto channel = ctx.engine.submit_embedding(std::move(prompts), why, fairness_client(ctx, req, body));
  if (!channel) throw unavailable(why);

  auto pooled = std::make_shared<std::vector<std::vector<float>>>(n);
  auto why_not = std::make_shared<std::vector<std::string>>(n);  // why an input got no embedding
  const std::string id = random_id("embd-");
  const int64_t created = unix_now();
  const std::string model = r.model.empty() ? ctx.model_name() : r.model;
  return whole_reply(
      channel,
      [pooled, why_not](ChoiceOutput& o) {
        const auto i = static_cast<size_t>(o.choice);
        if (!o.out.embedding.empty()) (*pooled)[i] = std::move(o.out.embedding);
        if (o.out.finished)
          (*why_not)[i] = o.out.finish_detail.empty() ? finish_reason_text(o.out.finish_reason) : o.out.finish_detail;
      },
      [=, normalize = pr.pooling.normalize, dims = r.dimensions, base64 = r.base64] {
        Json data = Json::array();
        for (size_t i = 0; i < n; ++i) {
          const std::vector<float>& h = (*pooled)[i];
          if (h.empty())  // the engine could not run it (the KV cache cannot hold it) or it was aborted
            throw ApiError(500, "input " + std::to_string(i) + " was not embedded: " + (*why_not)[i], "server_error");
          const std::vector<float> e = embedding_head(h, dims, normalize);
          Json values = Json::array();
          if (!base64)
            for (float v : e) values.push_back(v);
          data.push_back({{"index", i}, {"object", "embedding"},
                          {"embedding", base64 ? Json(base64_of_floats(e)) : std::move(values)}});
        }
        return Json{{"id", id},
                    {"object", "list"},
                    {"created", created},
                    {"model", model},
                    {"data", std::move(data)},
                    {"usage", {{"prompt_tokens", prompt_tokens},
                               {"total_tokens", prompt_tokens},
                               {"completion_tokens", 0},
                               {"prompt_tokens_details", nullptr}}}};
      });
}

}  // namespace pagoda::server
