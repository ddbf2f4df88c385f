#include "template/jinja_bigint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "core/error.h"

namespace pagoda::jinja {
namespace {

constexpr size_t kMaxLimbs = (BigInt::kMaxDigits + 8) / 9;
__extension__ using u128 = unsigned __int128;  // GCC and Clang have it; -Wpedantic does not know

[[noreturn]] void too_many_digits() {
  throw Error("integer beyond " + std::to_string(BigInt::kMaxDigits) +
              " digits (Python's limit for integer string conversion)");
}

// mag = mag * mult + add, for mult, add < 10^9.
void mul_small_add(std::vector<uint32_t>& mag, uint32_t mult, uint32_t add) {
  uint64_t carry = add;
  for (uint32_t& limb : mag) {
    const uint64_t t = static_cast<uint64_t>(limb) * mult + carry;
    limb = static_cast<uint32_t>(t % 1000000000u);
    carry = t / 1000000000u;
  }
  while (carry != 0) {
    mag.push_back(static_cast<uint32_t>(carry % 1000000000u));
    carry /= 1000000000u;
  }
}

// The magnitude as an unsigned 128-bit number when it has at most three limbs.
std::optional<u128> small_mag(const std::vector<uint32_t>& mag) {
  if (mag.size() > 3) return std::nullopt;
  u128 v = 0;
  for (size_t k = mag.size(); k-- > 0;) v = v * 1000000000u + mag[k];
  return v;
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  const char l = static_cast<char>(c | 0x20);
  if (l >= 'a' && l <= 'z') return l - 'a' + 10;
  return 99;
}

}  // namespace

BigInt::BigInt(int64_t v) {
  const uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  *this = from_unsigned(mag, v < 0);
}

BigInt BigInt::from_unsigned(uint64_t magnitude, bool negative) {
  BigInt r;
  while (magnitude != 0) {
    r.mag_.push_back(static_cast<uint32_t>(magnitude % kBase));
    magnitude /= kBase;
  }
  r.neg_ = negative && !r.mag_.empty();
  return r;
}

std::optional<BigInt> BigInt::parse(std::string_view digits, int base, bool negative) {
  if (digits.empty()) return std::nullopt;
  for (const char c : digits)
    if (digit_value(c) >= base) return std::nullopt;
  while (digits.size() > 1 && digits[0] == '0') digits.remove_prefix(1);
  // Refuse early what is surely too long, so that the quadratic loop below stays small.
  const double digits_per_char = std::log10(static_cast<double>(base));
  if (static_cast<double>(digits.size()) * digits_per_char > static_cast<double>(kMaxDigits) + 1) too_many_digits();
  BigInt r;
  if (base == 10) {
    // Nine decimal digits at a time.
    size_t k = 0;
    const size_t first = digits.size() % 9 == 0 ? 9 : digits.size() % 9;
    for (size_t len = first; k < digits.size(); k += len, len = 9) {
      uint32_t chunk = 0, mult = 1;
      for (size_t i = k; i < k + len; ++i) {
        chunk = chunk * 10 + static_cast<uint32_t>(digits[i] - '0');
        mult *= 10;
      }
      mul_small_add(r.mag_, mult, chunk);
    }
  } else {
    for (const char c : digits) mul_small_add(r.mag_, static_cast<uint32_t>(base), static_cast<uint32_t>(digit_value(c)));
  }
  r.neg_ = negative;
  r.trim();
  r.check_size();
  return r;
}

BigInt BigInt::from_double(double integral) {
  char buf[400];  // the largest double has 309 digits
  std::snprintf(buf, sizeof buf, "%.0f", integral);
  const std::string_view text(buf);
  const bool neg = !text.empty() && text[0] == '-';
  return *parse(text.substr(neg ? 1 : 0), 10, neg);
}

void BigInt::trim() {
  while (!mag_.empty() && mag_.back() == 0) mag_.pop_back();
  if (mag_.empty()) neg_ = false;
}

size_t BigInt::decimal_digits() const {
  if (mag_.empty()) return 1;
  size_t n = (mag_.size() - 1) * 9;
  for (uint32_t top = mag_.back(); top != 0; top /= 10) ++n;
  return n;
}

void BigInt::check_size() const {
  if (mag_.size() > kMaxLimbs || decimal_digits() > kMaxDigits) too_many_digits();
}

bool BigInt::fits_int64() const {
  const std::optional<u128> v = small_mag(mag_);
  if (!v) return false;
  const u128 limit = static_cast<u128>(INT64_MAX) + (neg_ ? 1 : 0);
  return *v <= limit;
}

int64_t BigInt::to_int64() const {
  const uint64_t v = static_cast<uint64_t>(*small_mag(mag_));
  return neg_ ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

std::string BigInt::to_string() const {
  if (mag_.empty()) return "0";
  std::string out = neg_ ? "-" : "";
  out += std::to_string(mag_.back());
  char buf[16];
  for (size_t k = mag_.size() - 1; k-- > 0;) {
    std::snprintf(buf, sizeof buf, "%09u", static_cast<unsigned>(mag_[k]));
    out += buf;
  }
  return out;
}

double BigInt::to_double() const {
  // strtod rounds correctly (round half to even), as Python's int.__float__ does.
  const std::string text = to_string();
  errno = 0;
  const double d = std::strtod(text.c_str(), nullptr);
  if (std::isinf(d) || errno == ERANGE) throw Error("int too large to convert to float");
  return d;
}

int BigInt::compare_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t k = a.size(); k-- > 0;)
    if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

int BigInt::compare(const BigInt& other) const {
  if (neg_ != other.neg_) return neg_ ? -1 : 1;
  const int c = compare_mag(mag_, other.mag_);
  return neg_ ? -c : c;
}

std::vector<uint32_t> BigInt::add_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out;
  out.reserve(std::max(a.size(), b.size()) + 1);
  uint32_t carry = 0;
  for (size_t k = 0; k < a.size() || k < b.size(); ++k) {
    uint32_t t = carry + (k < a.size() ? a[k] : 0) + (k < b.size() ? b[k] : 0);
    carry = t >= kBase ? 1 : 0;
    out.push_back(t - carry * kBase);
  }
  if (carry) out.push_back(carry);
  return out;
}

// a - b for |a| >= |b|.
std::vector<uint32_t> BigInt::sub_mag(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out(a.size());
  int64_t borrow = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    int64_t t = static_cast<int64_t>(a[k]) - borrow - (k < b.size() ? b[k] : 0);
    borrow = t < 0 ? 1 : 0;
    out[k] = static_cast<uint32_t>(t + borrow * kBase);
  }
  return out;
}

BigInt BigInt::signed_sum(const BigInt& a, const BigInt& b, bool negate_b) {
  const bool bneg = b.mag_.empty() ? false : (b.neg_ != negate_b);
  BigInt r;
  if (a.neg_ == bneg) {
    r.mag_ = add_mag(a.mag_, b.mag_);
    r.neg_ = a.neg_;
  } else if (compare_mag(a.mag_, b.mag_) >= 0) {
    r.mag_ = sub_mag(a.mag_, b.mag_);
    r.neg_ = a.neg_;
  } else {
    r.mag_ = sub_mag(b.mag_, a.mag_);
    r.neg_ = bneg;
  }
  r.trim();
  r.check_size();
  return r;
}

BigInt BigInt::operator-() const {
  BigInt r = *this;
  r.neg_ = !r.mag_.empty() && !neg_;
  return r;
}

BigInt operator+(const BigInt& a, const BigInt& b) { return BigInt::signed_sum(a, b, false); }
BigInt operator-(const BigInt& a, const BigInt& b) { return BigInt::signed_sum(a, b, true); }

BigInt operator*(const BigInt& a, const BigInt& b) {
  if (a.is_zero() || b.is_zero()) return BigInt();
  // The product has at least na + nb - 1 limbs: refuse before doing the work.
  if (a.mag_.size() + b.mag_.size() - 1 > kMaxLimbs) too_many_digits();
  BigInt r;
  r.mag_.assign(a.mag_.size() + b.mag_.size(), 0);
  for (size_t i = 0; i < a.mag_.size(); ++i) {
    uint64_t carry = 0;
    for (size_t j = 0; j < b.mag_.size(); ++j) {
      const uint64_t t = r.mag_[i + j] + static_cast<uint64_t>(a.mag_[i]) * b.mag_[j] + carry;
      r.mag_[i + j] = static_cast<uint32_t>(t % BigInt::kBase);
      carry = t / BigInt::kBase;
    }
    r.mag_[i + b.mag_.size()] = static_cast<uint32_t>(carry);
  }
  r.neg_ = a.neg_ != b.neg_;
  r.trim();
  r.check_size();
  return r;
}

// Schoolbook division of magnitudes for a divisor of three or more limbs: one base-10^9 quotient
// digit per step, estimated from the leading limbs (off by at most a few, then corrected).
void BigInt::long_divide(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, std::vector<uint32_t>& q,
                         std::vector<uint32_t>& rem) {
  const size_t n = b.size();
  const double btop = static_cast<double>(b[n - 1]) * kBase + b[n - 2];
  q.assign(a.size(), 0);
  rem.clear();
  for (size_t k = a.size(); k-- > 0;) {
    rem.insert(rem.begin(), a[k]);  // rem = rem * base + a[k]
    while (!rem.empty() && rem.back() == 0) rem.pop_back();
    if (compare_mag(rem, b) < 0) continue;
    // rem < b * base, so rem has n or n + 1 limbs; compare its top with b's top two limbs.
    double rtop = 0;
    for (size_t i = rem.size(); i-- > n - 2;) rtop = rtop * kBase + rem[i];
    double est = std::floor(rtop / btop);
    uint32_t digit = est < 1 ? 1 : est >= kBase ? kBase - 1 : static_cast<uint32_t>(est);
    std::vector<uint32_t> prod = b;
    mul_small_add(prod, digit, 0);
    while (compare_mag(prod, rem) > 0) {
      --digit;
      prod = sub_mag(prod, b);
      while (!prod.empty() && prod.back() == 0) prod.pop_back();
    }
    for (std::vector<uint32_t> next = add_mag(prod, b); compare_mag(next, rem) <= 0; next = add_mag(prod, b)) {
      ++digit;
      prod = std::move(next);
    }
    rem = sub_mag(rem, prod);
    while (!rem.empty() && rem.back() == 0) rem.pop_back();
    q[k] = digit;
  }
}

std::pair<BigInt, BigInt> BigInt::divmod(const BigInt& a, const BigInt& b) {
  if (b.is_zero()) throw Error("integer division or modulo by zero");
  BigInt q, r;
  if (compare_mag(a.mag_, b.mag_) < 0) {
    r = a;
  } else {
    const std::optional<u128> d = small_mag(b.mag_);
    if (d && *d <= UINT64_MAX) {
      // Short division, most significant limb first; the remainder stays below d < 2^64.
      q.mag_.assign(a.mag_.size(), 0);
      u128 rem = 0;
      for (size_t k = a.mag_.size(); k-- > 0;) {
        rem = rem * kBase + a.mag_[k];
        q.mag_[k] = static_cast<uint32_t>(rem / *d);
        rem %= *d;
      }
      r = from_unsigned(static_cast<uint64_t>(rem), a.neg_);
    } else {
      long_divide(a.mag_, b.mag_, q.mag_, r.mag_);
      r.neg_ = a.neg_;
      r.trim();
    }
    q.neg_ = a.neg_ != b.neg_;
    q.trim();
  }
  // Truncated -> floored, as Python: the remainder takes the divisor's sign.
  if (!r.is_zero() && a.neg_ != b.neg_) {
    q = q - BigInt(1);
    r = r + b;
  }
  return {std::move(q), std::move(r)};
}

double BigInt::log2_magnitude() const {
  return std::log2(static_cast<double>(mag_.back())) + static_cast<double>(mag_.size() - 1) * std::log2(1e9);
}

double BigInt::true_divide(const BigInt& a, const BigInt& b) {
  if (b.is_zero()) throw Error("division by zero");
  const bool neg = a.neg_ != b.neg_;
  if (a.is_zero()) return neg ? -0.0 : 0.0;
  BigInt num = a, den = b;
  num.neg_ = den.neg_ = false;
  // Scale the dividend by 2^shift so that the integer quotient q has at least 55 bits; then the
  // fractional part only matters as "zero or not" (any value strictly between two integers of that
  // size rounds the same way), so q or q + 0.5, rounded once by strtod and scaled back, is exact.
  const int shift = std::max(0, static_cast<int>(std::ceil(57 + den.log2_magnitude() - num.log2_magnitude())));
  if (shift > 0) num = num * pow(BigInt(2), BigInt(shift));
  const auto [q, r] = divmod(num, den);
  const std::string text = q.to_string() + (r.is_zero() ? "" : ".5");
  const double mag = std::ldexp(std::strtod(text.c_str(), nullptr), -shift);
  if (std::isinf(mag)) throw Error("integer division result too large for a float");
  return neg ? -mag : mag;
}

BigInt BigInt::pow(const BigInt& base, const BigInt& exponent) {
  if (exponent.is_zero()) return BigInt(1);
  if (base.is_zero()) return BigInt();
  if (base.mag_.size() == 1 && base.mag_[0] == 1) return exponent.is_odd() ? base : BigInt(1);
  // |base| >= 2: 2 ** 14300 already has more than 4300 digits.
  if (!exponent.fits_int64() || exponent.to_int64() > 14300) too_many_digits();
  uint64_t e = static_cast<uint64_t>(exponent.to_int64());
  BigInt acc(1), sq = base;
  while (e > 0) {
    if (e & 1) acc = acc * sq;
    e >>= 1;
    if (e > 0) sq = sq * sq;
  }
  return acc;
}

}  // namespace pagoda::jinja
