// NFC: our shortcut (copying stretches that NFC cannot change) must equal utf8proc on the whole
// text.
#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>

#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

std::string whole_nfc(const std::string& s) {
  utf8proc_uint8_t* out = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  std::string r(reinterpret_cast<char*>(out));
  std::free(out);
  return r;
}

TEST(Nfc, KnownCompositions) {
  EXPECT_EQ(nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(nfc("A\u030a"), "\u00c5");
  EXPECT_EQ(nfc("\u212b"), "\u00c5");              // Angstrom sign is a singleton
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");  // Hangul jamo L V T
  EXPECT_EQ(nfc("\uac00\u11a8"), "\uac01");        // LV syllable + T
  EXPECT_EQ(nfc("a\u0323\u0302x"),
            "\u1ead"
            "x");                 // reordering then composition
  EXPECT_EQ(nfc("\u037e"), ";");  // Greek question mark
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
}

TEST(Nfc, ShortcutEqualsWholeTextNormalization) {
  std::mt19937 rng(99);
  const std::vector<uint32_t> pool = {
      'a',    'e',    'A',    ' ',    'x',    0xe9,    0x301,  0x302,  0x323,  0x30a,  0x212b,
      0x1100, 0x1161, 0x11a8, 0xac00, 0x4e00, 0x3099,  0x304b, 0x0915, 0x093c, 0x0627, 0x0653,
      0x037e, 0x2000, 0x0410, 0x0306, 0xff21, 0x1f600, 0x2019, 0x3000, 0x00c5};
  for (int round = 0; round < 5000; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) utf8::append(s, pool[rng() % pool.size()]);
    ASSERT_EQ(nfc(s), whole_nfc(s)) << s;
  }
}

// The characters the shortcut copies must be NFC by themselves and of combining class 0.
TEST(Nfc, InertRangesAreStable) {
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x20, 0x2FF},    {0x400, 0x482},   {0x2010, 0x2027}, {0x3000, 0x3029},
      {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xFF01, 0xFF5E}};
  for (auto [lo, hi] : ranges) {
    for (uint32_t cp = lo; cp <= hi; ++cp) {
      std::string s;
      utf8::append(s, cp);
      ASSERT_EQ(whole_nfc(s), s) << std::hex << cp;
      ASSERT_EQ(utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class, 0) << cp;
      // Nothing before it may compose with it.
      ASSERT_EQ(whole_nfc("a" + s), "a" + s) << std::hex << cp;
    }
  }
}

}  // namespace
}  // namespace pagoda
