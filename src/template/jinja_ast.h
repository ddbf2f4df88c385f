// The syntax tree of a parsed template: expressions and statements, with source positions.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace pagoda::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  Literal,   // value
  Name,      // name
  List,      // args
  Tuple,     // args
  DictLit,   // args: key, value, key, value, ...
  Getattr,   // args[0] . name
  Getitem,   // args[0] [ args[1] ]
  Slice,     // args[0] [ args[1] : args[2] : args[3] ]  (null = omitted)
  Call,      // args[0] ( args[1..], kwargs )
  Filter,    // name; args[0] is the subject (null in a filter block / set block), then arguments
  Test,      // name; args[0] is the subject, then arguments
  Not,       // not args[0]
  Neg,       // - args[0]
  Pos,       // + args[0]
  Binary,    // args[0] op args[1]: + - * / // % ** ~ and or
  Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  CondExpr,  // args[1] if args[0] else args[2] (args[2] null: no else)
};

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 0;
  int col = 0;
  int depth = 1;  // of the subtree; the parser bounds it so evaluation cannot overflow the stack
  Value value;
  std::string name;  // Name, Getattr, Filter, Test; Binary: the operator
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind : uint8_t {
  Text,         // text
  Emit,         // {{ expr }}
  If,           // conds[k] -> bodies[k]; bodies has one more entry when there is an else
  For,          // targets in expr [if cond]: bodies[0]; bodies[1] = else
  Set,          // targets = expr
  SetAttr,      // targets[0].attr = expr
  SetBlock,     // targets[0] = rendered bodies[0], through filters
  Macro,        // name(params) bodies[0]
  FilterBlock,  // bodies[0] through filters
  With,         // targets = with_values: bodies[0]
  Break,
  Continue,
  Block,        // bodies[0] as is ({% generation %})
};

struct Param {
  std::string name;
  ExprPtr default_value;  // null: none
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  int line = 0;
  int col = 0;
  std::string text;  // Text; Macro name; SetAttr attribute
  ExprPtr expr;      // Emit, For iterable, Set value
  ExprPtr cond;      // For filter
  std::vector<ExprPtr> conds;  // If
  std::vector<Body> bodies;
  std::vector<std::string> targets;
  bool unpack = false;  // For / Set: the target was a tuple
  std::vector<ExprPtr> filters;  // FilterBlock / SetBlock: Filter nodes with a null subject
  std::vector<ExprPtr> with_values;
  std::vector<Param> params;  // Macro
  bool uses_varargs = false;  // Macro: the body names `varargs` (extra positional arguments allowed)
  bool uses_kwargs = false;   // Macro: the body names `kwargs` (extra keyword arguments allowed)
};

}  // namespace pagoda::jinja
