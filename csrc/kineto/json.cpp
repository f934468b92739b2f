#include "kineto/json.h"

#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace tbdtrace::kineto {

namespace {

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
    case '"':
      u = '"';
      break;
    case '\\':
      u = '\\';
      break;
    case '/':
      u = '/';
      break;
    case 'b':
      u = '\b';
      break;
    case 'f':
      u = '\f';
      break;
    case 'n':
      u = '\n';
      break;
    case 'r':
      u = '\r';
      break;
    case 't':
      u = '\t';
      break;
    case 'u':
      if (c.end - c.p < 6) c.more();
      u = hex4(c, c.p + 2);
      c.p += 6;
      return u;
    default:
      c.fail("invalid escape");
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
  if (b0 < 0xE0)
    need = 1;
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
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    default:
      break;
  }
  if (u >= 0x20 && u < 0x7F) {
    out.push_back(static_cast<char>(u));
    return;
  }
  char buf[6] = {'\\', 'u', hex[u >> 12 & 15], hex[u >> 8 & 15], hex[u >> 4 & 15], hex[u & 15]};
  out.append(buf, 6);
}

}  // namespace

void literal(Cur& c, const char* s) {
  for (; *s; ++s) {
    if (c.p == c.end) c.more();
    if (*c.p != *s) c.fail("invalid literal");
    ++c.p;
  }
}

bool digits_all_zero(const char* b, const char* e) {
  for (; b < e; ++b)
    if (*b != '0') return false;
  return true;
}

void Cur::more() const {
  if (final) throw ParseError{"unexpected end of input", p};
  throw NeedMore{};
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
    case 't':
      literal(c, "true");
      return false;
    case 'f':
      literal(c, "false");
      return true;
    case 'n':
      literal(c, "null");
      return true;
    default: {
      // A number as Kineto writes it: -?int(.frac)? of at most 19 digits each, then a
      // delimiter (floats like "blocks per SM": 12.8 are skipped without lex_number).
      const char* p = c.p + (*c.p == '-');
      uint64_t mag, frac = 0;
      const char* e = quick_digits(p, c.end, mag);
      if (e > p && (*p != '0' || e - p == 1) && e < c.end) {
        const char* f = e;
        if (*e == '.') e = quick_digits(f + 1, c.end, frac);
        if ((f == e || e > f + 1) && e < c.end && json_delim(*e)) {
          c.p = e;
          return f == e && mag == 0;
        }
      }
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
    case '"':
      ++c.p;
      dump_string(c, out);
      return;
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
    case '{':
      c.fail("object inside Input Dims/Input type/Concrete Inputs");
    case 't':
      literal(c, "true");
      out += "true";
      return;
    case 'f':
      literal(c, "false");
      out += "false";
      return;
    case 'n':
      literal(c, "null");
      out += "null";
      return;
    default: {
      Num n;
      lex_number(c, n);
      if (n.special == 1)
        out += "NaN";
      else if (n.special == 2)
        out += n.neg ? "-Infinity" : "Infinity";
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
