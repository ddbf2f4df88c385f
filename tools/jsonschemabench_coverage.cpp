// JSONSchemaBench coverage on a vocabulary of single bytes (fast: no tokenizer), the walk and the
// validator as `pagoda bench structured --jsonschemabench` use them. Build and run from the repo root:
//   c++ -Isrc -O1 -std=c++20 tools/jsonschemabench_coverage.cpp $(ls src/structured/*.cpp | grep -v compile.cpp) \
//       src/core/*.cpp -o /tmp/jsb_coverage -lpthread
//   ls DIR/data/CATEGORY/*.json > list; /tmp/jsb_coverage list out.jsonl; python3 tests/structured/validate_outputs.py out.jsonl
// It prints the most common refusals and "schemas N compiled C walked W".
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <iostream>
#include <random>
#include <nlohmann/json.hpp>
#include "core/error.h"
#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
using namespace pagoda::structured;
int main(int argc, char** argv) {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, (char)b);
  v.emplace_back();
  auto trie = std::make_shared<TokenTrie>(v);
  std::ofstream out(argv[2]);
  std::string line;
  std::ifstream list(argv[1]);
  int n = 0, ok = 0, walked = 0;
  std::map<std::string, int> errs;
  while (std::getline(list, line)) {
    std::ifstream f(line); std::stringstream ss; ss << f.rdbuf();
    std::string text = ss.str();
    ++n;
    std::shared_ptr<GrammarRuntime> rt;
    try {
      auto g = parse_gbnf(json_schema_to_gbnf(text));
      rt = std::make_shared<GrammarRuntime>(std::move(g), trie, std::vector<int32_t>{256});
      ++ok;
    } catch (const std::exception& e) {
      std::string m = e.what(); if (m.size() > 90) m = m.substr(0, 90);
      errs[m]++;
      if (getenv("SHOWERR")) std::cerr << line << ": " << e.what() << "\n";
      continue;
    }
    std::mt19937_64 rng(n);
    Matcher m(rt);
    TokenMask mask; std::vector<int32_t> allowed;
    std::string s; bool done = false;
    for (int step = 0; step < 3000 && !done; ++step) {
      m.fill_mask(mask, 3000 - step);
      allowed_ids(mask, allowed);
      if (allowed.empty()) break;
      int32_t t = allowed[rng() % allowed.size()];
      if (rng() % 2 == 0) { std::vector<int32_t> c; for (int32_t id : allowed) if (id < 256 && strchr("\"]}", id)) c.push_back(id); if (!c.empty()) t = c[rng() % c.size()]; }
      if (m.accepting() && rng() % 3 == 0) t = 256;
      if (!m.accept(t)) { std::cerr << "refused allowed\n"; break; }
      if (t == 256) { done = true; break; }
      s += (char)t;
    }
    if (!done) { std::cerr << "unfinished " << line << ": " << s.substr(0, 200) << "\n"; continue; }
    ++walked;
    nlohmann::json rec{{"kind", "schema"}, {"spec", nlohmann::json::parse(text)}, {"output", s}, {"file", line}};
    out << rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::vector<std::pair<int, std::string>> es; for (auto& [k, c] : errs) es.push_back({c, k});
  std::sort(es.rbegin(), es.rend());
  for (size_t i = 0; i < es.size() && i < (getenv("TOPN") ? atoi(getenv("TOPN")) : 25); ++i) std::cout << es[i].first << "  " << es[i].second << "\n";
  std::cout << "schemas " << n << " compiled " << ok << " walked " << walked << "\n";
}
