#include "kineto/parser.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace tbdtrace::kineto {

namespace {

// Keys the parser looks for. Kineto writes the keys of one kind of event in one order, so the two
// keys that last followed the previous one (KeyGuesses, per parser: runtime, kernel and flow events
// interleave) are tried first: three masked word compares each against the key and its closing
// quote. Otherwise the key is found with one 32-byte look ahead: the first quote or backslash or
// control character ends it. A key without escapes or control characters (what Kineto writes) is
// its raw bytes, looked up by length and content in a small open-addressing table (one multiply,
// one or two probes, up to three word compares), and becomes the guess after the previous key. A
// raw key that is no key read here (Kineto's "queued", "Ev Idx", "id", ...) needs no decoding
// either: its bytes >= 0x80, valid or not, cannot decode to one of these ASCII keys. Any other key
// (escaped, holding a control character, longer than the look ahead, or cut by the end of the
// input) is read and decoded, then looked up by value.
using KeyGuess = Parser::KeyGuess;

struct KeyTable {
  static constexpr size_t kMaxKey = 24;  // longer keys: none read here
  static constexpr unsigned kSlots = 128;
  static_assert(kSlots == Parser::kGuessStart, "one guess per table slot, and one at the start");
  struct Slot {
    uint64_t w[3];  // the key's bytes, zero past its end (little-endian words)
    uint32_t len;   // 0: empty
    int id;
  };
  Slot slots[kSlots] = {};
  std::vector<std::pair<std::string, int>> all;

  static uint64_t load8(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint64_t ones(size_t n) {  // a mask of the first n bytes of a word (n may exceed 8)
    return n >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1;
  }
  static unsigned slot_of(uint64_t w0, size_t len) {
    return static_cast<unsigned>(((w0 ^ len) * 0x9E3779B97F4A7C15ull) >> 57) & (kSlots - 1);
  }

  KeyTable(std::initializer_list<std::pair<const char*, int>> keys) {
    for (const auto& [text, id] : keys) {
      std::string k(text);
      all.emplace_back(k, id);
      if (k.size() > kMaxKey) throw std::logic_error("key table: key too long");
      Slot s{{0, 0, 0}, static_cast<uint32_t>(k.size()), id};
      for (size_t i = 0; i < k.size(); ++i)
        s.w[i / 8] |= static_cast<uint64_t>(static_cast<unsigned char>(k[i])) << (i % 8 * 8);
      unsigned i = slot_of(s.w[0], k.size());
      while (slots[i].len) i = (i + 1) & (kSlots - 1);
      slots[i] = s;
    }
  }

  // c.p just past the opening quote; on return c.p is past the closing quote. `at`: the
  // guess slot of the previous key (kGuessStart for the first), then this key's.
  int match(Cur& c, std::string& scratch, int none, KeyGuess* guesses, unsigned& at) const {
#ifdef __SSE2__
    if (c.end - c.p >= 32) {
      const char* k = c.p;
      KeyGuess* g = guesses + 2 * at;  // two ways: the most recent first
      uint64_t w0 = load8(k), w1 = load8(k + 8), w2 = load8(k + 16);
      for (int way = 0; way < 2; ++way) {
        const KeyGuess& h = g[way];
        uint64_t miss =
            ((w0 & h.m[0]) ^ h.w[0]) | ((w1 & h.m[1]) ^ h.w[1]) | ((w2 & h.m[2]) ^ h.w[2]);
        if (!miss && h.len) {
          c.p += h.len;
          at = h.next;
          return h.id;
        }
      }
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + 16));
      const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                    ctl = _mm_set1_epi8(0x1f);
      auto stops = [&](__m128i x) {  // '"', '\\', or a control character
        __m128i m = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash));
        return static_cast<uint32_t>(
            _mm_movemask_epi8(_mm_or_si128(m, _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x))));
      };
      uint32_t stop = stops(a) | stops(b) << 16;
      size_t len = stop ? static_cast<size_t>(__builtin_ctz(stop)) : 32;
      if (len <= kMaxKey && k[len] == '"') {  // a plain key, short enough to be one of ours
        c.p += len + 1;
        uint64_t w[3] = {load8(k) & ones(len), len > 8 ? load8(k + 8) & ones(len - 8) : 0,
                         len > 16 ? load8(k + 16) & ones(len - 16) : 0};
        unsigned here = slot_of(w[0], len);
        int id = none;
        for (unsigned i = here;; i = (i + 1) & (kSlots - 1)) {
          const Slot& s = slots[i];
          if (s.len == 0) break;  // first: an empty key ("") must not match an empty slot
          if (s.len == len && s.w[0] == w[0] && s.w[1] == w[1] && s.w[2] == w[2]) {
            id = s.id;
            break;
          }
        }
        if (len < kMaxKey) {  // the key and its quote fit the guess's three words
          g[1] = g[0];
          w[len / 8] |= uint64_t{'"'} << (len % 8 * 8);
          for (size_t j = 0; j < 3; ++j) {
            g[0].w[j] = w[j];
            g[0].m[j] = len + 1 > 8 * j ? ones(len + 1 - 8 * j) : 0;
          }
          g[0].len = static_cast<uint32_t>(len + 1);
          g[0].id = id;
          g[0].next = here;
        }
        at = here;
        return id;
      }
      if (stop && k[len] == '"') {  // a plain key longer than ours
        c.p += len + 1;
        at = Parser::kGuessStart;
        return none;
      }
    }
#endif
    at = Parser::kGuessStart;
    const char* s;
    size_t n;
    read_string(c, scratch, s, n);
    for (const auto& [k, id] : all)
      if (k.size() == n && std::memcmp(k.data(), s, n) == 0) return id;
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

// The second thread of set_threads(2): a parser of its own, which parses one part of a
// piece (post) while the owner parses the part before it, then waits (wait).
struct Parser::Helper {
  explicit Helper(const Parser& owner) : parser(owner.routes_) { parser.body_only_ = true; }
  ~Helper() {
    if (thread.joinable()) {
      {
        std::lock_guard<std::mutex> l(mu);
        quit = true;
      }
      cv.notify_all();
      thread.join();
    }
  }

  Parser parser;
  std::vector<int32_t> map;  // parser's string code -> the owner's (those taken over so far)
  size_t min_split = kMinSplitBytes;
  bool may_take_back = true;
  bool broken = false;  // its strings no longer follow the owner's: not used again

  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  const char* p = nullptr;
  size_t n = 0;
  bool job = false, quit = false;
  bool started = false;  // the thread has begun the job posted last
  // The job's result: bytes consumed (whole units), or failed (any exception).
  size_t used = 0;
  bool failed = false;

  void post(const char* data, size_t size) {
    if (!thread.joinable()) thread = std::thread([this] { run(); });
    {
      std::lock_guard<std::mutex> l(mu);
      p = data;
      n = size;
      job = true;
      started = false;
    }
    cv.notify_all();
  }
  // Takes the job back when the thread has not begun it (no CPU was free for it: the
  // owner parses the part itself, and nothing is copied); true if taken back.
  bool take_back() {
    std::lock_guard<std::mutex> l(mu);
    if (!job || started) return false;
    job = false;
    return true;
  }
  void wait() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [this] { return !job; });
  }
  // Drops the rows of a part not taken over; strings the owner has not interned make the
  // helper unusable (the owner's dictionary must stay in first-appearance order).
  void discard() {
    for (auto& t : parser.tables_) t.clear();
    if (parser.dict_.size() > map.size()) broken = true;
  }
  void run() {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [this] { return job || quit; });
      if (quit) return;
      started = true;
      l.unlock();
      size_t u = 0;
      bool bad = false;
      try {
        u = parser.parse(p, n, 0, SIZE_MAX);
      } catch (...) {  // the owner parses the part again and meets the error itself
        bad = true;
      }
      l.lock();
      used = u;
      failed = bad;
      job = false;
      cv.notify_all();
    }
  }
};

Parser::~Parser() = default;

void Parser::set_hook(Hook h) {
  hook_ = std::move(h);
  if (helper_) helper_->parser.hook_ = hook_;
}

void Parser::set_threads(int n, size_t min_split_bytes, bool take_back) {
  if (n < 1 || n > 2) throw std::invalid_argument("threads must be 1 or 2");
  if (n == 1) {
    helper_.reset();
    return;
  }
  if (!helper_) {
    helper_ = std::make_unique<Helper>(*this);
    helper_->parser.hook_ = hook_;
    helper_->parser.max_unit_ = max_unit_;
  }
  helper_->min_split = std::max<size_t>(min_split_bytes, 2);
  helper_->may_take_back = take_back;
}

std::pair<Owned, Owned> Parser::take_strings() {
  if (helper_) helper_->broken = true;  // its codes map into the dictionary handed over
  return dict_.take();
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
  size_t used = parse_split(data + off, n - off, fed_ + off);
  buf_.assign(data + off + used, n - off - used);
  buf_offset_ = fed_ + off + used;
  fed_ += n;
  check_unit_size();
}

namespace {

// A '{' at or after `from` that likely starts an event of the list, or null. Only a guess:
// the parse that reaches it says whether it does (Parser::parse_split). A line break is
// never inside a JSON string (a raw control character is invalid there), so one followed
// by '{' (Kineto writes an event per line) is outside any string; in a file without line
// breaks, the first '{' after "}," (which a string may hold: then the guess is wrong).
const char* event_start_after(const char* from, const char* end) {
  constexpr ptrdiff_t kLook = ptrdiff_t{1} << 16;  // line breaks looked at after `from`
  const char* limit = end - from > kLook ? from + kLook : end;
  bool lines = false;
  for (const char* q = from; q < limit;) {
    const auto* nl = static_cast<const char*>(std::memchr(q, '\n', static_cast<size_t>(limit - q)));
    if (nl == nullptr) break;
    lines = true;
    const char* s = Cur::skip_ws(nl, end);
    if (s < end && *s == '{') return s;
    q = nl + 1;
  }
  if (lines) return nullptr;
  // No line break: a '{' after ',' after '}' (whitespace between them allowed).
  for (const char* q = from; q < limit;) {
    const auto* b = static_cast<const char*>(std::memchr(q, '{', static_cast<size_t>(limit - q)));
    if (b == nullptr) break;
    const char* k = b;
    while (k > from && Cur::is_ws(k[-1])) --k;
    if (k > from && k[-1] == ',') {
      --k;
      while (k > from && Cur::is_ws(k[-1])) --k;
      if (k > from && k[-1] == '}') return b;
    }
    q = b + 1;
  }
  return nullptr;
}

}  // namespace

// parse(p, n, at, SIZE_MAX), on two threads when set_threads(2) and the input is in the
// body of traceEvents (see set_threads).
size_t Parser::parse_split(const char* p, size_t n, uint64_t at) {
  Helper* h = helper_.get();
  if (h == nullptr || h->broken || n < h->min_split || (state_ != kArrComma && state_ != kArrNext))
    return parse(p, n, at, SIZE_MAX);
  const char* s = event_start_after(p + n / 2, p + n);
  if (s == nullptr) return parse(p, n, at, SIZE_MAX);
  const size_t split = static_cast<size_t>(s - p);
  Parser& q = h->parser;
  q.state_ = kArrComma;
  q.events_ = 0;
  q.skipped_file_.fill(0);
  q.base_ = base_;
  q.has_base_ = has_base_;
  q.final_ = false;
  h->post(s, n - split);
  size_t used;
  try {
    used = parse(p, n, at, split);
  } catch (...) {
    h->wait();
    h->discard();
    throw;
  }
  if (h->may_take_back && h->take_back())
    return used + parse(p + used, n - used, at + used, SIZE_MAX);
  h->wait();
  if (used != split || state_ != kArrComma || h->failed) {  // not an event of the list
    h->discard();
    return used + parse(p + used, n - used, at + used, SIZE_MAX);
  }
  ++parts_taken_;
  // Taken over: its strings first (in its order, which is their order of appearance),
  // then its rows, its counts and where it stopped.
  for (size_t k = h->map.size(); k < q.dict_.size(); ++k)
    h->map.push_back(dict_.intern(q.dict_.at(k)));
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t].append(q.tables_[t], h->map.data());
    q.tables_[t].clear();
  }
  events_ += q.events_;
  for (int r = 0; r < kNumSkipReasons; ++r) skipped_file_[r] += q.skipped_file_[r];
  state_ = q.state_;
  used = split + h->used;
  return used + parse(p + used, n - used, at + used, SIZE_MAX);
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
      // The units of traceEvents' body, which is nearly all of a file, without step()'s
      // dispatch: an event after its separator, and a separator after an item.
      if (c.p < c.end && state_ == kArrComma && *c.p == '{') {
        event(c);
        dispatch();
        ++events_;
        state_ = kArrNext;
        continue;
      }
      if (c.p < c.end && state_ == kArrNext && *c.p == ',') {
        ++c.p;
        state_ = kArrComma;
        continue;
      }
      if (body_only_) break;  // the second thread's part ends here
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

// A time as Kineto writes it (digits, a point, up to three more) inline; the rest out of line.
uint8_t Parser::time_field(Cur& c, int64_t& out) {
  if (quick_ns(c, out)) return kTimeOk;
  return time_field_other(c, out);
}

// Written in place: an IntVal returned by value was assembled on the stack byte by byte
// and copied out as one 16-byte load, a store-forwarding stall on every integer.
void Parser::int_field(Cur& c, IntVal& v) {
  char ch = *c.p;
  if (ch == '-' || is_digit(ch)) {  // first: nearly every integer field is a plain number
    bool neg;
    uint64_t mag;
    if (quick_int(c, neg, mag)) {
      v.set(neg, mag, false);
      return;
    }
  }
  int_field_other(c, v);
}

void Parser::int_field_other(Cur& c, IntVal& v) {
  switch (*c.p) {
    case '"': {
      ++c.p;
      const char* s;
      size_t n;
      read_string(c, tmp_buf_, s, n);
      v = str_to_int(s, n);
      if (v.state == IntVal::kBad && hook_) v = hooked_int(ask(kHookInt, s, n));
      return;
    }
    case 't':
      skip_value(c);
      v.set(false, 1, false);
      return;
    case 'f':
      skip_value(c);
      v.set(false, 0, false);
      return;
    case 'n':
    case '[':
    case '{':
      skip_value(c);
      v = IntVal{};
      v.state = IntVal::kNone;
      return;
    default: {
      Num num;
      lex_number(c, num);
      v = num_to_int(num);
      return;
    }
  }
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
  unsigned at = kGuessStart;
  for (;;) {
    c.expect('"');
    int key = kEventKeys.match(c, key_buf_, kOtherKey, ev_guess_, at);
    c.ws();
    c.expect(':');
    c.ws();
    switch (key) {
      case kPh: {
        if (c.end - c.p >= 3 && c.p[0] == '"' && c.p[2] == '"' && c.p[1] >= 0x20 && c.p[1] != '"' &&
            c.p[1] != '\\') {  // one ASCII character ("X"): no scan
          e.ph = c.p[1] == 'X' || c.p[1] == 'i' ? c.p[1] : 0;
          c.p += 3;
          break;
        }
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
        int_field(c, e.pid);
        break;
      case kTid:
        int_field(c, e.tid);
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
  unsigned at = kGuessStart;
  for (;;) {
    c.expect('"');
    int k = kArgKeys.match(c, key_buf_, kNoArg, arg_guess_, at);
    c.ws();
    c.expect(':');
    c.ws();
    if (k < kNumIntArgs) {
      int_field(c, a.v[k]);
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
    IntVal v;
    int_field(c, v);
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

uint8_t Parser::time_field_other(Cur& c, int64_t& out) {
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
