#include "bench/serve_vocab.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::bench {
namespace {

std::optional<int64_t> int_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

class LocalVocabulary final : public PromptVocabulary {
 public:
  LocalVocabulary(std::unique_ptr<Tokenizer> tok, std::string dir) : tok_(std::move(tok)), dir_(std::move(dir)) {
    usable_.resize(static_cast<size_t>(tok_->vocab_size()));
    for (int32_t id = 0; id < tok_->vocab_size(); ++id) {
      bool known = true;
      try {
        tok_->token_bytes(id);
      } catch (const Error&) {
        known = false;  // a hole in the id range
      }
      usable_[static_cast<size_t>(id)] = known && !tok_->is_special(id);
    }
  }
  int32_t size() const override { return tok_->vocab_size(); }
  bool usable(int32_t id) const override { return usable_[static_cast<size_t>(id)]; }
  bool has_text() const override { return true; }
  std::string decode(const std::vector<int32_t>& ids) override { return tok_->decode(ids); }
  std::vector<int32_t> encode(const std::string& text) override { return tok_->encode(text); }
  std::string describe() const override {
    return "tokenizer.json of " + dir_ + ", " + std::to_string(tok_->vocab_size()) + " ids";
  }

 private:
  std::unique_ptr<Tokenizer> tok_;
  std::string dir_;
  std::vector<bool> usable_;
};

class ServerVocabulary final : public PromptVocabulary {
 public:
  ServerVocabulary(const ServerUrl& url, const std::string& api_key, std::string model, int64_t vocab_size)
      : cli_(url.scheme_host_port), prefix_(url.path_prefix), model_(std::move(model)),
        size_(static_cast<int32_t>(std::min<int64_t>(vocab_size, INT32_MAX))) {
    cli_.set_connection_timeout(10);
    cli_.set_read_timeout(120);
    cli_.set_keep_alive(true);
    cli_.set_tcp_nodelay(true);
    if (!api_key.empty()) headers_.emplace("Authorization", "Bearer " + api_key);
    has_text_ = probe_text();
  }
  int32_t size() const override { return size_; }
  bool usable(int32_t) const override { return true; }  // which ids are special, the server does not say
  bool has_text() const override { return has_text_; }

  std::string decode(const std::vector<int32_t>& ids) override {
    const auto j = post("/detokenize", {{"model", model_}, {"tokens", ids}});
    check(j && j->contains("prompt") && (*j)["prompt"].is_string(),
          "bench serve: POST /detokenize failed while making the prompts: " + last_error_);
    return (*j)["prompt"].get<std::string>();
  }
  std::vector<int32_t> encode(const std::string& text) override {
    const auto j = post("/tokenize", {{"model", model_}, {"prompt", text}, {"add_special_tokens", false}});
    check(j && j->contains("tokens") && (*j)["tokens"].is_array(),
          "bench serve: POST /tokenize failed while making the prompts: " + last_error_);
    std::vector<int32_t> ids;
    for (const auto& t : (*j)["tokens"]) {
      check(t.is_number_integer(), "bench serve: POST /tokenize answered a token that is not an integer");
      ids.push_back(t.get<int32_t>());
    }
    return ids;
  }
  std::string describe() const override {
    return "the server's vocabulary, " + std::to_string(size_) + " ids" +
           (has_text_ ? ", text through its /tokenize and /detokenize" : ", sent as token ids");
  }

 private:
  // The JSON answer of POST `path`, or nullopt (last_error_ says why).
  std::optional<nlohmann::json> post(const std::string& path, const nlohmann::json& body) {
    auto r = cli_.Post(prefix_ + path, headers_, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                       "application/json");
    if (!r) {
      last_error_ = "no answer from the server";
      return std::nullopt;
    }
    if (r->status != 200) {
      last_error_ = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 500);
      return std::nullopt;
    }
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (!j.is_object()) {
      last_error_ = "not a JSON object: " + r->body.substr(0, 200);
      return std::nullopt;
    }
    return j;
  }
  bool detokenizes(int32_t id) {
    const auto j = post("/detokenize", {{"model", model_}, {"tokens", {id}}});
    return j && j->contains("prompt") && (*j)["prompt"].is_string();
  }

  // Whether both routes answer; the ids the server cannot detokenize (a model's vocabulary is often
  // padded past its tokenizer's) are cut off by bisection: the tokenizer's ids run from 0 up.
  bool probe_text() {
    const auto t = post("/tokenize", {{"model", model_}, {"prompt", "hello"}, {"add_special_tokens", false}});
    if (!t || !t->contains("tokens") || !detokenizes(0)) return false;
    if (!detokenizes(size_ - 1)) {
      int32_t lo = 0, hi = size_ - 1;  // lo decodes, hi does not
      while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        (detokenizes(mid) ? lo : hi) = mid;
      }
      size_ = lo + 1;
    }
    return true;
  }

  httplib::Client cli_;
  httplib::Headers headers_;
  std::string prefix_, model_;
  int32_t size_;
  bool has_text_ = false;
  std::string last_error_;
};

}  // namespace

std::optional<ServedModel> served_model(const ServerUrl& url, const std::string& api_key, const std::string& model) {
  const auto body = http_get(url, "/v1/models", api_key);
  if (!body) return std::nullopt;
  const auto j = nlohmann::json::parse(*body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) return std::nullopt;
  const nlohmann::json* entry = &j["data"].front();
  for (const auto& m : j["data"])
    if (m.is_object() && m.contains("id") && m["id"] == model) entry = &m;
  if (!entry->is_object() || !entry->contains("id") || !(*entry)["id"].is_string()) return std::nullopt;
  ServedModel out;
  out.id = (*entry)["id"].get<std::string>();
  out.max_model_len = int_field(*entry, "max_model_len");
  out.vocab_size = int_field(*entry, "vocab_size");
  if (!out.vocab_size && entry->contains("meta")) out.vocab_size = int_field((*entry)["meta"], "n_vocab");  // llama.cpp
  return out;
}

std::unique_ptr<PromptVocabulary> local_vocabulary(const std::string& dir) {
  return std::make_unique<LocalVocabulary>(Tokenizer::load_dir(dir), dir);
}

std::unique_ptr<PromptVocabulary> server_vocabulary(const ServerUrl& url, const std::string& api_key,
                                                   const std::string& model, int64_t vocab_size) {
  check(vocab_size > 1, "bench serve: the server's vocabulary size must be > 1 (got " + std::to_string(vocab_size) + ")");
  return std::make_unique<ServerVocabulary>(url, api_key, model, vocab_size);
}

}  // namespace pagoda::bench
