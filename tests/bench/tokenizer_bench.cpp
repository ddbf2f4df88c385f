// Encode throughput of the real Qwen3 tokenizer on a multi-megabyte English text (the licence
// texts Debian installs) and on a mixed-script variant. Needs tools/fetch_test_data.sh.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "core/build_paths.h"

namespace {

constexpr size_t kCorpusBytes = 4u << 20;

const pagoda::Tokenizer* qwen3() {
  static const std::unique_ptr<pagoda::Tokenizer> tok = []() -> std::unique_ptr<pagoda::Tokenizer> {
    const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen3-tokenizer";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) return nullptr;
    return pagoda::Tokenizer::load_dir(dir);
  }();
  return tok.get();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Licence and copyright texts found on any Debian machine, concatenated (repeated if need be) to
// at least kCorpusBytes.
const std::string& english_corpus() {
  static const std::string text = [] {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses", ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    for (const auto& e : std::filesystem::directory_iterator("/usr/share/doc", ec)) {
      const auto copyright = e.path() / "copyright";
      if (std::filesystem::is_regular_file(copyright, ec)) files.push_back(copyright);
    }
    std::sort(files.begin(), files.end());
    std::string all;
    for (const auto& f : files) {
      if (all.size() >= kCorpusBytes) break;
      all += read_file(f);
    }
    if (all.empty()) all = "The quick brown fox jumps over the lazy dog. ";
    std::string out;
    while (out.size() < kCorpusBytes) out += all;
    return out;
  }();
  return text;
}

// English paragraphs interleaved with Chinese, Japanese, Russian, Arabic, Hindi, code and emoji.
const std::string& mixed_corpus() {
  static const std::string text = [] {
    const char* snippets[] = {
        "自然语言处理是人工智能的一个重要分支，研究如何让计算机理解和生成人类语言。",
        "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。",
        "Машинное обучение позволяет компьютерам учиться на данных без явного программирования.",
        "الذكاء الاصطناعي يغير الطريقة التي نعمل بها ونتواصل.",
        "कृत्रिम बुद्धिमत्ता कंप्यूटर विज्ञान की एक शाखा है।",
        "def encode(self, text):\n    return [self.vocab[t] for t in text.split()]\n",
        "Ünïcödé façade naïve café — “quotes” ‘and’ … 😀👍🏽🚀 ✓ ∑ ∞ ≤ "
        "≥",
        "한국어 텍스트도 포함되어 있습니다. 숫자 12345 와 67.89",
    };
    const std::string& en = english_corpus();
    std::string out;
    size_t pos = 0;
    size_t k = 0;
    while (out.size() < kCorpusBytes) {
      out.append(en, pos, 700);
      pos = (pos + 700) % (en.size() - 700);
      out += snippets[k++ % std::size(snippets)];
    }
    return out;
  }();
  return text;
}

void run(benchmark::State& state, const std::string& text) {
  const pagoda::Tokenizer* tok = qwen3();
  if (tok == nullptr) {
    state.SkipWithError("tests/data/qwen3-tokenizer missing: run tools/fetch_test_data.sh");
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] =
      static_cast<double>(text.size()) / static_cast<double>(tokens);
}

void BM_Qwen3EncodeEnglish(benchmark::State& state) { run(state, english_corpus()); }
void BM_Qwen3EncodeMixed(benchmark::State& state) { run(state, mixed_corpus()); }

void BM_Qwen3Decode(benchmark::State& state) {
  const pagoda::Tokenizer* tok = qwen3();
  if (tok == nullptr) {
    state.SkipWithError("tests/data/qwen3-tokenizer missing: run tools/fetch_test_data.sh");
    return;
  }
  const auto ids = tok->encode(mixed_corpus());
  for (auto _ : state) benchmark::DoNotOptimize(tok->decode(ids).size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * mixed_corpus().size()));
}

BENCHMARK(BM_Qwen3EncodeEnglish)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Qwen3EncodeMixed)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Qwen3Decode)->Unit(benchmark::kMillisecond);

}  // namespace
