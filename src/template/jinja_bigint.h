// Python int semantics beyond 64 bits for the chat-template interpreter: a template literal or a
// request value such as 18446744073709551615 or 10**30 prints, compares and adds exactly as Python
// does. Sizes stop at Python's own limit for int <-> str conversion (4300 decimal digits), so
// nothing here grows without bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::jinja {

class BigInt {
 public:
  static constexpr size_t kMaxDigits = 4300;  // sys.int_info.default_max_str_digits

  BigInt() = default;  // zero
  explicit BigInt(int64_t v);
  static BigInt from_unsigned(uint64_t magnitude, bool negative = false);
  // Digits in a base from 2 to 36 (no sign, prefix or underscores); nullopt on a bad digit.
  // Throws pagoda::Error when the value has more than kMaxDigits decimal digits.
  static std::optional<BigInt> parse(std::string_view digits, int base, bool negative = false);
  // The integer a finite double with no fractional part holds, exactly.
  static BigInt from_double(double integral);

  bool negative() const { return neg_; }
  bool is_zero() const { return mag_.empty(); }
  bool is_odd() const { return !mag_.empty() && (mag_[0] & 1u) != 0; }
  bool fits_int64() const;
  int64_t to_int64() const;  // only when fits_int64()
  std::string to_string() const;
  // float(n): correctly rounded; throws pagoda::Error("int too large to convert to float").
  double to_double() const;
  // -1, 0 or 1.
  int compare(const BigInt& other) const;

  BigInt operator-() const;
  friend BigInt operator+(const BigInt& a, const BigInt& b);
  friend BigInt operator-(const BigInt& a, const BigInt& b);
  friend BigInt operator*(const BigInt& a, const BigInt& b);
  // Python's floor division and modulo (the remainder takes the divisor's sign), exact; throws
  // pagoda::Error on a zero divisor.
  static std::pair<BigInt, BigInt> divmod(const BigInt& a, const BigInt& b);
  // a / b as Python's int true division: the exact quotient rounded once to a double; throws
  // pagoda::Error on a zero divisor and when the result is beyond the double range.
  static double true_divide(const BigInt& a, const BigInt& b);
  // base ** exponent, exact; throws pagoda::Error when the result would pass kMaxDigits.
  static BigInt pow(const BigInt& base, const BigInt& exponent);

 private:
  static constexpr uint32_t kBase = 1000000000;  // 10^9 per limb
  bool neg_ = false;
  std::vector<uint32_t> mag_;  // least significant limb first, no leading zero limbs; empty = 0

  void trim();
  void check_size() const;  // throws past kMaxDigits
  size_t decimal_digits() const;
  double log2_magnitude() const;  // about log2(|n|), for n != 0
  static int compare_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
  static std::vector<uint32_t> add_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
  static std::vector<uint32_t> sub_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
  static BigInt signed_sum(const BigInt& a, const BigInt& b, bool negate_b);
  static void long_divide(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, std::vector<uint32_t>& q,
                          std::vector<uint32_t>& rem);
};

}  // namespace pagoda::jinja
