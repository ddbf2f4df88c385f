// Python int arithmetic beyond 64 bits for the chat-template interpreter. Expected values are
// Python 3.11's (int, divmod, float(), int / int), written out by hand.
#include "template/jinja_bigint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "core/error.h"

namespace pagoda::jinja {
namespace {

BigInt big(const std::string& decimal) {
  const bool neg = !decimal.empty() && decimal[0] == '-';
  return *BigInt::parse(decimal.substr(neg ? 1 : 0), 10, neg);
}

std::string str(const BigInt& n) { return n.to_string(); }

TEST(JinjaBigInt, ParseAndPrint) {
  EXPECT_EQ(str(big("0")), "0");
  EXPECT_EQ(str(big("-0")), "0");
  EXPECT_EQ(str(big("000123")), "123");
  EXPECT_EQ(str(big("1000000000")), "1000000000");
  EXPECT_EQ(str(big("-123456789012345678901234567890")), "-123456789012345678901234567890");
  EXPECT_EQ(str(BigInt(INT64_MIN)), "-9223372036854775808");
  EXPECT_EQ(str(BigInt::from_unsigned(UINT64_MAX)), "18446744073709551615");
  EXPECT_EQ(str(*BigInt::parse(std::string(40, 'f'), 16)), "1461501637330902918203684832716283019655932542975");
  EXPECT_EQ(str(*BigInt::parse("777", 8)), "511");
  EXPECT_EQ(str(*BigInt::parse(std::string(70, '1'), 2)), "1180591620717411303423");
  EXPECT_FALSE(BigInt::parse("12a", 10).has_value());
  EXPECT_FALSE(BigInt::parse("", 10).has_value());
  EXPECT_FALSE(BigInt::parse("2", 2).has_value());
  // Python's limit for int <-> str conversion.
  EXPECT_EQ(big(std::string(4300, '9')).to_string().size(), 4300u);
  EXPECT_THROW(big(std::string(4301, '9')), Error);
  EXPECT_THROW(BigInt::parse(std::string(4000, 'f'), 16), Error);
}

TEST(JinjaBigInt, Int64Boundaries) {
  EXPECT_TRUE(BigInt(INT64_MAX).fits_int64());
  EXPECT_TRUE(BigInt(INT64_MIN).fits_int64());
  EXPECT_EQ(BigInt(INT64_MIN).to_int64(), INT64_MIN);
  EXPECT_FALSE((BigInt(INT64_MAX) + BigInt(1)).fits_int64());
  EXPECT_FALSE((BigInt(INT64_MIN) - BigInt(1)).fits_int64());
  EXPECT_TRUE((-(BigInt(INT64_MAX) + BigInt(1))).fits_int64());
  EXPECT_EQ(str(-BigInt(INT64_MIN)), "9223372036854775808");
}

TEST(JinjaBigInt, Arithmetic) {
  const BigInt a = big("123456789012345678901234567890123456789");
  const BigInt b = big("-98765432109876543210987654321");
  const BigInt c = BigInt::from_unsigned(UINT64_MAX) + BigInt(14);  // 2**64 + 13
  EXPECT_EQ(str(a + b), "123456788913580246791358024679135802468");
  EXPECT_EQ(str(a - b), "123456789111111111011111111101111111110");
  EXPECT_EQ(str(a * b), "-12193263113702179522618503273374485596336229233322374638011112635269");
  EXPECT_EQ(str(b - b), "0");
  EXPECT_FALSE((b - b).negative());
  auto [q1, r1] = BigInt::divmod(a, b);
  EXPECT_EQ(str(q1), "-1249999989");
  EXPECT_EQ(str(r1), "-38580246903858024690262345680");
  auto [q2, r2] = BigInt::divmod(-a, c);
  EXPECT_EQ(str(q2), "-6692605942763486913");
  EXPECT_EQ(str(r2), "904161659715874488");
  auto [q3, r3] = BigInt::divmod(a, -c);
  EXPECT_EQ(str(q3), "-6692605942763486913");
  EXPECT_EQ(str(r3), "-904161659715874488");
  const BigInt p3 = BigInt::pow(BigInt(3), BigInt(500)), p7 = BigInt::pow(BigInt(7), BigInt(100));
  auto [q4, r4] = BigInt::divmod(p3, p7);
  EXPECT_EQ(str(q4),
            "11241476538065262090520141446092930743018580454115809644111220293830790737026411651251414110528931175"
            "632015024873837878940186837610183085210798276054427946");
  EXPECT_EQ(str(r4), "1204253512422783957378962909312068963540723736861214357085225616702974881463758422055");
  EXPECT_THROW(BigInt::divmod(a, BigInt()), Error);
  EXPECT_THROW(BigInt::pow(BigInt(10), BigInt(4300)), Error);  // 4301 digits
  EXPECT_EQ(str(BigInt::pow(BigInt(-1), big("100000000000000000001"))), "-1");
  EXPECT_EQ(str(BigInt::pow(BigInt(0), BigInt(0))), "1");
}

TEST(JinjaBigInt, DivisionIdentityOnRandomOperands) {
  // q * b + r == a with r between 0 and b (exclusive) in b's sign, for operands of many sizes.
  std::mt19937_64 rng(7);
  auto random_big = [&](int limbs) {
    std::string digits = std::to_string(rng() % 9 + 1);
    for (int i = 0; i < limbs; ++i) digits += std::to_string(rng() % 1000000000 + 1000000000).substr(1);
    return big((rng() & 1 ? "-" : "") + digits);
  };
  for (int t = 0; t < 300; ++t) {
    const BigInt a = random_big(static_cast<int>(rng() % 40)), b = random_big(static_cast<int>(rng() % 20));
    auto [q, r] = BigInt::divmod(a, b);
    EXPECT_EQ((q * b + r).compare(a), 0) << str(a) << " / " << str(b);
    EXPECT_TRUE(r.is_zero() || r.negative() == b.negative()) << str(a) << " % " << str(b);
    EXPECT_LT((b.negative() ? -r : r).compare(b.negative() ? -b : b), 0);
  }
}

TEST(JinjaBigInt, FloatConversions) {
  EXPECT_EQ(BigInt::pow(BigInt(2), BigInt(1023)).to_double(), 0x1p1023);
  EXPECT_EQ((BigInt::pow(BigInt(2), BigInt(53)) + BigInt(1)).to_double(), 9007199254740992.0);  // ties to even
  EXPECT_EQ((BigInt::pow(BigInt(2), BigInt(53)) + BigInt(3)).to_double(), 9007199254740996.0);
  EXPECT_THROW(BigInt::pow(BigInt(10), BigInt(309)).to_double(), Error);
  EXPECT_EQ(str(BigInt::from_double(1e30)), "1000000000000000019884624838656");
  EXPECT_EQ(str(BigInt::from_double(-0x1p70)), "-1180591620717411303424");
  // int / int: the exact quotient rounded once.
  const BigInt a = big("123456789012345678901234567890123456789");
  const BigInt b = big("-98765432109876543210987654321");
  EXPECT_EQ(BigInt::true_divide(a, b), -1249999988.609375);
  EXPECT_EQ(BigInt::true_divide(BigInt::pow(BigInt(2), BigInt(100)), BigInt::from_unsigned(UINT64_MAX) + BigInt(2)),
            68719476736.0);
  EXPECT_EQ(BigInt::true_divide(BigInt::pow(BigInt(10), BigInt(308)) * BigInt(17), BigInt(10)), 1.7e308);
  EXPECT_EQ(BigInt::true_divide(BigInt(1), BigInt::pow(BigInt(3), BigInt(100))), 1.9403252174826328e-48);
  EXPECT_EQ(BigInt::true_divide(BigInt(0), BigInt(-5)), 0.0);
  EXPECT_TRUE(std::signbit(BigInt::true_divide(BigInt(0), BigInt(-5))));
  EXPECT_THROW(BigInt::true_divide(BigInt::pow(BigInt(10), BigInt(400)), BigInt(3)), Error);
  EXPECT_THROW(BigInt::true_divide(BigInt(1), BigInt()), Error);
}

}  // namespace
}  // namespace pagoda::jinja
