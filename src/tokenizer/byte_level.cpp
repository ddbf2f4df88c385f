#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace pagoda::byte_level {

namespace {

constexpr uint32_t kMaxCodepoint = 256 + 68;  // the shifted bytes end below U+0144

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, kMaxCodepoint> to_byte{};  // -1: not in the alphabet

  Tables() {
    // Printable Latin-1 bytes stand for themselves; the rest are shifted to U+0100 and up in byte
    // order, which is how GPT-2 built the table.
    uint32_t shifted = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? b : shifted++;
    }
    to_byte.fill(-1);
    for (uint32_t b = 0; b < 256; ++b) {
      utf8::append(to_utf8[b], to_cp[b]);
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return tables().to_cp[b]; }

std::string_view byte_to_utf8(uint8_t b) { return tables().to_utf8[b]; }

std::string encode(std::string_view raw) {
  const Tables& t = tables();
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out.append(t.to_utf8[static_cast<uint8_t>(c)]);
  return out;
}

bool decode(std::string_view token, std::string& out) {
  const Tables& t = tables();
  const size_t mark = out.size();
  size_t i = 0;
  while (i < token.size()) {
    const utf8::Step st = utf8::next(token, i);
    if (st.kind != utf8::StepKind::kValid || st.cp >= kMaxCodepoint || t.to_byte[st.cp] < 0) {
      out.resize(mark);
      return false;
    }
    out.push_back(static_cast<char>(t.to_byte[st.cp]));
    i += st.len;
  }
  return true;
}

}  // namespace pagoda::byte_level
