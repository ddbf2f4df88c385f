// Reading one field of a client's JSON request, shared by the request parsers (chat, completions,
// responses): absent and null are the same, a wrong type or range is a 400 naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"

namespace pagoda::server {

using Json = nlohmann::ordered_json;

// "a number", "an array", ... for messages.
const char* type_name(const Json& v);
[[noreturn]] void wrong_type(const std::string& key, const char* want, const Json& got);
// The field, or nullptr when absent or null.
const Json* field(const Json& j, const std::string& key);
// A finite number.
std::optional<double> opt_number(const Json& j, const std::string& key);
// An integer in [lo, hi] (an integral float is accepted, as Python's int() of it).
int64_t as_int(const Json& v, const std::string& key, int64_t lo, int64_t hi);
std::optional<bool> opt_bool(const Json& j, const std::string& key);
// The field a validate_sampling_params message is about: its first word.
std::string param_of(const std::string& message);
// The sampling fields every generation request (chat, completions, responses) reads alike:
// temperature, top_p, top_k, seed, repetition_penalty, ignore_eos, cache_salt and stop.
void read_common_sampling(const Json& j, SamplingParams& p);

}  // namespace pagoda::server
