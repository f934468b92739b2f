// JSON lexing for the Kineto parser: a cursor over a byte buffer that may end mid-token.
//
// The grammar accepted is exactly that of Python's json module as tbdtrace's Python
// importer calls it (json.loads(text, parse_float=str) on the file decoded as UTF-8 with
// errors="replace"): strict strings (no raw control characters), NaN/Infinity/-Infinity
// literals, invalid UTF-8 inside strings read as U+FFFD (one per maximal invalid
// subsequence, as CPython's decoder does). Whatever that path would reject, or would turn
// into something this parser does not reproduce, raises ParseError: the importer then
// repairs the file or reports it (tbdtrace/importers/kineto/repair.py), or, for an object
// inside Input Dims, hands the value to Python's json (Parser::kHookDump).
//
// Running out of input inside a token raises NeedMore (unless the input is final): the
// caller keeps the unparsed tail and retries the whole unit when more data has arrived.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace tbdtrace::kineto {

// The 8-byte digit and key tricks below read little-endian words.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian targets only");

struct NeedMore {};
struct ParseError {
  const char* msg;
  const char* at;
};

struct Cur {
  const char* p;
  const char* end;
  bool final;  // no more input will come: running out is an error, not NeedMore

  [[noreturn]] void more() const;
  [[noreturn]] void fail(const char* msg) const { throw ParseError{msg, p}; }
  char peek() {
    if (p == end) more();
    return *p;
  }
  static bool is_ws(char ch) {  // ' ', \t, \n, \r: one compare and a bit test
    constexpr uint64_t kWs = 1ull << ' ' | 1ull << '\t' | 1ull << '\n' | 1ull << '\r';
    auto u = static_cast<unsigned char>(ch);
    return u <= ' ' && (kWs >> u & 1);
  }
  void ws() {
    for (;;) {
      if (p < end && !is_ws(*p)) return;  // compact JSON: no whitespace at all
      p = skip_ws(p, end);
      if (p < end) return;
      more();
    }
  }
  // First non-whitespace byte at or after q (pretty-printed files indent every line).
  static const char* skip_ws(const char* q, const char* e) {
#ifdef __SSE2__
    while (e - q >= 16) {
      __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
      __m128i m = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')),
                               _mm_cmpeq_epi8(x, _mm_set1_epi8('\n')));
      m = _mm_or_si128(m, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\r')),
                                       _mm_cmpeq_epi8(x, _mm_set1_epi8('\t'))));
      unsigned other = static_cast<unsigned>(_mm_movemask_epi8(m)) ^ 0xFFFFu;
      if (other) return q + __builtin_ctz(other);
      q += 16;
    }
#endif
    while (q < e && is_ws(*q)) ++q;
    return q;
  }
  void expect(char c) {
    if (peek() != c) fail("unexpected character");
    ++p;
  }
};

// A number token. Digits are spans into the buffer.
struct Num {
  const char* start;
  const char* stop;
  bool neg = false;
  bool is_int = true;  // no fraction, no exponent
  int special = 0;     // 1 NaN, 2 Infinity (sign in neg)
  const char* ib;      // integer digits [ib, ie)
  const char* ie;
  uint64_t mag = 0;          // their value, when !big
  bool big = false;          // more than fits uint64
  const char* fb = nullptr;  // fraction digits [fb, fe)
  const char* fe = nullptr;
  bool has_exp = false;
  int64_t exp = 0;  // clamped to +-1e9
};

inline bool is_digit(char ch) {
  return ch >= '0' && ch <= '9';
}
// Consumes the literal text `s` (true, null, NaN, ...) or fails.
void literal(Cur& c, const char* s);
bool digits_all_zero(const char* b, const char* e);

// Lexes a number or NaN/Infinity/-Infinity at c.p.
void lex_number(Cur& c, Num& n);

// An integer as tbdtrace's _any_int sees it: state, and the value's fit in int64/uint64.
struct IntVal {
  enum : uint8_t { kAbsent = 0, kNone, kValue, kBad } state = kAbsent;
  bool fits_i64 = false;
  bool fits_u64 = false;
  int64_t i64 = 0;
  uint64_t u64 = 0;
  bool i64_ok() const { return state == kValue && fits_i64; }
  bool u64_ok() const { return state == kValue && fits_u64; }
  void set(bool neg, uint64_t mag, bool overflow);
};

// Fast paths for what Kineto writes most: an integer of at most 19 digits, or one with a
// fraction of at most 3 digits, directly followed by a delimiter. They return false (c.p
// unchanged) for anything else, which the caller then reads with lex_number.
inline bool json_delim(char ch) {
  return ch == ',' || ch == '}' || ch == ']' || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t';
}

// SWAR digit parsing (the technique of simdjson / fast_float), little-endian loads.
inline bool eight_digits(uint64_t w) {
  return ((w & 0xF0F0F0F0F0F0F0F0ull) |
          (((w + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) >> 4)) == 0x3333333333333333ull;
}

inline uint64_t parse_eight(uint64_t w) {
  const uint64_t mask = 0x000000FF000000FFull;
  const uint64_t mul1 = 0x000F424000000064ull;  // 100 + (1000000 << 32)
  const uint64_t mul2 = 0x0000271000000001ull;  // 1 + (10000 << 32)
  w -= 0x3030303030303030ull;
  w = w * 10 + (w >> 8);
  return (((w & mask) * mul1) + (((w >> 16) & mask) * mul2)) >> 32;
}

// Up to 19 digits from p (so the value fits uint64); returns where they stop. Most of
// Kineto's integers are short (ids, pids, sizes): the length of a run of fewer than 8
// digits comes from one word (a byte is a digit when its xor with '0' is below 10), and
// its value from one parse_eight of the digits moved to the word's top.
[[gnu::always_inline]] inline const char* quick_digits(const char* p, const char* end,
                                                       uint64_t& v) {
  const char* stop = end - p > 19 ? p + 19 : end;
  v = 0;
  if (end - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    uint64_t t = w ^ 0x3030303030303030ull;  // digits: bytes 0..9
    uint64_t other =
        (((t & 0x7F7F7F7F7F7F7F7Full) + 0x7676767676767676ull) | t) & 0x8080808080808080ull;
    if (other) {
      unsigned n = static_cast<unsigned>(__builtin_ctzll(other)) / 8;  // digits before it
      if (n) v = parse_eight((t << (64 - 8 * n)) | 0x3030303030303030ull);
      return p + n;
    }
    v = parse_eight(w);
    p += 8;
  }
  while (stop - p >= 8) {  // eight at a time: timestamps have 16
    uint64_t w;
    std::memcpy(&w, p, 8);
    if (!eight_digits(w)) break;
    v = v * 100000000 + parse_eight(w);
    p += 8;
  }
  while (p < stop && static_cast<unsigned>(*p - '0') < 10) {
    v = v * 10 + static_cast<unsigned>(*p++ - '0');
  }
  return p;
}

[[gnu::always_inline]] inline bool quick_int(Cur& c, bool& neg, uint64_t& mag) {
  const char* p = c.p;
  neg = *p == '-';
  const char* b = p + neg;
  p = quick_digits(b, c.end, mag);
  if (p == b || p >= c.end || (*b == '0' && p - b > 1) || !json_delim(*p)) return false;
  c.p = p;
  return true;
}

// us_to_ns of "123", "-123", "123.4", "123.456" (exact; no rounding is involved).
[[gnu::always_inline]] inline bool quick_ns(Cur& c, int64_t& out) {
  const char* p = c.p;
  bool neg = *p == '-';
  const char* b = p + neg;
  uint64_t whole, frac = 0;
  p = quick_digits(b, c.end, whole);
  if (p == b || p >= c.end || (*b == '0' && p - b > 1) || p - b > 16) return false;
  if (*p == '.') {
    const char* f = ++p;
    if (c.end - f >= 4 && is_digit(f[0]) && is_digit(f[1]) && is_digit(f[2]) && !is_digit(f[3])) {
      // Kineto's usual three digits (its times are microseconds with ns precision)
      frac = static_cast<unsigned>(f[0] - '0') * 100 + static_cast<unsigned>(f[1] - '0') * 10 +
             static_cast<unsigned>(f[2] - '0');
      p = f + 3;
    } else {
      while (p < c.end && p - f < 4 && static_cast<unsigned>(*p - '0') < 10)
        frac = frac * 10 + static_cast<unsigned>(*p++ - '0');
      if (p == f || p - f > 3) return false;
      for (auto k = p - f; k < 3; ++k) frac *= 10;
    }
  }
  if (p >= c.end || !json_delim(*p)) return false;
  uint64_t ns = whole * 1000 + frac;  // < 1e19: fits
  if (ns > static_cast<uint64_t>(INT64_MAX)) return false;
  out = neg ? -static_cast<int64_t>(ns) : static_cast<int64_t>(ns);
  c.p = p;
  return true;
}

// int(number text) when it is an integer literal; None for a float.
IntVal num_to_int(const Num& n);
// _any_int on a string value (its decoded UTF-8 bytes).
IntVal str_to_int(const char* s, size_t n);
// What a time field held (Parser::Event::ts_state, dur_state).
enum TimeState : uint8_t {
  kTimeAbsent = 0,
  kTimeOk = 1,
  kTimeDefer = 2,       // needs Python's rules (a string, or Decimal context rounding)
  kTimeNotFinite = 3,   // NaN, Infinity
  kTimeOutOfRange = 4,  // its nanoseconds do not fit int64
  kTimeNotNumber = 5,   // null, a list or an object
};
// us_to_ns: microseconds as written to integer ns, half to even below 1 ns; kTimeOk, or why
// not (out of int64, not finite, or Decimal context behaviour left to Python: kTimeDefer).
uint8_t num_to_ns(const Num& n, int64_t& out);
// str(value) of a parsed number: canonical int text or the float's source text.
void num_text(const Num& n, std::string& out);

// Strings (c.p just past the opening quote; on return c.p is past the closing quote).
// skip_string validates only. read_string gives the value as UTF-8: when it has no escape
// and no byte >= 0x80 it is the span [s, s+len) of the buffer, else it is decoded into
// `scratch`. Returns false when it holds a lone surrogate (\ud800 without its pair).
void skip_string(Cur& c);
bool read_string(Cur& c, std::string& scratch, const char*& s, size_t& len);
// Appends the string as json.dumps (ensure_ascii) writes it, quotes included.
void dump_string(Cur& c, std::string& out);

// Skips any value (depth-limited); returns true when Python would see it as falsy
// (null, false, 0, "", [], {}).
bool skip_value(Cur& c, int depth = 0);
// Appends json.dumps(value, separators=(",", ":")) of the value as Python's json parses
// it (floats are their source text, so they dump as strings). Objects raise ParseError
// (duplicate-key semantics are not reproduced).
void dump_value(Cur& c, std::string& out, int depth = 0);

constexpr int kMaxDepth = 512;

}  // namespace tbdtrace::kineto
