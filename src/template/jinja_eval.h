// Renders a parsed template: jinja2's scoping (a for-loop iteration and a macro call each get a
// scope of their own; `if` does not), loop variables and loop controls, macros, namespaces, and
// Python semantics for operators. Work is bounded by Limits so hostile templates cannot hang or
// exhaust memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "template/jinja_ast.h"
#include "template/jinja_value.h"

namespace pagoda::jinja {

struct Limits {
  size_t max_output_bytes = size_t{64} << 20;  // any one string, and the whole render
  uint64_t max_steps = 5'000'000;              // statements + expressions evaluated
  int max_call_depth = 64;                     // nested macro calls
};

// raise_exception(message) in a template: the message, unchanged.
class RaisedError : public Error {
 public:
  explicit RaisedError(const std::string& message) : Error(message) {}
};

class Evaluator {
 public:
  Evaluator(const Dict& globals, const Limits& limits);

  std::string render(const Body& body);

  Value call(const Value& callee, CallArgs& args);
  // Counts a unit of work; throws when the step budget is spent.
  void step();
  // Throws when a string of n bytes would be over the size limit.
  void check_size(size_t n) const;
  const Limits& limits() const { return limits_; }
  // The line of the statement being rendered (for error messages).
  int line() const { return line_; }

  // Applies a filter / test by name (for the map/select family of filters).
  Value filter(const std::string& name, const Value& subject, CallArgs& args);
  bool test(const std::string& name, const Value& subject, CallArgs& args);

 private:
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Frame> parent;
    const Value* find(const std::string& name) const;
    void set(const std::string& name, Value v);
  };
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  std::string capture(const Body& body);
  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  void eval_args(const Expr& e, size_t first, CallArgs& args);
  Value lookup(const std::string& name) const;
  void assign(const Stmt& s, const std::vector<std::string>& targets, bool unpack, Value v);
  Value make_macro(const Stmt& s);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v);
  void append(std::string& out, const std::string& text) const;

  const Dict& globals_;
  Dict builtins_;
  Limits limits_;
  std::shared_ptr<Frame> frame_;
  std::vector<std::shared_ptr<Frame>> closures_;  // frames that macros close over
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
};

// The errors an undefined value raises when used ("'x' is undefined").
[[noreturn]] void undefined_error(const Value& v);

}  // namespace pagoda::jinja
