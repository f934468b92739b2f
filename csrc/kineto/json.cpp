#include "kineto/json.h"

#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace tbdtrace::kineto {

namespace {

using u128 = unsigned __int128;

// First byte at or after p that ends a plain run inside a string: '"', '\\', a control
// character, and (kHigh) a byte >= 0x80.
template <bool kHigh>
inline const char* scan(const char* p, const char* end) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i bslash = _mm_set1_epi8('\\');
  const __m128i ctl = _mm_set1_epi8(0x1f);
  while (end - p >= 16) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i m = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x));
    int bits = _mm_movemask_epi8(m);
    if (kHigh) bits |= _mm_movemask_epi8(x);
    if (bits) return p + __builtin_ctz(static_cast<unsigned>(bits));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    auto ch = static_cast<uint8_t>(*p);
    if (ch == '"' || ch == '\\' || ch < 0x20 || (kHigh && ch >= 0x80)) return p;
  }
  return end;
}

void literal(Cur& c, const char* s) {
  for (; *s; ++s) {
    if (c.p == c.end) c.more();
    if (*c.p != *s) c.fail("invalid literal");
    ++c.p;
  }
}

bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }


int hex_value(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

uint32_t hex4(Cur& c, const char* p) {
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) {
    int h = hex_value(p[i]);
    if (h < 0) c.fail("invalid \\uXXXX escape");
    u = u << 4 | static_cast<uint32_t>(h);
  }
  return u;
}

// c.p at a backslash: the code unit it stands for; c.p moves past the escape.
uint32_t read_escape(Cur& c) {
  if (c.end - c.p < 2) c.more();
  char e = c.p[1];
  uint32_t u;
  switch (e) {
    case '"': u = '"'; break;
    case '\\': u = '\\'; break;
    case '/': u = '/'; break;
    case 'b': u = '\b'; break;
    case 'f': u = '\f'; break;
    case 'n': u = '\n'; break;
    case 'r': u = '\r'; break;
    case 't': u = '\t'; break;
    case 'u':
      if (c.end - c.p < 6) c.more();
      u = hex4(c, c.p + 2);
      c.p += 6;
      return u;
    default: c.fail("invalid escape");
  }
  c.p += 2;
  return u;
}

// One UTF-8 sequence at c.p (first byte >= 0x80), maximal-subpart replacement as CPython's
// decoder with errors="replace". Returns its length; cp is U+FFFD when invalid.
size_t utf8_seq(Cur& c, uint32_t& cp) {
  const auto* p = reinterpret_cast<const uint8_t*>(c.p);
  const auto* end = reinterpret_cast<const uint8_t*>(c.end);
  uint8_t b0 = p[0];
  cp = 0xFFFD;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 < 0xC2) return 1;
  if (b0 < 0xE0) need = 1;
  else if (b0 < 0xF0) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 < 0xF5) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  uint32_t v = b0 & (0x3F >> need);
  for (size_t i = 1; i <= need; ++i) {
    if (p + i >= end) c.more();
    uint8_t b = p[i];
    uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return i;
    v = v << 6 | (b & 0x3F);
  }
  cp = v;
  return need + 1;
}

void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | cp >> 6));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | cp >> 12));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | cp >> 18));
    out.push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// One UTF-16 code unit (or ASCII char) as json.dumps(ensure_ascii=True) writes it.
void dump_unit(std::string& out, uint32_t u) {
  static const char* hex = "0123456789abcdef";
  switch (u) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    default: break;
  }
  if (u >= 0x20 && u < 0x7F) {
    out.push_back(static_cast<char>(u));
    return;
  }
  char buf[6] = {'\\', 'u', hex[u >> 12 & 15], hex[u >> 8 & 15], hex[u >> 4 & 15], hex[u & 15]};
  out.append(buf, 6);
}

bool digits_all_zero(const char* b, const char* e) {
  for (; b < e; ++b)
    if (*b != '0') return false;
  return true;
}

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
  if (!neg) out = static_cast<int64_t>(mag);
  else out = mag == 0 ? 0 : -static_cast<int64_t>(mag - 1) - 1;  // reaches INT64_MIN
  return true;
}

u128 pow10(int k) {
  u128 v = 1;
  while (k-- > 0) v *= 10;
  return v;
}

}  // namespace

void Cur::more() const {
  if (final) throw ParseError{"unexpected end of input", p};
  throw NeedMore{};
}

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
  auto space = [](char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f); };
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

bool num_to_ns(const Num& n, int64_t& out) {
  if (n.special) return false;
  bool overflow = false;
  if (n.is_int) return !n.big && signed_out(n.neg, static_cast<u128>(n.mag) * 1000, out);
  size_t nfrac = static_cast<size_t>(n.fe - n.fb);
  if (!n.has_exp && nfrac <= 3) {  // the Python path's exact fast path
    uint64_t whole = n.mag;
    overflow = n.big;
    uint64_t frac = digits_u64(n.fb, n.fe, overflow);
    for (size_t i = nfrac; i < 3; ++i) frac *= 10;
    return !overflow && signed_out(n.neg, static_cast<u128>(whole) * 1000 + frac, out);
  }
  // Decimal(text) * 1000, to_integral_value (half even). Decimal's 28-digit context
  // rounds the product first when the coefficient has more than 25 digits, and huge
  // exponents overflow it: both are left to the Python path.
  if (n.exp > 400 || n.exp < -400) return false;
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
  if (ndig > 25) return false;
  if (coef == 0) {
    out = 0;
    return true;
  }
  int64_t k = n.exp - static_cast<int64_t>(nfrac) + 3;
  if (k >= 0) {
    if (k > 19) return false;
    u128 p = pow10(static_cast<int>(k));
    if (coef > kI64Mag / p) return false;
    return signed_out(n.neg, coef * p, out);
  }
  if (-k > 26) {
    out = 0;
    return true;
  }
  u128 div = pow10(static_cast<int>(-k));
  u128 q = coef / div, r = coef % div, half = div / 2;
  if (r > half || (r == half && (q & 1))) ++q;
  return signed_out(n.neg, q, out);
}

void num_text(const Num& n, std::string& out) {
  if (n.is_int && digits_all_zero(n.ib, n.ie)) out.assign("0");
  else out.assign(n.start, n.stop);
}

void skip_string(Cur& c) {
  for (;;) {
    c.p = scan<false>(c.p, c.end);
    if (c.p == c.end) c.more();
    char ch = *c.p;
    if (ch == '"') {
      ++c.p;
      return;
    }
    if (ch != '\\') c.fail("control character in string");
    read_escape(c);
  }
}

bool read_string(Cur& c, std::string& scratch, const char*& s, size_t& len) {
  const char* start = c.p;
  const char* p = scan<true>(start, c.end);
  if (p == c.end) c.more();
  if (*p == '"') {
    s = start;
    len = static_cast<size_t>(p - start);
    c.p = p + 1;
    return true;
  }
  scratch.assign(start, p);
  c.p = p;
  bool whole = true;
  for (;;) {
    p = scan<true>(c.p, c.end);
    scratch.append(c.p, p);
    c.p = p;
    if (p == c.end) c.more();
    auto ch = static_cast<uint8_t>(*p);
    if (ch == '"') {
      ++c.p;
      s = scratch.data();
      len = scratch.size();
      return whole;
    }
    if (ch == '\\') {
      uint32_t u = read_escape(c);
      if (u >= 0xD800 && u <= 0xDBFF) {
        if (c.end - c.p < 2) c.more();
        if (c.p[0] == '\\' && c.p[1] == 'u') {
          if (c.end - c.p < 6) c.more();
          uint32_t u2 = hex4(c, c.p + 2);
          if (u2 >= 0xDC00 && u2 <= 0xDFFF) {
            c.p += 6;
            put_utf8(scratch, 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00));
            continue;
          }
        }
        whole = false;  // lone high surrogate
        put_utf8(scratch, 0xFFFD);
      } else if (u >= 0xDC00 && u <= 0xDFFF) {
        whole = false;  // lone low surrogate
        put_utf8(scratch, 0xFFFD);
      } else {
        put_utf8(scratch, u);
      }
    } else if (ch < 0x20) {
      c.fail("control character in string");
    } else {
      uint32_t cp;
      size_t k = utf8_seq(c, cp);
      put_utf8(scratch, cp);  // the sequence itself when valid, else U+FFFD
      c.p += k;
    }
  }
}

void dump_string(Cur& c, std::string& out) {
  out.push_back('"');
  for (;;) {
    const char* p = scan<true>(c.p, c.end);
    for (const char* q = c.p; q < p; ++q) dump_unit(out, static_cast<uint8_t>(*q));
    c.p = p;
    if (p == c.end) c.more();
    auto ch = static_cast<uint8_t>(*p);
    if (ch == '"') {
      ++c.p;
      out.push_back('"');
      return;
    }
    if (ch == '\\') {
      dump_unit(out, read_escape(c));
    } else if (ch < 0x20) {
      c.fail("control character in string");
    } else {
      uint32_t cp;
      c.p += utf8_seq(c, cp);
      if (cp >= 0x10000) {
        dump_unit(out, 0xD800 + ((cp - 0x10000) >> 10));
        dump_unit(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        dump_unit(out, cp);
      }
    }
  }
}

bool skip_value(Cur& c, int depth) {
  if (depth > kMaxDepth) c.fail("nesting too deep");
  char ch = c.peek();
  switch (ch) {
    case '"': {
      const char* start = c.p++;
      skip_string(c);
      return c.p - start == 2;
    }
    case '{': {
      ++c.p;
      c.ws();
      if (*c.p == '}') {
        ++c.p;
        return true;
      }
      for (;;) {
        c.expect('"');
        skip_string(c);
        c.ws();
        c.expect(':');
        c.ws();
        skip_value(c, depth + 1);
        c.ws();
        if (*c.p == ',') {
          ++c.p;
          c.ws();
        } else if (*c.p == '}') {
          ++c.p;
          return false;
        } else {
          c.fail("expected ',' or '}'");
        }
      }
    }
    case '[': {
      ++c.p;
      c.ws();
      if (*c.p == ']') {
        ++c.p;
        return true;
      }
      for (;;) {
        skip_value(c, depth + 1);
        c.ws();
        if (*c.p == ',') {
          ++c.p;
          c.ws();
        } else if (*c.p == ']') {
          ++c.p;
          return false;
        } else {
          c.fail("expected ',' or ']'");
        }
      }
    }
    case 't': literal(c, "true"); return false;
    case 'f': literal(c, "false"); return true;
    case 'n': literal(c, "null"); return true;
    default: {
      bool neg;
      uint64_t mag;
      if (quick_int(c, neg, mag)) return mag == 0;
      Num n;
      lex_number(c, n);
      return n.is_int && digits_all_zero(n.ib, n.ie);
    }
  }
}

void dump_value(Cur& c, std::string& out, int depth) {
  if (depth > kMaxDepth) c.fail("nesting too deep");
  char ch = c.peek();
  switch (ch) {
    case '"': ++c.p; dump_string(c, out); return;
    case '[':
      ++c.p;
      out.push_back('[');
      c.ws();
      if (*c.p == ']') {
        ++c.p;
        out.push_back(']');
        return;
      }
      for (;;) {
        dump_value(c, out, depth + 1);
        c.ws();
        if (*c.p == ',') {
          ++c.p;
          out.push_back(',');
          c.ws();
        } else if (*c.p == ']') {
          ++c.p;
          out.push_back(']');
          return;
        } else {
          c.fail("expected ',' or ']'");
        }
      }
    case '{': c.fail("object inside Input Dims/Input type");
    case 't': literal(c, "true"); out += "true"; return;
    case 'f': literal(c, "false"); out += "false"; return;
    case 'n': literal(c, "null"); out += "null"; return;
    default: {
      Num n;
      lex_number(c, n);
      if (n.special == 1) out += "NaN";
      else if (n.special == 2) out += n.neg ? "-Infinity" : "Infinity";
      else if (n.is_int) {
        std::string t;
        num_text(n, t);
        out += t;
      } else {
        out.push_back('"');
        out.append(n.start, n.stop);
        out.push_back('"');
      }
    }
  }
}

}  // namespace tbdtrace::kineto
