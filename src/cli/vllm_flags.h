// vllm serve's flags that pagoda has no use for, so that a vLLM launch script runs unchanged or
// stops with a reason: each is accepted with a one-line warning (it tunes something pagoda does
// not have, or asks for what pagoda does anyway) or refused (exit 2) because serving without it
// would not be what the script asked for. The flags pagoda implements are its own options
// (cmd_serve.cpp, engine_flags.cpp). docs/coming-from-vllm.md has the whole table.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

namespace pagoda::cli {

enum class VllmArity {
  flag,    // store_true / BooleanOptionalAction: also --no-NAME
  value,   // one value
  values,  // nargs='+': one or more
};

struct VllmFlag {
  const char* name;
  VllmArity arity;
  // nullptr: accepted (any value) with the warning `why`. "": refused whatever the value.
  // "1|auto": these values accepted with the warning, any other refused with `why`.
  const char* accepted;
  const char* why;
};

const std::vector<VllmFlag>& vllm_flags();

// vLLM's short spellings (-tp 2, -q awq, -O3): the long flag they stand for, or "" for none.
std::string vllm_short_alias(const std::string& word);

// Registers every flag of vllm_flags() that `cmd` does not already have (a flag implemented later
// takes over its entry), hidden from --help. Warnings are appended to `warnings` while parsing;
// a refusal throws CLI::ValidationError (exit 2) naming the flag and saying what to do.
void add_vllm_compat_flags(CLI::App* cmd, std::shared_ptr<std::vector<std::string>> warnings);

// What vLLM's argument parser does before parsing, for `pagoda serve`: -tp and the other short
// spellings become their long flags, --max_model_len becomes --max-model-len, and --config FILE
// (vLLM's YAML config: `max-model-len: 4096`, `enable-prefix-caching: true`) becomes the flags it
// holds, appended after those of the command line, which win: a key also given there is skipped.
// `cmd` says which flags take values (to tell a positional MODEL from a flag's value). Throws
// pagoda::Error for a config file that cannot be read.
std::vector<std::string> expand_vllm_args(const CLI::App& cmd, std::vector<std::string> args);

}  // namespace pagoda::cli
