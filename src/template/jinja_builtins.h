// What templates can do with values: operators, attribute and item access, the methods of str,
// dict and list that the sandbox allows, and jinja2's filters and tests.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_value.h"

namespace pagoda::jinja {

class Evaluator;

// --- jinja_ops.cpp ---
// + - * / // % ** on Python values (also str % args); throws pagoda::Error on a type error.
Value binary_op(Evaluator& ev, const std::string& op, const Value& a, const Value& b);
// Python `item in container`.
bool contains(const Value& container, const Value& item);
// Python iteration: a list's items, a dict's keys, a string's characters; Undefined is empty.
std::vector<Value> iterate(const Value& v);
// jinja2's sandboxed getattr (attribute first, then item) and getitem (item first, then attribute).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python "fmt % args".
std::string percent_format(Evaluator& ev, const std::string& fmt, const Value& args);
// Python len(); nullopt when the value has none.
std::optional<int64_t> length(const Value& v);

// --- jinja_methods.cpp ---
// A bound method of a str / dict / list (or an unsafe-attribute stub that throws when called), or
// nullopt when the type has no such attribute.
std::optional<Value> method(const Value& obj, const std::string& name);
std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);
std::string str_capitalize(std::string_view s);
// str.strip / lstrip / rstrip; chars == nullptr strips whitespace.
std::string str_strip(std::string_view s, const std::string* chars, bool left, bool right);
std::vector<std::string> str_splitlines(std::string_view s);

// --- jinja_filters.cpp ---
bool has_filter(std::string_view name);
bool has_test(std::string_view name);
Value apply_filter(Evaluator& ev, const std::string& name, const Value& subject, CallArgs& args);
bool apply_test(Evaluator& ev, const std::string& name, const Value& subject, CallArgs& args);

// Argument helper: positional index `pos` or keyword `name`, else nullopt.
const Value* arg(const CallArgs& args, size_t pos, const char* name);

}  // namespace pagoda::jinja
