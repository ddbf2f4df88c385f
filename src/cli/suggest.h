// "Did you mean ...?" for a mistyped subcommand: the known names closest to what was typed.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::cli {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring characters each cost 1 ("sevre" is 1 from "serve").
size_t edit_distance(std::string_view a, std::string_view b);

// The candidates `typed` was probably meant to be, closest first: those within edit distance 2
// (1 for names of up to 4 letters) and those `typed` (2 letters or more) begins.
std::vector<std::string> did_you_mean(std::string_view typed, const std::vector<std::string>& candidates);

// Walks the words of argv that name subcommands ("pagoda bench serve ..."); for the first one
// that names none of its parent's subcommands, the error to print, with suggestions. Nullopt when
// every such word is known (CLI11 then reports anything else).
std::optional<std::string> unknown_subcommand_error(const CLI::App& app, int argc, const char* const* argv);

// For the first flag (--name or --name=value) that the command named by argv's leading words does
// not have: "pagoda serve: unknown flag '--max-modle-len'. Did you mean '--max-model-len'?" and
// where to look. Nullopt when every flag is known. Values of the command's flags are skipped.
std::optional<std::string> unknown_flag_error(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace pagoda::cli
