#include "server/structured_output.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/fault_injection.h"
#include "server/api_error.h"
#include "server/request_fields.h"
#include "structured/grammar_cache.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

using structured::Constraint;
using structured::ConstraintKind;

std::string schema_text(const Json& v, const std::string& param) {
  if (!v.is_object() && !v.is_boolean()) wrong_type(param, "a JSON Schema object", v);
  return v.dump();
}

std::vector<std::string> choice_list(const Json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) wrong_type(param, "a non-empty array of strings", v);
  std::vector<std::string> out;
  for (const Json& c : v) {
    if (!c.is_string()) wrong_type(param, "a non-empty array of strings", v);
    out.push_back(c.get<std::string>());
  }
  return out;
}

std::string text_field(const Json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  return v.get<std::string>();
}

std::optional<RequestedConstraint> from_response_format(const Json& rf) {
  if (!rf.is_object()) wrong_type("response_format", "an object", rf);
  const Json* t = field(rf, "type");
  const std::string type = t ? text_field(*t, "response_format.type") : "text";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return RequestedConstraint{{ConstraintKind::kJsonObject, "", {}, {}, true}, "response_format"};
  if (type == "json_schema") {
    const Json* js = field(rf, "json_schema");
    if (!js || !js->is_object())
      throw bad_request("response_format of type 'json_schema' needs a json_schema object {name, schema}", "response_format");
    const Json* schema = field(*js, "schema");
    // OpenAI's name/strict are accepted; a schema is always enforced strictly.
    const std::string text = schema ? schema_text(*schema, "response_format.json_schema.schema") : "{}";
    return RequestedConstraint{{ConstraintKind::kJsonSchema, text, {}, {}, true}, "response_format"};
  }
  throw bad_request("response_format type must be 'text', 'json_object' or 'json_schema', got '" + type + "'",
                    "response_format");
}

}  // namespace

std::optional<RequestedConstraint> read_text_format(const Json& f) {
  if (!f.is_object()) wrong_type("text.format", "an object", f);
  const Json* t = field(f, "type");
  const std::string type = t ? text_field(*t, "text.format.type") : "text";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return RequestedConstraint{{ConstraintKind::kJsonObject, "", {}, {}, true}, "text.format"};
  if (type == "json_schema") {
    const Json* schema = field(f, "schema");
    const std::string text = schema ? schema_text(*schema, "text.format.schema") : "{}";
    return RequestedConstraint{{ConstraintKind::kJsonSchema, text, {}, {}, true}, "text.format"};
  }
  throw bad_request("text.format type must be 'text', 'json_object' or 'json_schema', got '" + type + "'",
                    "text.format");
}

namespace {

std::optional<RequestedConstraint> from_vllm(const Json& j, const std::string& prefix, const Json& obj) {
  std::optional<RequestedConstraint> out;
  auto set = [&](ConstraintKind k, std::string text, std::vector<std::string> choices, const std::string& param) {
    if (out) throw bad_request("give one structured-output constraint, not several (" + out->param + " and " + param + ")", param);
    out = RequestedConstraint{{k, std::move(text), std::move(choices), {}, true}, param};
  };
  const bool nested = prefix == "structured_outputs.";
  const std::string pj = nested ? "json" : "guided_json", pr = nested ? "regex" : "guided_regex",
                    pc = nested ? "choice" : "guided_choice", pg = nested ? "grammar" : "guided_grammar";
  if (const Json* v = field(obj, pj)) {
    // vLLM takes the schema as an object or as its JSON text.
    const std::string text = v->is_string() ? v->get<std::string>() : schema_text(*v, prefix + pj);
    set(ConstraintKind::kJsonSchema, text, {}, nested ? prefix + pj : pj);
  }
  if (const Json* v = field(obj, pr)) set(ConstraintKind::kRegex, text_field(*v, prefix + pr), {}, nested ? prefix + pr : pr);
  if (const Json* v = field(obj, pc)) set(ConstraintKind::kChoice, "", choice_list(*v, prefix + pc), nested ? prefix + pc : pc);
  if (const Json* v = field(obj, pg)) set(ConstraintKind::kGrammar, text_field(*v, prefix + pg), {}, nested ? prefix + pg : pg);
  if (nested && field(obj, "json_object") && opt_bool(obj, "json_object").value_or(false))
    set(ConstraintKind::kJsonObject, "", {}, "structured_outputs.json_object");
  (void)j;
  return out;
}

}  // namespace

std::optional<RequestedConstraint> read_constraint(const Json& j) {
  std::vector<RequestedConstraint> found;
  if (const Json* rf = field(j, "response_format"))
    if (auto c = from_response_format(*rf)) found.push_back(*c);
  if (const Json* so = field(j, "structured_outputs")) {
    if (!so->is_object()) wrong_type("structured_outputs", "an object", *so);
    if (auto c = from_vllm(j, "structured_outputs.", *so)) found.push_back(*c);
  }
  if (auto c = from_vllm(j, "", j)) found.push_back(*c);
  if (found.size() > 1)
    throw bad_request("give one structured-output constraint, not several (" + found[0].param + " and " +
                          found[1].param + ")",
                      found[1].param);
  if (found.empty()) return std::nullopt;
  return found[0];
}

std::optional<RequestedConstraint> read_tool_choice(const Json& j, const Json& tools) {
  const Json* tc = field(j, "tool_choice");
  if (!tc || (tc->is_string() && (*tc == "auto" || *tc == "none"))) return std::nullopt;
  if (!tools.is_array() || tools.empty()) throw bad_request("tool_choice needs a non-empty tools array", "tool_choice");
  std::string wanted;
  if (tc->is_object()) {
    const Json* fn = field(*tc, "function");
    if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string())
      throw bad_request("a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
    wanted = (*fn)["name"].get<std::string>();
  }
  Constraint c{ConstraintKind::kToolCalls, "", {}, {}, true};
  for (const Json& t : tools) {
    const Json* fn = t.is_object() ? field(t, "function") : nullptr;
    if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string()) continue;
    const std::string name = (*fn)["name"].get<std::string>();
    if (!wanted.empty() && name != wanted) continue;
    const Json* params = field(*fn, "parameters");
    c.choices.push_back(name);
    c.schemas.push_back(params ? schema_text(*params, "tools.function.parameters") : "{\"type\": \"object\"}");
  }
  if (c.choices.empty()) throw bad_request("tool_choice names function '" + wanted + "', which is not in tools", "tool_choice");
  c.parallel = wanted.empty() && opt_bool(j, "parallel_tool_calls").value_or(true);
  return RequestedConstraint{std::move(c), "tool_choice"};
}

namespace {

constexpr size_t kDefaultCacheBytes = size_t{256} << 20;

std::string constraint_key(const Constraint& c) {
  std::string key = std::to_string(static_cast<int>(c.kind)) + (c.parallel ? "p" : "s") + '\x1f' + c.text;
  for (const auto& s : c.choices) key += '\x1f' + s;
  for (const auto& s : c.schemas) key += '\x1e' + s;
  return key;
}

// What a request's compile may read on the pool after the request has moved on: copies.
struct CompileInput {
  Constraint constraint;
  std::shared_ptr<const structured::TokenTrie> trie;
  std::vector<int32_t> eos_ids;
};

// Throws what compiling throws (Error: the grammar is wrong or past a budget).
std::shared_ptr<structured::GrammarRuntime> compile_now(const CompileInput& in) {
  grammar_delay_point();
  auto rt = std::make_shared<structured::GrammarRuntime>(structured::compile_constraint(in.constraint), in.trie,
                                                         in.eos_ids);
  // A grammar whose start cannot expand fails here, as a 400; so does one whose ambiguity shows
  // within the probe's bounded exploration (the parser budget, structured/automaton.h).
  rt->initial();
  rt->probe();
  return rt;
}

}  // namespace

// The process's grammars: one trie per tokenizer (the server serves one model), the cache, the
// compiles in flight and the threads that run them. Never destroyed (its threads are detached:
// a compile in flight at exit is simply dropped).
struct GrammarCompiles {
  std::mutex mu;
  const Tokenizer* trie_of = nullptr;
  std::shared_ptr<const structured::TokenTrie> trie;
  structured::GrammarCache cache{kDefaultCacheBytes};
  std::unordered_map<std::string, std::shared_ptr<GrammarCompile>> in_flight;
  std::deque<std::pair<std::shared_ptr<GrammarCompile>, CompileInput>> queue;
  std::condition_variable wake;
  bool started = false;
  std::mutex waiters_mu;  // held while waiters run, so that drop_compile_waiters() waits for them
  bool drop_waiters = false;

  static GrammarCompiles& get() {
    static GrammarCompiles* g = new GrammarCompiles;
    return *g;
  }

  std::shared_ptr<const structured::TokenTrie> trie_for(const Tokenizer& tok, const std::vector<int32_t>& eos_ids) {
    std::lock_guard lock(mu);
    if (trie_of != &tok) {
      trie = std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(tok, eos_ids));
      trie_of = &tok;
      cache.clear();  // bound to the vocabulary they were compiled against
    }
    return trie;
  }

  // Two threads: a large compile does not hold a small one behind it. Each is one busy core at
  // most, beside the engine's threads.
  void start_threads() {
    if (std::exchange(started, true)) return;
    for (int i = 0; i < 2; ++i) std::thread([this] { run(); }).detach();
  }

  void run() {
    for (;;) {
      std::unique_lock lock(mu);
      wake.wait(lock, [&] { return !queue.empty(); });
      auto [job, input] = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      std::shared_ptr<structured::GrammarRuntime> rt;
      std::exception_ptr error;
      try {
        rt = compile_now(input);
      } catch (...) {
        error = std::current_exception();
      }
      if (rt) cache.insert(job->key_, rt);
      lock.lock();
      in_flight.erase(job->key_);
      lock.unlock();
      std::vector<std::function<void()>> waiters;
      {
        std::lock_guard job_lock(job->mu_);
        job->runtime_ = std::move(rt);
        job->error_ = error;
        job->done_ = true;
        waiters.swap(job->waiters_);
      }
      std::lock_guard waiters_lock(waiters_mu);
      for (auto& w : waiters) {
        if (!drop_waiters) {
          w();
          continue;
        }
        // The server is gone: a waiter holds a suspended connection whose I/O context is being
        // destroyed, and destroying the waiter would touch it. The process is exiting: leaked.
        new std::function<void()>(std::move(w));
      }
    }
  }

  // The compile of `key`, already running or started now.
  std::shared_ptr<GrammarCompile> start(const std::string& key, const Constraint& c, const Tokenizer& tok,
                                        const std::vector<int32_t>& eos_ids) {
    CompileInput input{c, trie_for(tok, eos_ids), eos_ids};
    std::lock_guard lock(mu);
    if (auto it = in_flight.find(key); it != in_flight.end()) return it->second;
    auto job = std::make_shared<GrammarCompile>();
    job->key_ = key;
    in_flight.emplace(key, job);
    queue.emplace_back(job, std::move(input));
    start_threads();
    wake.notify_one();
    return job;
  }
};

void GrammarCompile::on_done(std::function<void()> f) {
  {
    std::lock_guard lock(mu_);
    if (!done_) {
      waiters_.push_back(std::move(f));
      return;
    }
  }
  f();
}

bool GrammarCompile::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

namespace {
thread_local bool t_defer = false;
thread_local const std::vector<std::shared_ptr<GrammarCompile>>* t_finished = nullptr;

// A cached or just compiled runtime, unless it is spent (a grammar that ran out of its parser
// budget for an earlier request would again): then the request's 400.
std::shared_ptr<structured::GrammarRuntime> usable(std::shared_ptr<structured::GrammarRuntime> rt,
                                                   const std::string& key, const RequestedConstraint& rc) {
  if (const std::string why = rt->failure(); !why.empty()) {
    GrammarCompiles::get().cache.erase(key);
    throw bad_request(why, rc.param);
  }
  return rt;
}
}  // namespace

DeferCompiles::DeferCompiles(const std::vector<std::shared_ptr<GrammarCompile>>& finished) {
  t_defer = true;
  t_finished = &finished;
}

DeferCompiles::~DeferCompiles() {
  t_defer = false;
  t_finished = nullptr;
}

void drop_compile_waiters() {
  GrammarCompiles& g = GrammarCompiles::get();
  std::lock_guard lock(g.waiters_mu);
  g.drop_waiters = true;
}

void set_grammar_cache_bytes(size_t bytes) { GrammarCompiles::get().cache.set_max_bytes(bytes); }
size_t grammar_cache_bytes() { return GrammarCompiles::get().cache.bytes(); }
size_t grammar_cache_entries() { return GrammarCompiles::get().cache.size(); }

std::shared_ptr<structured::GrammarRuntime> compile_constraint_cached(const RequestedConstraint& rc,
                                                                      const Tokenizer& tok,
                                                                      const std::vector<int32_t>& eos_ids) {
  GrammarCompiles& g = GrammarCompiles::get();
  const std::string key = constraint_key(rc.constraint);
  try {
    if (t_finished)
      for (const auto& job : *t_finished) {
        if (job->key_ != key) continue;
        std::lock_guard lock(job->mu_);
        if (job->error_) std::rethrow_exception(job->error_);
        return usable(job->runtime_, key, rc);
      }
    if (auto rt = g.cache.find(key)) return usable(std::move(rt), key, rc);
    if (t_defer) throw CompileDeferred{g.start(key, rc.constraint, tok, eos_ids)};
    auto rt = compile_now({rc.constraint, g.trie_for(tok, eos_ids), eos_ids});
    g.cache.insert(key, rt);
    return rt;
  } catch (const Error& e) {
    throw bad_request(e.what(), rc.param);
  }
}

}  // namespace pagoda::server
