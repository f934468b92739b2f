#include "kineto/parser.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tbdtrace::kineto {

namespace {

// Keys the parser looks for. A key is matched on its raw bytes and closing quote first
// (no scan); a key that matches none that way (unknown, escaped, or cut by the end of the
// input) is read and decoded, then looked up by value.
struct KeyTable {
  struct Entry {
    std::string quoted;  // the key and its closing quote
    int id;
    int words;            // 8-byte words covering `quoted`
    uint64_t w[4], m[4];  // their bytes and masks (little-endian loads)
  };
  std::vector<Entry> by_first[128];
  std::vector<Entry> all;

  KeyTable(std::initializer_list<std::pair<const char*, int>> keys) {
    for (const auto& [text, id] : keys) {
      Entry e{std::string(text) + '"', id, 0, {}, {}};
      e.words = static_cast<int>((e.quoted.size() + 7) / 8);
      for (size_t i = 0; i < e.quoted.size(); ++i) {
        e.w[i / 8] |= static_cast<uint64_t>(static_cast<unsigned char>(e.quoted[i])) << (i % 8 * 8);
        e.m[i / 8] |= 0xFFull << (i % 8 * 8);
      }
      by_first[static_cast<unsigned char>(text[0])].push_back(e);
      all.push_back(e);
    }
  }

  static uint64_t load8(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }

  // c.p just past the opening quote; on return c.p is past the closing quote.
  int match(Cur& c, std::string& scratch, int none) const {
    auto avail = static_cast<size_t>(c.end - c.p);
    if (avail && static_cast<unsigned char>(*c.p) < 128) {
      for (const Entry& e : by_first[static_cast<unsigned char>(*c.p)]) {
        bool eq;
        if (avail >= static_cast<size_t>(e.words) * 8) {
          eq = (load8(c.p) & e.m[0]) == e.w[0];
          for (int i = 1; eq && i < e.words; ++i) eq = (load8(c.p + 8 * i) & e.m[i]) == e.w[i];
        } else {
          eq = avail >= e.quoted.size() && std::memcmp(c.p, e.quoted.data(), e.quoted.size()) == 0;
        }
        if (eq) {
          c.p += e.quoted.size();
          return e.id;
        }
      }
    }
    const char* s;
    size_t n;
    read_string(c, scratch, s, n);
    for (const Entry& e : all)
      if (e.quoted.size() == n + 1 && std::memcmp(e.quoted.data(), s, n) == 0) return e.id;
    return none;
  }
};

enum EventKey { kPh, kCat, kName, kPid, kTid, kTs, kDur, kArgs, kOtherKey };

const KeyTable kEventKeys = {{"ph", kPh},   {"cat", kCat}, {"name", kName}, {"pid", kPid},
                             {"tid", kTid}, {"ts", kTs},   {"dur", kDur},   {"args", kArgs}};

using P = Parser;
const KeyTable kArgKeys = {{"External id", P::kExtUpper},
                           {"external id", P::kExtLower},
                           {"device", P::kDevice},
                           {"stream", P::kStream},
                           {"context", P::kContext},
                           {"correlation", P::kCorrelation},
                           {"registers per thread", P::kRegs},
                           {"shared memory", P::kShmem},
                           {"bytes", P::kBytes},
                           {"cbid", P::kCbid},
                           {"Sequence number", P::kSeq},
                           {"flops", P::kFlops},
                           {"Bytes", P::kMemBytes},
                           {"Device Type", P::kDevType},
                           {"Addr", P::kAddr},
                           {"Device Id", P::kDevId},
                           {"Total Allocated", P::kTotalAlloc},
                           {"Total Reserved", P::kTotalRes},
                           {"grid", P::kGrid},
                           {"block", P::kBlock},
                           {"cuda_sync_kind", P::kSyncKind},
                           {"Input Dims", P::kDims},
                           {"Input type", P::kTypes},
                           {"Concrete Inputs", P::kConcrete},
                           {"In msg nelems", P::kInNelems},
                           {"Out msg nelems", P::kOutNelems},
                           {"Group size", P::kGroupSize},
                           {"Seq", P::kCollSeq},
                           {"Collective name", P::kCollName},
                           {"dtype", P::kCollDtype},
                           {"Process Group Name", P::kPgName},
                           {"CallFrom", P::kCallFrom}};

// The hook's answer for an integer string (Parser::kHookInt) as an IntVal.
IntVal hooked_int(const std::string& r) {
  IntVal v;
  if (r.empty()) {
    v.state = IntVal::kNone;
    return v;
  }
  if (r[0] == '!') {
    v.state = IntVal::kBad;
    return v;
  }
  size_t i = r[0] == '-';
  uint64_t mag = 0;
  bool overflow = false;
  for (; i < r.size(); ++i) {
    if (r[i] < '0' || r[i] > '9') throw KinetoError("the integer hook answered '" + r + "'");
    overflow = overflow || __builtin_mul_overflow(mag, 10, &mag) ||
               __builtin_add_overflow(mag, static_cast<uint64_t>(r[i] - '0'), &mag);
  }
  v.set(r[0] == '-', mag, overflow);
  return v;
}

}  // namespace

Parser::Parser(const std::vector<std::pair<std::string, int>>& routes) : routes_(routes) {
  for (const auto& r : routes_)
    if (r.second < 0 || r.second >= kNumRoutes || r.second == MEMORY)
      throw std::invalid_argument("route for category '" + r.first + "' is not an X-event table");
  for (const auto& d : staging_defs()) tables_.emplace_back(d);
}

void Parser::begin_file() {
  state_ = kStart;
  top_list_ = seen_events_ = final_ = false;
  header_.clear();
  events_ = 0;
  skipped_file_.fill(0);
  buf_.clear();
  buf_offset_ = fed_ = 0;
  retry_at_ = 0;
  base_ = 0;
  has_base_ = false;
  skip_lists_ = lists_seen_ = 0;
}

std::string Parser::ask(int kind, const char* s, size_t n) const {
  if (!hook_) throw KinetoError("a value read by Python's rules, without a hook");
  return hook_(kind, s, n);
}

std::vector<size_t> Parser::rows() const {
  std::vector<size_t> out;
  for (const auto& t : tables_) out.push_back(t.rows());
  return out;
}

std::vector<std::vector<TakenColumn>> Parser::take_tables() {
  std::vector<std::vector<TakenColumn>> out;
  for (auto& t : tables_) out.push_back(t.take());
  return out;
}

namespace {

// One string column of a batch: its codes renumbered in place into the column's own
// dictionary, returned as (int64 offsets, data). `map` (one slot per interned string, all
// -1) is left as it was found.
std::pair<Owned, Owned> local_dictionary(TakenColumn& col, size_t rows, const StringDict& dict,
                                         std::vector<int32_t>& map) {
  auto* codes = static_cast<int32_t*>(col.data.ptr);
  const uint8_t* valid = col.nulls ? static_cast<const uint8_t*>(col.valid.ptr) : nullptr;
  std::vector<int32_t> used;
  size_t bytes = 0;
  for (size_t i = 0; i < rows; ++i) {
    if (valid && !(valid[i >> 3] >> (i & 7) & 1)) {
      codes[i] = 0;
      continue;
    }
    int32_t id = codes[i];
    int32_t m = map[static_cast<size_t>(id)];
    if (m < 0) {
      m = map[static_cast<size_t>(id)] = static_cast<int32_t>(used.size());
      used.push_back(id);
      bytes += dict.at(static_cast<size_t>(id)).size();
    }
    codes[i] = m;
  }
  Owned offs{std::malloc((used.size() + 1) * sizeof(int64_t)), (used.size() + 1) * sizeof(int64_t)};
  Owned data{std::malloc(bytes ? bytes : 1), bytes};
  if (!offs.ptr || !data.ptr) {
    std::free(offs.ptr);
    std::free(data.ptr);
    throw std::bad_alloc();
  }
  auto* o = static_cast<int64_t*>(offs.ptr);
  auto* d = static_cast<char*>(data.ptr);
  o[0] = 0;
  for (size_t k = 0; k < used.size(); ++k) {
    std::string_view v = dict.at(static_cast<size_t>(used[k]));
    if (!v.empty()) std::memcpy(d + o[k], v.data(), v.size());
    o[k + 1] = o[k] + static_cast<int64_t>(v.size());
    map[static_cast<size_t>(used[k])] = -1;
  }
  return {offs, data};
}

}  // namespace

Parser::Batch Parser::take_batch() {
  Batch b;
  std::vector<int32_t> map(dict_.size(), -1);
  for (auto& t : tables_) {
    size_t rows = t.rows();
    b.tables.push_back(t.take());
    auto& dicts = b.dicts.emplace_back();
    for (auto& col : b.tables.back()) {
      if (col.type == ColType::STR)
        dicts.push_back(local_dictionary(col, rows, dict_, map));
      else
        dicts.emplace_back();
    }
  }
  return b;
}

// Input arrives in pieces. A unit (one event, one top-level member, a separator) that a
// piece cuts is re-parsed from its start once more input is there. The unparsed tail is
// kept in buf_; only the bytes needed to finish its unit are copied there, after which
// parsing goes on in the caller's piece directly.
void Parser::check_unit_size() const {
  if (buf_.size() > max_unit_)
    throw KinetoError("a JSON value of more than " + std::to_string(max_unit_) + " bytes at byte " +
                      std::to_string(buf_offset_));
}

void Parser::feed(const char* data, size_t n) {
  size_t off = 0;
  if (!buf_.empty()) {
    if (buf_.size() + n < retry_at_) {  // a big unit: wait for enough input to finish it
      buf_.append(data, n);
      fed_ += n;
      check_unit_size();
      return;
    }
    size_t tail = buf_.size();
    size_t k = 0;
    for (;;) {
      size_t add = std::min(n - k, std::max<size_t>({buf_.size(), retry_at_, 1 << 16}));
      buf_.append(data + k, add);
      k += add;
      size_t used = parse(buf_.data(), buf_.size(), buf_offset_, tail);
      if (used >= tail) {  // the cut unit is done: go on in the piece
        off = used - tail;
        buf_.clear();
        break;
      }
      buf_.erase(0, used);
      buf_offset_ += used;
      tail -= used;
      check_unit_size();
      if (k == n) {
        fed_ += n;
        return;
      }
    }
  }
  size_t used = parse(data + off, n - off, fed_ + off, SIZE_MAX);
  buf_.assign(data + off + used, n - off - used);
  buf_offset_ = fed_ + off + used;
  fed_ += n;
  check_unit_size();
}

void Parser::finish() {
  final_ = true;
  parse(buf_.data(), buf_.size(), buf_offset_, SIZE_MAX);
  buf_.clear();
  if (state_ != kDone) throw KinetoError("unexpected end of input");
  if (!seen_events_) throw KinetoError("no traceEvents list");
}

// Parses whole units from [p, p+n) (file offset `at`), stopping at the first unit boundary
// at or past `stop`; returns the bytes consumed.
size_t Parser::parse(const char* p, size_t n, uint64_t at, size_t stop) {
  Cur c{p, p + n, final_};
  const char* unit = p;
  try {
    for (;;) {
      // Whitespace between units is consumed here, never held for the next piece (a
      // gigabyte of spaces costs no memory).
      c.p = Cur::skip_ws(c.p, c.end);
      unit = c.p;
      if (static_cast<size_t>(unit - p) >= stop) break;
      if (state_ == kDone) {
        while (c.p < c.end && Cur::is_ws(*c.p)) ++c.p;
        if (c.p < c.end) c.fail("extra data after the JSON document");
        unit = c.p;
        break;
      }
      step(c);
    }
  } catch (const NeedMore&) {
    retry_at_ = 2 * static_cast<size_t>(c.end - unit);
  } catch (const ParseError& e) {
    throw KinetoError(std::string(e.msg) + " at byte " +
                      std::to_string(at + static_cast<uint64_t>(e.at - p)));
  }
  return static_cast<size_t>(unit - p);
}

void Parser::step(Cur& c) {
  c.ws();
  char ch = *c.p;
  switch (state_) {
    case kStart:
      if (ch == '{') {
        state_ = kObjFirst;
      } else if (ch == '[') {
        top_list_ = seen_events_ = true;
        state_ = kArrFirst;
      } else {
        c.fail("not a JSON object or list");
      }
      ++c.p;
      return;
    case kObjFirst:
    case kObjNext:
      if (ch == '}') {
        ++c.p;
        state_ = kDone;
        return;
      }
      if (state_ == kObjNext) {
        if (ch != ',') c.fail("expected ',' or '}'");
        ++c.p;
        state_ = kObjComma;
        return;
      }
      member(c);
      return;
    case kObjComma:
      member(c);
      return;
    case kArrFirst:
    case kArrNext:
      if (ch == ']') {
        ++c.p;
        state_ = top_list_ ? kDone : kObjNext;
        return;
      }
      if (state_ == kArrNext) {
        if (ch != ',') c.fail("expected ',' or ']'");
        ++c.p;
        state_ = kArrComma;
        return;
      }
      item(c);
      state_ = kArrNext;
      return;
    case kArrComma:
      item(c);
      state_ = kArrNext;
      return;
    case kDone:
      return;
  }
}

void Parser::member(Cur& c) {
  const char* kstart = c.p;
  c.expect('"');
  const char* ks;
  size_t kn;
  read_string(c, key_buf_, ks, kn);
  const char* kend = c.p;
  c.ws();
  c.expect(':');
  c.ws();
  if (kn == 11 && std::memcmp(ks, "traceEvents", 11) == 0) {
    if (lists_seen_ > skip_lists_) c.fail("a second traceEvents");
    if (lists_seen_ < skip_lists_ || *c.p != '[') {  // passed over, or not a list
      skip_value(c);
      ++lists_seen_;
      state_ = kObjNext;
      return;
    }
    ++c.p;
    ++lists_seen_;
    seen_events_ = true;
    state_ = kArrFirst;
    return;
  }
  const char* vstart = c.p;
  skip_value(c);
  if (!header_.empty()) header_.push_back(',');
  header_.append(kstart, kend);
  header_.push_back(':');
  header_.append(vstart, c.p);
  state_ = kObjNext;
}

void Parser::item(Cur& c) {
  if (*c.p == '{') {
    event(c);
    dispatch();
  } else {
    skip_value(c);
  }
  ++events_;
}

void Parser::event(Cur& c) {
  Event& e = ev_;
  e.ph = 0;
  e.name.kind = e.cat.kind = Str::kAbsent;
  e.pid.state = e.tid.state = IntVal::kAbsent;
  e.ts_state = e.dur_state = e.args_state = 0;
  e.a.seen = 0;
  ++c.p;
  c.ws();
  if (*c.p == '}') {
    ++c.p;
    return;
  }
  for (;;) {
    c.expect('"');
    int key = kEventKeys.match(c, key_buf_, kOtherKey);
    c.ws();
    c.expect(':');
    c.ws();
    switch (key) {
      case kPh: {
        Str ph;
        str_field(c, ph_buf_, ph);
        e.ph = ph.kind == Str::kString && ph.n == 1 && (*ph.s == 'X' || *ph.s == 'i') ? *ph.s : 0;
        break;
      }
      case kCat:
        str_field(c, cat_buf_, e.cat);
        break;
      case kName:
        str_field(c, name_buf_, e.name);
        break;
      case kPid:
        e.pid = int_field(c);
        break;
      case kTid:
        e.tid = int_field(c);
        break;
      case kTs:
        e.ts_state = time_field(c, e.ts);
        break;
      case kDur:
        e.dur_state = time_field(c, e.dur);
        break;
      case kArgs:
        args(c);
        break;
      case kOtherKey:
        skip_value(c);
        break;
    }
    c.ws();
    if (*c.p == ',') {
      ++c.p;
      c.ws();
    } else if (*c.p == '}') {
      ++c.p;
      return;
    } else {
      c.fail("expected ',' or '}'");
    }
  }
}

void Parser::args(Cur& c) {
  Args& a = ev_.a;
  a.seen = 0;
  a.dims_text = a.types_text = a.concrete_text = false;
  if (*c.p != '{') {
    ev_.args_state = skip_value(c) ? 0 : 2;  // `ev.get("args") or {}`
    return;
  }
  ev_.args_state = 1;
  ++c.p;
  c.ws();
  if (*c.p == '}') {
    ++c.p;
    return;
  }
  for (;;) {
    c.expect('"');
    int k = kArgKeys.match(c, key_buf_, kNoArg);
    c.ws();
    c.expect(':');
    c.ws();
    if (k < kNumIntArgs) {
      a.v[k] = int_field(c);
    } else if (k == kGrid || k == kBlock) {
      triple(c, k == kGrid ? a.grid : a.block);
    } else if (k == kSyncKind) {
      str_field(c, sync_buf_, a.sync);
    } else if (k == kCollName || k == kCollDtype || k == kPgName) {
      Str& out = k == kCollName ? a.coll : k == kCollDtype ? a.dtype : a.pg;
      str_field(c, k == kCollName ? coll_buf_ : k == kCollDtype ? dtype_buf_ : pg_buf_, out);
    } else if (k == kCallFrom) {
      str_field(c, call_from_buf_, a.call_from);
    } else if (k == kDims || k == kTypes || k == kConcrete) {
      std::string& out = k == kDims ? dims_ : k == kTypes ? types_ : concrete_;
      bool& text = k == kDims ? a.dims_text : k == kTypes ? a.types_text : a.concrete_text;
      out.clear();
      text = *c.p != 'n';
      if (!text) {
        skip_value(c);
      } else {
        const char* b = c.p;
        try {
          dump_value(c, out);
        } catch (const ParseError& e) {  // an object inside: json.dumps by the hook
          if (!hook_ || std::strncmp(e.msg, "object inside", 13) != 0) throw;
          c.p = b;
          skip_value(c);
          out = ask(kHookDump, b, static_cast<size_t>(c.p - b));
        }
      }
    } else {
      skip_value(c);
    }
    if (k != kNoArg) a.seen |= uint64_t{1} << k;
    c.ws();
    if (*c.p == ',') {
      ++c.p;
      c.ws();
    } else if (*c.p == '}') {
      ++c.p;
      return;
    } else {
      c.fail("expected ',' or '}'");
    }
  }
}

// str(value) for the fields the importer turns into text (name, cat, cuda_sync_kind).
void Parser::str_field(Cur& c, std::string& scratch, Str& out) {
  switch (*c.p) {
    case '"':
      ++c.p;
      out.kind = read_string(c, scratch, out.s, out.n) ? Str::kString : Str::kLone;
      return;
    case 'n':
      skip_value(c);
      out = {Str::kOther, "None", 4};
      return;
    case 't':
      skip_value(c);
      out = {Str::kOther, "True", 4};
      return;
    case 'f':
      skip_value(c);
      out = {Str::kOther, "False", 5};
      return;
    case '[':
    case '{': {
      const char* b = c.p;
      skip_value(c);
      out.kind = Str::kBad;
      if (hook_) {  // str(list), str(dict): Python's repr
        scratch = ask(kHookText, b, static_cast<size_t>(c.p - b));
        out = {Str::kOther, scratch.data(), scratch.size()};
      }
      return;
    }
    default: {
      Num num;
      const char* b = c.p;
      lex_number(c, num);
      if (num.special) {
        out.kind = Str::kBad;
        if (hook_) {  // str(float("nan")) is "nan"
          scratch = ask(kHookText, b, static_cast<size_t>(c.p - b));
          out = {Str::kOther, scratch.data(), scratch.size()};
        }
        return;
      }
      num_text(num, scratch);
      out = {Str::kOther, scratch.data(), scratch.size()};
    }
  }
}

IntVal Parser::int_field(Cur& c) {
  IntVal v;
  switch (*c.p) {
    case '"': {
      ++c.p;
      const char* s;
      size_t n;
      read_string(c, tmp_buf_, s, n);
      v = str_to_int(s, n);
      if (v.state == IntVal::kBad && hook_) v = hooked_int(ask(kHookInt, s, n));
      return v;
    }
    case 't':
      skip_value(c);
      v.set(false, 1, false);
      return v;
    case 'f':
      skip_value(c);
      v.set(false, 0, false);
      return v;
    case 'n':
    case '[':
    case '{':
      skip_value(c);
      v.state = IntVal::kNone;
      return v;
    default: {
      bool neg;
      uint64_t mag;
      if (quick_int(c, neg, mag)) {
        v.set(neg, mag, false);
        return v;
      }
      Num num;
      lex_number(c, num);
      return num_to_int(num);
    }
  }
}

void Parser::triple(Cur& c, Triple& t) {
  t.state = 0;
  if (*c.p != '[') {
    skip_value(c);
    return;
  }
  ++c.p;
  c.ws();
  if (*c.p == ']') {
    ++c.p;
    return;
  }
  int count = 0;
  for (;;) {
    IntVal v = int_field(c);
    if (count < 3) t.v[count] = v;
    ++count;
    c.ws();
    if (*c.p == ',') {
      ++c.p;
      c.ws();
    } else if (*c.p == ']') {
      ++c.p;
      break;
    } else {
      c.fail("expected ',' or ']'");
    }
  }
  t.state = count == 3;
}

uint8_t Parser::time_field(Cur& c, int64_t& out) {
  const char* b = c.p;
  uint8_t state = time_value(c, out);
  if (state != kTimeDefer || !hook_) return state;
  // "<TimeState> <ns>" from validate.us_to_ns_checked
  std::string r = ask(kHookTime, b, static_cast<size_t>(c.p - b));
  char* end = nullptr;
  long st = std::strtol(r.c_str(), &end, 10);
  if (st == kTimeOk) out = std::strtoll(end, nullptr, 10);
  if (st < kTimeOk || st > kTimeNotNumber || st == kTimeDefer)
    throw KinetoError("the time hook answered '" + r + "'");
  return static_cast<uint8_t>(st);
}

uint8_t Parser::time_value(Cur& c, int64_t& out) {
  char ch = *c.p;
  if (ch == '-' || (ch >= '0' && ch <= '9') || ch == 'N' || ch == 'I') {
    if (quick_ns(c, out)) return kTimeOk;
    Num num;
    lex_number(c, num);
    return num_to_ns(num, out);
  }
  if (ch == 't' || ch == 'f') {  // bool is an int in Python: True * 1000
    skip_value(c);
    out = ch == 't' ? 1000 : 0;
    return kTimeOk;
  }
  // A string may hold a number Python's Decimal reads ("12.5", " 1e3"): its rules decide.
  uint8_t state = ch == '"' ? kTimeDefer : kTimeNotNumber;
  skip_value(c);
  return state;
}

}  // namespace tbdtrace::kineto
