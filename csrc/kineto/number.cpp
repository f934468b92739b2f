// Numbers: lexing and the conversions the importer applies to them (int(), us_to_ns, str()).
#include <cstring>

#include "kineto/json.h"

namespace tbdtrace::kineto {

namespace {

using u128 = unsigned __int128;

// Accumulates decimal digits; sets overflow past uint64.
uint64_t digits_u64(const char* b, const char* e, bool& overflow) {
  uint64_t v = 0;
  if (e - b <= 19) {  // cannot overflow
    for (; b < e; ++b) v = v * 10 + static_cast<uint64_t>(*b - '0');
    return v;
  }
  for (; b < e; ++b)
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, static_cast<uint64_t>(*b - '0'), &v))
      overflow = true;
  return v;
}

constexpr u128 kI64Mag = static_cast<u128>(1) << 63;  // |INT64_MIN|

bool signed_out(bool neg, u128 mag, int64_t& out) {
  if (mag > (neg ? kI64Mag : kI64Mag - 1)) return false;
  if (!neg)
    out = static_cast<int64_t>(mag);
  else
    out = mag == 0 ? 0 : -static_cast<int64_t>(mag - 1) - 1;  // reaches INT64_MIN
  return true;
}

u128 pow10(int k) {
  u128 v = 1;
  while (k-- > 0) v *= 10;
  return v;
}

}  // namespace

// Digits from p; running out of input means the number may go on in the next piece.
inline const char* digits_end(Cur& c, const char* p) {
  while (p < c.end && is_digit(*p)) ++p;
  if (p == c.end) {
    c.p = p;
    c.more();
  }
  return p;
}

void lex_number(Cur& c, Num& n) {
  n.start = c.p;
  n.neg = false;
  n.is_int = true;
  n.special = 0;
  n.fb = n.fe = nullptr;
  n.has_exp = false;
  n.exp = 0;
  const char* p = c.p;
  if (*p == '-') {
    n.neg = true;
    if (++p == c.end) c.more();
  }
  char ch = *p;
  if (ch == 'N' || ch == 'I') {
    if (ch == 'N' && n.neg) c.fail("invalid number");
    c.p = p;
    literal(c, ch == 'N' ? "NaN" : "Infinity");
    n.special = ch == 'N' ? 1 : 2;
    n.is_int = false;
    n.stop = c.p;
    return;
  }
  n.ib = p;
  n.mag = 0;
  n.big = false;
  if (ch == '0') {
    if (++p == c.end) c.more();
  } else if (ch >= '1' && ch <= '9') {
    // The integer part's value as it is scanned (Kineto's numbers are mostly integers).
    uint64_t v;
    p = quick_digits(p, c.end, v);
    if (p < c.end && is_digit(*p)) {
      p = digits_end(c, p);
      v = digits_u64(n.ib, p, n.big);
    } else if (p == c.end) {
      c.p = p;
      c.more();
    }
    n.mag = v;
  } else {
    c.p = p;
    c.fail("invalid number");
  }
  n.ie = p;
  if (*p == '.') {
    n.fb = ++p;
    p = digits_end(c, p);
    if (p == n.fb) {
      c.p = p;
      c.fail("invalid number");
    }
    n.fe = p;
    n.is_int = false;
  }
  if (*p == 'e' || *p == 'E') {
    if (++p == c.end) c.more();
    bool eneg = false;
    if (*p == '+' || *p == '-') {
      eneg = *p == '-';
      if (++p == c.end) c.more();
    }
    const char* eb = p;
    p = digits_end(c, p);
    if (p == eb) {
      c.p = p;
      c.fail("invalid number");
    }
    int64_t e = 0;
    for (const char* q = eb; q < p && e < 1000000000; ++q) e = e * 10 + (*q - '0');
    n.has_exp = true;
    n.exp = eneg ? -e : e;
    n.is_int = false;
  }
  c.p = p;
  // Python's int() refuses more than 4300 digits (json.loads raises ValueError).
  if (n.is_int && n.ie - n.ib > 4300) c.fail("integer literal too long");
  n.stop = p;
}

void IntVal::set(bool neg, uint64_t mag, bool overflow) {
  state = kValue;
  fits_i64 = !overflow && signed_out(neg, mag, i64);
  fits_u64 = !overflow && (!neg || mag == 0);
  u64 = fits_u64 ? mag : 0;
  if (!fits_i64) i64 = 0;
}

IntVal num_to_int(const Num& n) {
  IntVal v;
  if (!n.is_int) {
    v.state = IntVal::kNone;
    return v;
  }
  v.set(n.neg, n.mag, n.big);
  return v;
}

IntVal str_to_int(const char* s, size_t n) {
  IntVal v;
  const char* e = s + n;
  for (const char* q = s; q < e; ++q)
    if (static_cast<uint8_t>(*q) >= 0x80) {  // Unicode digits/spaces: Python's rules
      v.state = IntVal::kBad;
      return v;
    }
  auto space = [](char ch) {
    return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
  };
  for (;;) {
    while (s < e && space(*s)) ++s;
    while (e > s && space(e[-1])) --e;
    const char* d = s;
    while (d < e && *d == '-') ++d;
    bool digits = d < e;
    for (const char* q = d; q < e && digits; ++q) digits = is_digit(*q);
    if (digits) {
      if (d - s > 1 || e - d > 4300) {  // int("--5") raises; so does a >4300-digit int
        v.state = IntVal::kBad;
        return v;
      }
      bool overflow = false;
      uint64_t mag = digits_u64(d, e, overflow);
      v.set(d > s, mag, overflow);
      return v;
    }
    if (e - s >= 7 && std::memcmp(s, "stream ", 7) == 0) {
      s += 7;
      continue;
    }
    v.state = IntVal::kNone;
    return v;
  }
}

uint8_t num_to_ns(const Num& n, int64_t& out) {
  if (n.special) return kTimeNotFinite;
  auto fit = [](bool ok) -> uint8_t { return ok ? kTimeOk : kTimeOutOfRange; };
  bool overflow = false;
  if (n.is_int) return fit(!n.big && signed_out(n.neg, static_cast<u128>(n.mag) * 1000, out));
  size_t nfrac = static_cast<size_t>(n.fe - n.fb);
  if (!n.has_exp && nfrac <= 3) {  // the Python path's exact fast path
    uint64_t whole = n.mag;
    overflow = n.big;
    uint64_t frac = digits_u64(n.fb, n.fe, overflow);
    for (size_t i = nfrac; i < 3; ++i) frac *= 10;
    return fit(!overflow && signed_out(n.neg, static_cast<u128>(whole) * 1000 + frac, out));
  }
  // Decimal(text) * 1000, to_integral_value (half even). Decimal's 28-digit context
  // rounds the product first when the coefficient has more than 25 digits, and huge
  // exponents overflow it: both are left to the Python path.
  if (n.exp > 400 || n.exp < -400) return kTimeDefer;
  u128 coef = 0;
  int ndig = 0;
  auto add = [&](const char* b, const char* e) {
    for (; b < e; ++b) {
      if (ndig == 0 && *b == '0') continue;
      if (++ndig > 25) return;
      coef = coef * 10 + static_cast<u128>(*b - '0');
    }
  };
  add(n.ib, n.ie);
  if (n.fb) add(n.fb, n.fe);
  if (ndig > 25) return kTimeDefer;
  if (coef == 0) {
    out = 0;
    return kTimeOk;
  }
  int64_t k = n.exp - static_cast<int64_t>(nfrac) + 3;
  if (k >= 0) {
    if (k > 19) return kTimeOutOfRange;  // coef >= 1, so the value is >= 1e20 ns
    u128 p = pow10(static_cast<int>(k));
    if (coef > kI64Mag / p) return kTimeOutOfRange;
    return fit(signed_out(n.neg, coef * p, out));
  }
  if (-k > 26) {
    out = 0;
    return kTimeOk;
  }
  u128 div = pow10(static_cast<int>(-k));
  u128 q = coef / div, r = coef % div, half = div / 2;
  if (r > half || (r == half && (q & 1))) ++q;
  return fit(signed_out(n.neg, q, out));
}

void num_text(const Num& n, std::string& out) {
  if (n.is_int && digits_all_zero(n.ib, n.ie))
    out.assign("0");
  else
    out.assign(n.start, n.stop);
}

}  // namespace tbdtrace::kineto
