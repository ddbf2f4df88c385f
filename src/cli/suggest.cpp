#include "cli/suggest.h"

#include <algorithm>

namespace pagoda::cli {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: i - 2, i - 1 and i (the swap looks two rows back).
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> did_you_mean(std::string_view typed, const std::vector<std::string>& candidates) {
  std::vector<std::pair<size_t, std::string>> close;
  for (const std::string& c : candidates) {
    const size_t limit = c.size() <= 4 ? 1 : 2;
    const size_t d = edit_distance(typed, c);
    if (d <= limit) close.emplace_back(d, c);
    else if (typed.size() >= 2 && c.compare(0, typed.size(), typed) == 0) close.emplace_back(limit + 1, c);
  }
  std::stable_sort(close.begin(), close.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, c] : close) out.push_back(std::move(c));
  return out;
}

std::optional<std::string> unknown_subcommand_error(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* cur = &app;
  std::string path = app.get_name().empty() ? "pagoda" : app.get_name();
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return std::nullopt;  // an option: CLI11's to judge
    const auto subs = cur->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty() || !cur->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty())
      return std::nullopt;  // a command without subcommands, or one that also takes positionals
    const CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (const CLI::App* s : subs) {
      names.push_back(s->get_name());
      if (s->check_name(word)) next = s;
    }
    if (next == nullptr) {
      std::string msg = path + ": '" + word + "' is not a command.";
      const std::vector<std::string> guesses = did_you_mean(word, names);
      for (size_t g = 0; g < guesses.size(); ++g)
        msg += (g == 0 ? " Did you mean '" : g + 1 == guesses.size() ? " or '" : ", '") + guesses[g] + "'" +
               (g + 1 == guesses.size() ? "?" : "");
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      return msg + "\nThe commands: " + all + " (" + path + " --help says more).";
    }
    cur = next;
    path += " " + next->get_name();
  }
  return std::nullopt;
}

std::optional<std::string> unknown_flag_error(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* cur = &app;
  std::string path = app.get_name().empty() ? "pagoda" : app.get_name();
  size_t i = 1;
  for (; i < args.size() && !args[i].empty() && args[i][0] != '-'; ++i) {
    const CLI::App* next = nullptr;
    for (const CLI::App* s : cur->get_subcommands([](const CLI::App*) { return true; }))
      if (s->check_name(args[i])) next = s;
    if (next == nullptr) break;
    cur = next;
    path += " " + next->get_name();
  }
  auto find = [&](const std::string& name) -> const CLI::Option* {
    for (const CLI::App* a = cur; a != nullptr; a = a->get_parent())
      if (const CLI::Option* o = a->get_option_no_throw(name)) return o;
    return nullptr;
  };
  for (; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") return std::nullopt;
    if (w.rfind("--", 0) != 0) continue;
    const std::string name = w.substr(0, w.find('='));
    if (const CLI::Option* o = find(name)) {
      // Skip its value(s), which may look like anything but a flag.
      if (o->get_type_size_max() > 0 && o->get_items_expected_max() > 0 && w.find('=') == std::string::npos) {
        const bool list = o->get_items_expected_max() > 1;
        while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
          ++i;
          if (!list) break;
        }
      }
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::Option* o : cur->get_options([](const CLI::Option*) { return true; }))
      for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    std::vector<std::string> guesses = did_you_mean(name, names);
    if (guesses.size() > 3) guesses.resize(3);
    std::string msg = path + ": unknown flag '" + name + "'.";
    for (size_t g = 0; g < guesses.size(); ++g)
      msg += (g == 0 ? " Did you mean '" : g + 1 == guesses.size() ? " or '" : ", '") + guesses[g] + "'" +
             (g + 1 == guesses.size() ? "?" : "");
    return msg + "\n" + path + " --help lists its flags" +
           (cur->get_name() == "serve" ? "; docs/coming-from-vllm.md says which of vllm serve's flags pagoda takes." : ".");
  }
  return std::nullopt;
}

}  // namespace pagoda::cli
