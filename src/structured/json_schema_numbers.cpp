#include "structured/json_schema_numbers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include "core/error.h"

namespace pagoda::structured {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("json schema: " + what); }
[[noreturn]] void empty_fail(const std::string& what) { throw EmptySchema("json schema: " + what); }

// Unbounded sides stop at 16 integer digits, as the plain json-int rule does (or at the bound's
// own length when that is longer).
constexpr size_t kFreeDigits = 16;
// Values the enumeration of multiples may list.
constexpr int64_t kMaxEnumerated = 2000;
// A multipleOf up to this is a remainder automaton of that many rules.
constexpr int64_t kMaxModulus = 200;
// Edges of a fractional range: at most this many significant digits, so each decimal written
// reads back as a distinct double on the right side of the bound.
constexpr size_t kExactDigits = 15;

// --- non-negative integer magnitudes as digit strings without leading zeros ---

int cmp_mag(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}

std::string strip_zeros(std::string s) {
  const size_t i = s.find_first_not_of('0');
  return i == std::string::npos ? "0" : s.substr(i);
}

std::string inc_mag(std::string s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '9') {
      ++s[i];
      return s;
    }
    s[i] = '0';
  }
  return "1" + s;
}

std::string dec_mag(std::string s) {  // s > 0
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '0') {
      --s[i];
      return strip_zeros(s);
    }
    s[i] = '9';
  }
  return "0";
}

// A signed integer.
struct Int {
  bool neg = false;
  std::string mag = "0";
};

int cmp_int(const Int& a, const Int& b) {
  const bool an = a.neg && a.mag != "0", bn = b.neg && b.mag != "0";
  if (an != bn) return an ? -1 : 1;
  return an ? -cmp_mag(a.mag, b.mag) : cmp_mag(a.mag, b.mag);
}

Int add_one(Int v) {
  if (v.neg && v.mag != "0") {
    v.mag = dec_mag(v.mag);
    if (v.mag == "0") v.neg = false;
    return v;
  }
  return {false, inc_mag(v.mag)};
}

Int sub_one(Int v) {
  if (!v.neg && v.mag != "0") return {false, dec_mag(v.mag)};
  return {true, inc_mag(v.mag)};
}

Int ceil_int(const Decimal& d) {
  Int v{d.neg, d.int_part};
  if (!d.is_integer() && !d.neg) v.mag = inc_mag(v.mag);
  if (v.mag == "0") v.neg = false;
  return v;
}

Int floor_int(const Decimal& d) {
  Int v{d.neg, d.int_part};
  if (!d.is_integer() && d.neg) v.mag = inc_mag(v.mag);
  if (v.mag == "0") v.neg = false;
  return v;
}

bool to_i64(const Int& v, int64_t& out) {
  if (v.mag.size() > 18) return false;
  out = std::stoll(v.mag);
  if (v.neg) out = -out;
  return true;
}

std::string lit(const std::string& s) { return "\"" + s + "\""; }

std::string digits_rule(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

std::string digit_class(char a, char b) {
  return a == b ? lit(std::string(1, a)) : std::string("[") + a + "-" + b + "]";
}

// Digit strings of one length from a to b (leading zeros kept: fraction digits use this too).
std::string fixed_range(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  const std::string prefix = a.substr(0, i);
  if (i == a.size()) return lit(prefix);
  const std::string ra = a.substr(i + 1), rb = b.substr(i + 1);
  const size_t m = ra.size();
  const bool ra_zero = ra.find_first_not_of('0') == std::string::npos;
  const bool rb_nine = rb.find_first_not_of('9') == std::string::npos;
  std::vector<std::string> alts;
  if (!ra_zero) alts.push_back(lit(std::string(1, a[i])) + " " + fixed_range(ra, std::string(m, '9')));
  const char mid_lo = ra_zero ? a[i] : static_cast<char>(a[i] + 1);
  const char mid_hi = rb_nine ? b[i] : static_cast<char>(b[i] - 1);
  if (mid_lo <= mid_hi) alts.push_back(digit_class(mid_lo, mid_hi) + (m ? " " + digits_rule(m) : ""));
  if (!rb_nine) alts.push_back(lit(std::string(1, b[i])) + " " + fixed_range(std::string(m, '0'), rb));
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  if (alts.size() > 1) out = "(" + out + ")";
  return prefix.empty() ? out : lit(prefix) + " " + out;
}

// Magnitudes lo..hi written without leading zeros.
std::string mag_range(const std::string& lo, const std::string& hi) {
  std::vector<std::string> alts;
  for (size_t len = lo.size(); len <= hi.size(); ++len) {
    const std::string a = len == lo.size() ? lo : "1" + std::string(len - 1, '0');
    const std::string b = len == hi.size() ? hi : std::string(len, '9');
    alts.push_back(fixed_range(a, b));
  }
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  return alts.size() > 1 ? "(" + out + ")" : out;
}

// Integers lo..hi (lo <= hi).
std::string int_range(const Int& lo, const Int& hi) {
  std::vector<std::string> alts;
  if (cmp_int(lo, Int{}) < 0) {
    const std::string far = lo.mag;
    const std::string near = cmp_int(hi, Int{}) < 0 ? hi.mag : "1";
    alts.push_back("\"-\" " + mag_range(near, far));
  }
  if (cmp_int(hi, Int{}) >= 0) alts.push_back(mag_range(cmp_int(lo, Int{}) > 0 ? lo.mag : "0", hi.mag));
  return alts.size() > 1 ? "(" + alts[0] + " | " + alts[1] + ")" : alts[0];
}

std::string nines(size_t n) { return std::string(n, '9'); }

struct IntBounds {
  Int lo, hi;
};

// The integer interval the bounds admit, unbounded sides capped at kFreeDigits digits.
IntBounds integer_interval(const NumericBounds& b) {
  std::optional<Int> lo, hi;
  if (b.lo) lo = b.lo_exclusive && b.lo->is_integer() ? add_one(ceil_int(*b.lo)) : ceil_int(*b.lo);
  if (b.hi) hi = b.hi_exclusive && b.hi->is_integer() ? sub_one(floor_int(*b.hi)) : floor_int(*b.hi);
  if (!lo) lo = Int{true, nines(std::max(kFreeDigits, hi ? hi->mag.size() : 0))};
  if (!hi) hi = Int{false, nines(std::max(kFreeDigits, lo->mag.size()))};
  if (cmp_int(*lo, *hi) > 0) empty_fail("the bounds minimum/maximum (with exclusiveMinimum/exclusiveMaximum) admit no integer");
  return {*lo, *hi};
}

Int as_int(const Decimal& d) { return Int{d.neg, d.int_part}; }

// Integers in [lo, hi] that are multiples of k.
std::string multiples(const NumericBounds& b, const Decimal& k, const std::string& prefix, std::string& rules) {
  if (!k.is_integer() || k.neg || k.is_zero()) fail("multipleOf must be a positive number");
  if (k.int_part == "1") return int_range(integer_interval(b).lo, integer_interval(b).hi);
  int64_t kv = 0;
  const bool k_small = to_i64(as_int(k), kv);
  if (b.lo && b.hi && k_small) {
    const IntBounds r = integer_interval(b);
    int64_t lo = 0, hi = 0;
    if (to_i64(r.lo, lo) && to_i64(r.hi, hi)) {
      // Listed when few: the first multiple at or above lo, then every k-th.
      int64_t first = lo % kv == 0 ? lo : lo + (kv - ((lo % kv) + kv) % kv);
      if (first > hi) empty_fail("no multiple of multipleOf lies within minimum/maximum");
      if ((hi - first) / kv < kMaxEnumerated) {
        std::string alts;
        for (int64_t v = first; v <= hi; v += kv) alts += (alts.empty() ? "" : " | ") + lit(std::to_string(v));
        return "(" + alts + ")";
      }
    }
  }
  // A remainder automaton for the unbounded cases, which is every multiple written in decimal.
  if (!k_small || kv > kMaxModulus)
    fail("multipleOf " + k.int_part + " over a wide range: only divisors up to " + std::to_string(kMaxModulus) +
         ", or ranges of up to " + std::to_string(kMaxEnumerated) + " multiples, are enforced");
  if (b.hi) fail("multipleOf with a maximum spanning more than " + std::to_string(kMaxEnumerated) + " multiples is not enforced; narrow the range");
  const bool allow_zero = !b.lo || compare(*b.lo, Decimal{}) < 0 || (b.lo->is_zero() && !b.lo_exclusive);
  const bool allow_neg = !b.lo;
  if (b.lo && compare(*b.lo, k) > 0)
    fail("multipleOf with a minimum above the divisor is not enforced; use a minimum of 0 or at most multipleOf");
  // r<k>_<j>: the digits read so far leave remainder j; the number may end only at remainder 0.
  const std::string base = prefix + "mod" + std::to_string(kv) + "-";
  if (rules.find(base + "0 ::=") == std::string::npos) {
    for (int64_t j = 0; j < kv; ++j) {
      std::string alts = j == 0 ? "\"\"" : "";
      for (int d = 0; d <= 9; ++d)
        alts += (alts.empty() ? "" : " | ") + lit(std::to_string(d)) + " " + base + std::to_string((10 * j + d) % kv);
      rules += base + std::to_string(j) + " ::= " + alts + "\n";
    }
  }
  std::string first;
  for (int d = 1; d <= 9; ++d) first += (first.empty() ? "" : " | ") + lit(std::to_string(d)) + " " + base + std::to_string(d % kv);
  std::string expr = "(" + first + ")";
  if (allow_neg) expr = "\"-\"? " + expr;
  if (allow_zero) expr = "(\"0\" | " + expr + ")";
  return expr;
}

// multipleOf a fraction 1/q (0.01, 0.05, 0.25 ...): integers, which are multiples of it. Within
// ±kFractionRange, and only if a validator dividing in doubles (value / multipleOf, the quotient
// checked for being integral, as python-jsonschema does) finds each of them a multiple too: that
// is checked here for every integer written.
constexpr int64_t kFractionRange = 99999;
std::string integer_multiples_of_fraction(const NumericBounds& b) {
  const Decimal& k = *b.multiple_of;
  const std::string text = (k.int_part == "0" ? "" : k.int_part) + k.frac;
  const std::string shown = k.int_part + "." + k.frac;
  auto refuse = [&]() -> std::string {
    fail("multipleOf " + shown + " is enforced only where its inverse is an integer (0.01, 0.05, 0.25 ...): "
         "use such a step or scale the value to an integer");
  };
  if (k.frac.size() > 15 || strip_zeros(text).size() > 15) return refuse();
  // k = m / 10^f; every integer is a multiple of k iff m divides 10^f.
  const int64_t m = std::stoll(strip_zeros(text));
  int64_t pow10 = 1 % m;
  for (size_t i = 0; i < k.frac.size(); ++i) pow10 = (pow10 * 10) % m;
  if (pow10 != 0) return refuse();
  NumericBounds ib = b;
  ib.multiple_of.reset();
  IntBounds r = integer_interval(ib);
  const Int lim_lo{true, std::to_string(kFractionRange)}, lim_hi{false, std::to_string(kFractionRange)};
  if (cmp_int(r.lo, lim_lo) < 0) r.lo = lim_lo;
  if (cmp_int(r.hi, lim_hi) > 0) r.hi = lim_hi;
  if (cmp_int(r.lo, r.hi) > 0) fail("multipleOf " + shown + ": the range holds no integer within ±" + std::to_string(kFractionRange));
  int64_t lo = 0, hi = 0;
  to_i64(r.lo, lo);
  to_i64(r.hi, hi);
  const double kd = std::strtod(shown.c_str(), nullptr);
  for (int64_t v = lo; v <= hi; ++v) {
    const double q = static_cast<double>(v) / kd;
    if (q != std::floor(q)) return refuse();
  }
  return int_range(r.lo, r.hi);
}

size_t sig_digits(const Decimal& d) {
  const std::string all = (d.int_part == "0" ? "" : d.int_part) + d.frac;
  const size_t first = all.find_first_not_of('0');
  return first == std::string::npos ? 0 : all.size() - first;
}

// A non-negative magnitude scaled by 10^d as an integer digit string.
std::string scaled(const Decimal& m, size_t d) {
  return strip_zeros(m.int_part + m.frac + std::string(d - m.frac.size(), '0'));
}

// Fraction digits of the grid the edges are written on: the bounds' own, one more beside an
// exclusive bound (so that (0, 1) holds 0.1 ... 0.9).
size_t grid_digits(const Decimal& lo, bool lo_x, const Decimal& hi, bool hi_x) {
  return std::max(lo.frac.size(), hi.frac.size()) + ((lo_x || hi_x) ? 1 : 0);
}

// Decimals with magnitude in [lo, hi] (exclusive flags), 0 <= lo <= hi: "" when none is, nullopt
// when the edges need more digits than a double compares exactly.
std::optional<std::string> magnitude_range(const Decimal& lo, bool lo_x, const Decimal& hi, bool hi_x) {
  const size_t d = grid_digits(lo, lo_x, hi, hi_x);
  std::string P = scaled(lo, d), Q = scaled(hi, d);
  if (lo_x) P = inc_mag(P);
  if (hi_x) {
    if (Q == "0") return "";
    Q = dec_mag(Q);
  }
  if (cmp_mag(P, Q) > 0) return "";
  auto split = [d](const std::string& n, std::string& q, std::string& f) {
    const std::string padded = n.size() <= d ? std::string(d + 1 - n.size(), '0') + n : n;
    q = strip_zeros(padded.substr(0, padded.size() - d));
    f = padded.substr(padded.size() - d);
  };
  std::string qP, fP, qQ, fQ;
  split(P, qP, fP);
  split(Q, qQ, fQ);
  if (qQ.size() + d > kExactDigits + 1 || (d > 0 && qQ.size() + d > kExactDigits)) return std::nullopt;
  const std::string any_frac = "(\".\" [0-9]{1,16})?";
  std::vector<std::string> alts;
  if (d == 0) {
    alts.push_back(mag_range(qP, qQ));
    if (cmp_mag(qP, qQ) < 0) alts.push_back(mag_range(qP, dec_mag(qQ)) + " \".\" [0-9]{1,16}");
  } else if (qP == qQ) {
    alts.push_back(lit(qP + ".") + " " + fixed_range(fP, fQ));
    if (fP.find_first_not_of('0') == std::string::npos) alts.push_back(lit(qP));
  } else {
    alts.push_back(lit(qP + ".") + " " + fixed_range(fP, std::string(d, '9')));
    if (fP.find_first_not_of('0') == std::string::npos) alts.push_back(lit(qP));
    const std::string mid_lo = inc_mag(qP);
    if (cmp_mag(mid_lo, qQ) < 0) alts.push_back(mag_range(mid_lo, dec_mag(qQ)) + " " + any_frac);
    alts.push_back(lit(qQ) + " (\".\" " + fixed_range(std::string(d, '0'), fQ) + ")?");
  }
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  return "(" + out + ")";
}

Decimal negate(Decimal d) {
  d.neg = !d.neg && !d.is_zero();
  return d;
}

}  // namespace

std::optional<Decimal> parse_decimal(const std::string& text) {
  size_t i = 0;
  Decimal d;
  if (i < text.size() && text[i] == '-') d.neg = true, ++i;
  std::string digits;
  long point = -1;
  for (; i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (point >= 0) return std::nullopt;
      point = static_cast<long>(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = static_cast<long>(digits.size());
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const size_t start = i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (i == text.size() || text.size() - start > 5) return std::nullopt;
    const long e = std::stol(text.substr(start));
    if (e > 400 || e < -400) return std::nullopt;
    point += e;
  }
  if (i != text.size()) return std::nullopt;
  if (point < 0) digits = std::string(static_cast<size_t>(-point), '0') + digits, point = 0;
  if (point > static_cast<long>(digits.size())) digits += std::string(static_cast<size_t>(point) - digits.size(), '0');
  d.int_part = strip_zeros(digits.substr(0, static_cast<size_t>(point)));
  d.frac = digits.substr(static_cast<size_t>(point));
  while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
  if (d.is_zero()) d.neg = false;
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  int c = cmp_mag(a.int_part, b.int_part);
  if (c == 0) {
    const size_t n = std::max(a.frac.size(), b.frac.size());
    const std::string fa = a.frac + std::string(n - a.frac.size(), '0'), fb = b.frac + std::string(n - b.frac.size(), '0');
    c = fa < fb ? -1 : (fa == fb ? 0 : 1);
  }
  return a.neg ? -c : c;
}

std::string integer_range_gbnf(const NumericBounds& b, const std::string& prefix, std::string& rules) {
  if (b.multiple_of) return multiples(b, *b.multiple_of, prefix, rules);
  const IntBounds r = integer_interval(b);
  return int_range(r.lo, r.hi);
}

std::string number_range_gbnf(const NumericBounds& b, const std::string& prefix, std::string& rules) {
  if (b.multiple_of) {
    if (!b.multiple_of->is_integer()) return integer_multiples_of_fraction(b);
    return multiples(b, *b.multiple_of, prefix, rules);
  }
  if (!b.lo && !b.hi) return "json-number";
  if (b.lo && b.hi) {
    const int c = compare(*b.lo, *b.hi);
    if (c > 0 || (c == 0 && (b.lo_exclusive || b.hi_exclusive)))
      empty_fail("the bounds minimum/maximum (with exclusiveMinimum/exclusiveMaximum) admit no number");
  }
  // An unbounded side stops where its edge still has kExactDigits digits with the grid's fraction.
  const size_t frac_digits = std::max(b.lo ? b.lo->frac.size() : 0, b.hi ? b.hi->frac.size() : 0) + 1;
  const Decimal cap = *parse_decimal("1" + std::string(kExactDigits > frac_digits + 1 ? kExactDigits - frac_digits - 1 : 1, '0'));
  auto exact = [](const std::optional<Decimal>& d) { return !d || sig_digits(*d) <= kExactDigits; };
  std::vector<std::string> alts;
  bool ok = exact(b.lo) && exact(b.hi);
  // Non-negative part: [max(lo, 0), hi]; negative part: -(0 or -hi .. -lo].
  const Decimal zero;
  if (ok && (!b.hi || compare(*b.hi, zero) >= 0)) {
    const bool from_zero = !b.lo || compare(*b.lo, zero) < 0;
    const Decimal lo = from_zero ? zero : *b.lo;
    const bool lo_x = !from_zero && b.lo_exclusive;
    const Decimal hi = b.hi ? *b.hi : cap;
    if (compare(lo, hi) <= 0) {
      const auto pos = magnitude_range(lo, lo_x, hi, b.hi && b.hi_exclusive);
      if (!pos) ok = false;
      else if (!pos->empty()) alts.push_back(*pos);
    }
  }
  if (ok && (!b.lo || compare(*b.lo, zero) < 0)) {
    const bool to_zero = !b.hi || compare(*b.hi, zero) >= 0;
    const Decimal lo = to_zero ? zero : negate(*b.hi);
    const bool lo_x = to_zero ? true : b.hi_exclusive;
    const Decimal hi = b.lo ? negate(*b.lo) : cap;
    if (compare(lo, hi) <= 0) {
      const auto neg = magnitude_range(lo, lo_x, hi, b.lo && b.lo_exclusive);
      if (!neg) ok = false;
      else if (!neg->empty()) alts.push_back("\"-\" " + *neg);
    }
  }
  if (ok && alts.empty()) empty_fail("the bounds minimum/maximum (with exclusiveMinimum/exclusiveMaximum) admit no number");
  if (!ok) {
    // Bounds too precise (or too large) for decimals to be compared exactly as doubles:
    // integers only, which validators compare exactly.
    return integer_range_gbnf(b, prefix, rules);
  }
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  return alts.size() > 1 ? "(" + out + ")" : out;
}

}  // namespace pagoda::structured
