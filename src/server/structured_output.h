// Structured-output requests: response_format, vLLM's structured_outputs and guided_* fields, and
// tool_choice required/named, read into a Constraint (400 naming the field for anything wrong),
// and compiled against the served vocabulary through a bounded cache keyed by the constraint.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "structured/compile.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::server {

using Json = nlohmann::ordered_json;

struct RequestedConstraint {
  structured::Constraint constraint;
  std::string param;  // the request field it came from (for errors)
};

// The constraint a completions/chat body asks for through response_format, structured_outputs or
// guided_*; nullopt when none. More than one is a 400.
std::optional<RequestedConstraint> read_constraint(const Json& body);
// The Responses API's text.format: {"type": "text" | "json_object" | "json_schema", name, schema,
// strict} (the schema beside the type, not nested as in response_format); nullopt for text.
std::optional<RequestedConstraint> read_text_format(const Json& format);
// tool_choice "required" or a named function over `tools` (the request's tools array): Qwen's
// <tool_call> syntax with each function's parameters schema; nullopt for auto/none.
std::optional<RequestedConstraint> read_tool_choice(const Json& body, const Json& tools);

// The compiled grammar for `c` bound to the tokenizer's vocabulary and the model's EOS ids;
// compile errors are a 400 naming `c.param`. Found in the cache, or compiled on this thread unless
// a DeferCompiles scope is alive on it (then CompileDeferred is thrown).
std::shared_ptr<structured::GrammarRuntime> compile_constraint_cached(const RequestedConstraint& c,
                                                                      const Tokenizer& tok,
                                                                      const std::vector<int32_t>& eos_ids);

// One grammar compile on the grammar pool, shared by every request waiting for the same
// constraint. A large grammar (an enum of 60,000 values) takes seconds: neither an HTTP worker
// nor the engine thread waits for it.
class GrammarCompile {
 public:
  // Runs `f` once the compile has finished: at once, on this thread, when it has; else on the
  // pool's thread (so `f` must be quick: post somewhere).
  void on_done(std::function<void()> f);
  bool done() const;

 private:
  friend struct GrammarCompiles;
  friend std::shared_ptr<structured::GrammarRuntime> compile_constraint_cached(const RequestedConstraint&,
                                                                               const Tokenizer&,
                                                                               const std::vector<int32_t>&);
  std::string key_;
  mutable std::mutex mu_;
  bool done_ = false;
  std::shared_ptr<structured::GrammarRuntime> runtime_;
  std::exception_ptr error_;  // what compiling threw (an Error is the request's 400)
  std::vector<std::function<void()>> waiters_;
};

// Thrown (not a std::exception: route handlers let it through) by compile_constraint_cached for a
// grammar not compiled yet while compiles are deferred: answer the request once `compile` is done,
// by running its route again.
struct CompileDeferred {
  std::shared_ptr<GrammarCompile> compile;
};

// While alive, compile_constraint_cached on this thread looks in `finished` first (compiles this
// request waited for: their grammar even if the cache dropped it meanwhile, or their error), then
// in the cache, and throws CompileDeferred instead of compiling.
class DeferCompiles {
 public:
  explicit DeferCompiles(const std::vector<std::shared_ptr<GrammarCompile>>& finished);
  ~DeferCompiles();
  DeferCompiles(const DeferCompiles&) = delete;
  DeferCompiles& operator=(const DeferCompiles&) = delete;
};

// Compiles that finish from now on call none of their waiters: the HTTP server is going away, and
// the waiters post to its I/O threads.
void drop_compile_waiters();

// The compiled-grammar cache's bound in bytes (`serve --max-grammar-cache-bytes`).
void set_grammar_cache_bytes(size_t bytes);
// For tests and logs: what the cache holds.
size_t grammar_cache_bytes();
size_t grammar_cache_entries();

}  // namespace pagoda::server
