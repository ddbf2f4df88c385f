#include "template/jinja_eval.h"

#include <ctime>

#include "template/jinja_builtins.h"

namespace pagoda::jinja {

void undefined_error(const Value& v) {
  throw Error(v.s.empty() ? std::string("value is undefined") : v.s);
}

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

int64_t int_arg(const Value& v, const char* what) {
  if (!v.is_integral()) throw Error(std::string(what) + ": '" + type_name(v) + "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value builtin_range(Evaluator&, CallArgs& a) {
  if (!a.kw.empty()) throw Error("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) throw Error("range expected 1 to 3 arguments");
  int64_t start = 0, stop = 0, step = 1;
  if (a.pos.size() == 1) {
    stop = int_arg(a.pos[0], "range");
  } else {
    start = int_arg(a.pos[0], "range");
    stop = int_arg(a.pos[1], "range");
    if (a.pos.size() == 3) step = int_arg(a.pos[2], "range");
  }
  if (step == 0) throw Error("range() arg 3 must not be zero");
  std::vector<Value> out;
  // Counted the way jinja2's sandbox does before refusing ranges over MAX_RANGE.
  const double n = step > 0 ? (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)
                            : (static_cast<double>(start) - static_cast<double>(stop)) / static_cast<double>(-step);
  if (n > static_cast<double>(kMaxRange))
    throw Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) out.push_back(Value::integer(v));
  return Value::list_of(std::move(out));
}

Value builtin_namespace(Evaluator&, CallArgs& a) {
  Dict d;
  for (const Value& p : a.pos) {
    if (p.type != Type::Dict) throw Error("namespace() takes a dict as its positional argument");
    for (const auto& [k, v] : p.dict->entries) d.set(k, v);
  }
  for (auto& [k, v] : a.kw) d.set(Value::string(k), std::move(v));
  return Value::namespace_of(std::move(d));
}

Value builtin_dict(Evaluator&, CallArgs& a) {
  Dict d;
  if (a.pos.size() > 1) throw Error("dict expected at most 1 argument");
  if (!a.pos.empty()) {
    if (a.pos[0].type == Type::Dict) {
      d = *a.pos[0].dict;
    } else {
      for (const Value& item : iterate(a.pos[0])) {
        const std::vector<Value> kv = iterate(item);
        if (kv.size() != 2) throw Error("dictionary update sequence element has wrong length");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) d.set(Value::string(k), std::move(v));
  return Value::dict_of(std::move(d));
}

Value builtin_raise(Evaluator&, CallArgs& a) {
  const Value* m = arg(a, 0, "message");
  throw RaisedError(m ? to_str(*m) : std::string());
}

Value builtin_strftime_now(Evaluator&, CallArgs& a) {
  const Value* f = arg(a, 0, "format");
  if (f == nullptr || !f->is_string()) throw Error("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  const size_t n = f->s.size() < 200 ? std::strftime(buf, sizeof buf, f->s.c_str(), &tm) : 0;
  return Value::string(std::string(buf, n));
}

Value builtin_joiner(Evaluator&, CallArgs& a) {
  const Value* sep = arg(a, 0, "sep");
  const std::string text = sep ? to_str(*sep) : ", ";
  auto used = std::make_shared<bool>(false);
  return Value::function("joiner", [text, used](Evaluator&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return Value::string(text);
  });
}

}  // namespace

const Value* Evaluator::Frame::find(const std::string& name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get())
    for (const auto& [k, v] : f->vars)
      if (k == name) return &v;
  return nullptr;
}

void Evaluator::Frame::set(const std::string& name, Value v) {
  for (auto& [k, x] : vars) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Evaluator::Evaluator(const Dict& globals, const Limits& limits)
    : globals_(globals), limits_(limits), frame_(std::make_shared<Frame>()) {
  builtins_.set(Value::string("range"), Value::function("range", builtin_range));
  builtins_.set(Value::string("namespace"), Value::function("namespace", builtin_namespace));
  builtins_.set(Value::string("dict"), Value::function("dict", builtin_dict));
  builtins_.set(Value::string("raise_exception"), Value::function("raise_exception", builtin_raise));
  builtins_.set(Value::string("strftime_now"), Value::function("strftime_now", builtin_strftime_now));
  builtins_.set(Value::string("joiner"), Value::function("joiner", builtin_joiner));
}

void Evaluator::step() {
  if (++steps_ > limits_.max_steps) throw Error("template takes too many steps (limit " + std::to_string(limits_.max_steps) + ")");
}

void Evaluator::check_size(size_t n) const {
  if (n > limits_.max_output_bytes) throw Error("template output too large (limit " + std::to_string(limits_.max_output_bytes) + " bytes)");
}

void Evaluator::append(std::string& out, const std::string& text) const {
  check_size(out.size() + text.size());
  out += text;
}

std::string Evaluator::render(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

Value Evaluator::lookup(const std::string& name) const {
  if (const Value* v = frame_->find(name)) return *v;
  if (const Value* v = globals_.find(std::string_view(name))) return *v;
  if (const Value* v = builtins_.find(std::string_view(name))) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

Evaluator::Flow Evaluator::exec(const Body& body, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Evaluator::capture(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, std::string& out) {
  step();
  if (s.line > 0) line_ = s.line;
  switch (s.kind) {
    case StmtKind::Text: append(out, s.text); break;
    case StmtKind::Emit: append(out, to_str(eval(*s.expr))); break;
    case StmtKind::If:
      for (size_t k = 0; k < s.bodies.size(); ++k) {
        if (k == s.conds.size() || truthy(eval(*s.conds[k]))) return exec(s.bodies[k], out);
      }
      break;
    case StmtKind::For: exec_for(s, out); break;
    case StmtKind::Set: assign(s, s.targets, s.unpack, eval(*s.expr)); break;
    case StmtKind::SetAttr: {
      const Value target = lookup(s.targets[0]);
      if (target.type != Type::Namespace) throw Error("cannot assign attribute on non-namespace object");
      namespace_set(target, Value::string(s.text), eval(*s.expr));
      break;
    }
    case StmtKind::SetBlock:
      frame_->set(s.targets[0], apply_filters(s.filters, Value::string(capture(s.bodies[0]))));
      break;
    case StmtKind::Macro: frame_->set(s.text, make_macro(s)); break;
    case StmtKind::FilterBlock:
      append(out, to_str(apply_filters(s.filters, Value::string(capture(s.bodies[0])))));
      break;
    case StmtKind::With: {
      auto inner = std::make_shared<Frame>();
      inner->parent = frame_;
      for (size_t k = 0; k < s.targets.size(); ++k) inner->set(s.targets[k], eval(*s.with_values[k]));
      std::swap(frame_, inner);
      try {
        const Flow f = exec(s.bodies[0], out);
        std::swap(frame_, inner);
        return f;
      } catch (...) {
        std::swap(frame_, inner);
        throw;
      }
    }
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
    case StmtKind::Block: return exec(s.bodies[0], out);
  }
  return Flow::Normal;
}

void Evaluator::assign(const Stmt&, const std::vector<std::string>& targets, bool unpack, Value v) {
  if (!unpack) {
    frame_->set(targets[0], std::move(v));
    return;
  }
  const std::vector<Value> items = iterate(v);
  if (items.size() < targets.size())
    throw Error("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
  if (items.size() > targets.size())
    throw Error("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  for (size_t k = 0; k < targets.size(); ++k) frame_->set(targets[k], items[k]);
}

void Evaluator::exec_for(const Stmt& s, std::string& out) {
  const Value seq = eval(*s.expr);
  if (seq.type == Type::None || seq.is_number() || seq.type == Type::Function || seq.type == Type::Namespace)
    throw Error("'" + type_name(seq) + "' object is not iterable");
  std::vector<Value> items = iterate(seq);
  const std::shared_ptr<Frame> outer = frame_;
  struct Restore {
    Evaluator& ev;
    std::shared_ptr<Frame> saved;
    ~Restore() { ev.frame_ = saved; }
  } restore{*this, outer};
  if (s.cond) {
    std::vector<Value> kept;
    for (Value& item : items) {
      frame_ = std::make_shared<Frame>();
      frame_->parent = outer;
      assign(s, s.targets, s.unpack, item);
      if (truthy(eval(*s.cond))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    step();
    frame_ = std::make_shared<Frame>();
    frame_->parent = outer;
    assign(s, s.targets, s.unpack, items[static_cast<size_t>(k)]);
    Dict loop;
    loop.entries.reserve(12);
    auto put = [&](const char* key, Value v) { loop.entries.emplace_back(Value::string(key), std::move(v)); };
    put("index0", Value::integer(k));
    put("index", Value::integer(k + 1));
    put("revindex0", Value::integer(n - k - 1));
    put("revindex", Value::integer(n - k));
    put("first", Value::boolean(k == 0));
    put("last", Value::boolean(k == n - 1));
    put("length", Value::integer(n));
    put("depth0", Value::integer(0));
    put("depth", Value::integer(1));
    if (k > 0) put("previtem", items[static_cast<size_t>(k - 1)]);
    if (k + 1 < n) put("nextitem", items[static_cast<size_t>(k + 1)]);
    put("cycle", Value::function("cycle", [k](Evaluator&, CallArgs& a) {
      if (a.pos.empty()) throw Error("no items for cycling given");
      return a.pos[static_cast<size_t>(k) % a.pos.size()];
    }));
    frame_->set("loop", Value::dict_of(std::move(loop)));
    if (exec(s.bodies[0], out) == Flow::Break) break;
  }
  if (n == 0 && s.bodies.size() > 1) {
    frame_ = std::make_shared<Frame>();
    frame_->parent = outer;
    exec(s.bodies[1], out);
  }
}

Value Evaluator::make_macro(const Stmt& s) {
  const Stmt* def = &s;
  // The macro lives in the frame it closes over, so it holds that frame weakly (no reference
  // cycle); the evaluator keeps the frame alive for as long as the render lasts.
  const std::weak_ptr<Frame> closure = frame_;
  closures_.push_back(frame_);
  return Value::function(s.text, [def, closure](Evaluator& ev, CallArgs& a) {
    const std::string& name = def->text;
    if (a.pos.size() > def->params.size() && !def->uses_varargs)
      throw Error("macro '" + name + "' takes not more than " + std::to_string(def->params.size()) + " argument(s)");
    auto frame = std::make_shared<Frame>();
    frame->parent = closure.lock();
    std::vector<bool> given(def->params.size(), false);
    for (size_t k = 0; k < a.pos.size() && k < def->params.size(); ++k) {
      frame->set(def->params[k].name, a.pos[k]);
      given[k] = true;
    }
    Dict extra_kw;
    for (auto& [key, v] : a.kw) {
      size_t k = 0;
      while (k < def->params.size() && def->params[k].name != key) ++k;
      if (k < def->params.size()) {
        if (given[k]) throw Error("macro '" + name + "' got multiple values for argument '" + key + "'");
        frame->set(key, v);
        given[k] = true;
      } else if (def->uses_kwargs) {
        extra_kw.set(Value::string(key), v);
      } else {
        throw Error("macro '" + name + "' takes no keyword argument '" + key + "'");
      }
    }
    if (++ev.call_depth_ > ev.limits_.max_call_depth) {
      --ev.call_depth_;
      throw Error("macro calls nested too deeply (limit " + std::to_string(ev.limits_.max_call_depth) + ")");
    }
    std::shared_ptr<Frame> saved = ev.frame_;
    ev.frame_ = frame;
    std::string out;
    try {
      for (size_t k = 0; k < def->params.size(); ++k) {
        if (given[k]) continue;
        const Param& p = def->params[k];
        frame->set(p.name, p.default_value ? ev.eval(*p.default_value)
                                           : Value::undefined("parameter '" + p.name + "' was not provided"));
      }
      std::vector<Value> rest;
      for (size_t k = def->params.size(); k < a.pos.size(); ++k) rest.push_back(a.pos[k]);
      frame->set("varargs", Value::list_of(std::move(rest), true));
      frame->set("kwargs", Value::dict_of(std::move(extra_kw)));
      ev.exec(def->bodies[0], out);
    } catch (...) {
      ev.frame_ = saved;
      --ev.call_depth_;
      throw;
    }
    ev.frame_ = saved;
    --ev.call_depth_;
    return Value::string(std::move(out));
  });
}

Value Evaluator::apply_filters(const std::vector<ExprPtr>& filters, Value v) {
  for (const ExprPtr& f : filters) {
    CallArgs args;
    eval_args(*f, 1, args);
    v = filter(f->name, v, args);
  }
  return v;
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  step();
  if (callee.type == Type::Function) return callee.fn->call(*this, args);
  if (callee.is_undefined()) undefined_error(callee);
  throw Error("'" + type_name(callee) + "' object is not callable");
}

Value Evaluator::filter(const std::string& name, const Value& subject, CallArgs& args) {
  return apply_filter(*this, name, subject, args);
}

bool Evaluator::test(const std::string& name, const Value& subject, CallArgs& args) {
  return apply_test(*this, name, subject, args);
}

void Evaluator::eval_args(const Expr& e, size_t first, CallArgs& args) {
  for (size_t k = first; k < e.args.size(); ++k) args.pos.push_back(eval(*e.args[k]));
  for (const auto& [key, x] : e.kwargs) args.kw.emplace_back(key, eval(*x));
}

Value Evaluator::eval(const Expr& e) {
  step();
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const ExprPtr& a : e.args) items.push_back(eval(*a));
      return Value::list_of(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::DictLit: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        if (key.type == Type::List && !key.is_tuple) throw Error("unhashable type: 'list'");
        if (key.type == Type::Dict) throw Error("unhashable type: 'dict'");
        d.set(std::move(key), eval(*e.args[k + 1]));
      }
      return Value::dict_of(std::move(d));
    }
    case ExprKind::Getattr: return get_attr(eval(*e.args[0]), e.name);
    case ExprKind::Getitem: {
      const Value obj = eval(*e.args[0]);
      return get_item(obj, eval(*e.args[1]));
    }
    case ExprKind::Slice: {
      const Value obj = eval(*e.args[0]);
      Value parts[3];
      for (int k = 0; k < 3; ++k)
        parts[k] = e.args[static_cast<size_t>(k) + 1] ? eval(*e.args[static_cast<size_t>(k) + 1]) : Value::none();
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::Call: {
      const Value callee = eval(*e.args[0]);
      CallArgs args;
      eval_args(e, 1, args);
      return call(callee, args);
    }
    case ExprKind::Filter: {
      const Value subject = eval(*e.args[0]);
      CallArgs args;
      eval_args(e, 1, args);
      return filter(e.name, subject, args);
    }
    case ExprKind::Test: {
      const Value subject = eval(*e.args[0]);
      CallArgs args;
      eval_args(e, 1, args);
      return Value::boolean(test(e.name, subject, args));
    }
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.args[0])));
    case ExprKind::Neg:
    case ExprKind::Pos: {
      const Value v = eval(*e.args[0]);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) throw Error("bad operand type for unary " + std::string(e.kind == ExprKind::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
      if (e.kind == ExprKind::Pos) return v.type == Type::Bool ? Value::integer(v.as_int()) : v;
      if (v.type == Type::Float) return Value::real(-v.f);
      if (v.is_big() || v.as_int() == INT64_MIN) return Value::integer(-v.as_bigint());
      return Value::integer(-v.as_int());
    }
    case ExprKind::Binary: return eval_binary(e);
    case ExprKind::Compare: return eval_compare(e);
    case ExprKind::CondExpr: {
      if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value::undefined();
}

Value Evaluator::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(*e.args[0]);
  if (op == "and") return truthy(a) ? eval(*e.args[1]) : a;
  if (op == "or") return truthy(a) ? a : eval(*e.args[1]);
  const Value b = eval(*e.args[1]);
  if (op == "~") {
    std::string s = to_str(a);
    const std::string t = to_str(b);
    check_size(s.size() + t.size());
    return Value::string(s + t);
  }
  return binary_op(*this, op, a, b);
}

Value Evaluator::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t k = 0; k < e.ops.size(); ++k) {
    Value right = eval(*e.args[k + 1]);
    const std::string& op = e.ops[k];
    bool r = false;
    if (op == "==") {
      r = equals(left, right);
    } else if (op == "!=") {
      r = !equals(left, right);
    } else if (op == "in" || op == "notin") {
      r = contains(right, left) == (op == "in");
    } else {
      if (left.is_undefined()) undefined_error(left);
      if (right.is_undefined()) undefined_error(right);
      if (op == "<") {
        r = less_than(left, right);
      } else if (op == ">") {
        r = less_than(right, left);
      } else if (op == "<=") {
        r = less_than(left, right) || equals(left, right);
      } else {
        r = less_than(right, left) || equals(left, right);
      }
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace pagoda::jinja
