// Streaming parser for PyTorch profiler (Kineto) Chrome-trace JSON into staging columns.
//
// feed() takes the file's bytes in pieces of any size (a piece may end inside a token);
// each complete event of traceEvents is read in one pass, without a DOM and without a heap
// allocation per event, and appended as a row to its staging table (staging_tables.h). The other
// top-level members are kept as their raw JSON text (header()): they are small, and Python
// parses them. Unparsed input held between feed() calls is one event plus a piece.
//
// The parser is the one implementation of Kineto event semantics (docs/IMPORTERS.md): which
// events become rows, of which table, with which values and nulls. The few values whose
// reading follows Python's rules (a time written as text, an integer in Unicode digits, a
// name that is a list) are asked of a hook the importer sets (set_hook). Invalid JSON, or
// an event it cannot store, throws KinetoError; tbdtrace/importers/kineto/repair.py says
// what is wrong or repairs the file and feeds it again. It does no aggregation: it routes
// events by category (the map comes from Python) and columnarizes their fields.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kineto/json.h"
#include "kineto/staging_tables.h"

namespace tbdtrace::kineto {

class KinetoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Parser {
 public:
  // routes: category string -> staging table (Route) for "X" events.
  explicit Parser(const std::vector<std::pair<std::string, int>>& routes);
  ~Parser();

  void begin_file();  // resets the per-file state; tables and strings carry on
  // Per file, after begin_file: add `base` (its baseTimeNanoseconds) to every time, an event
  // whose time then leaves int64 skipped as out of range (the importer learns the base from
  // the header, which may follow the events: it sets it when a second parse needs it).
  void set_base(int64_t base) {
    base_ = base;
    has_base_ = true;
  }
  // Per file: pass over the first `n` traceEvents members (JSON keeps the last of
  // duplicated keys; a second one throws "a second traceEvents" and the importer parses
  // the file again skipping one more).
  void set_skip_lists(int n) { skip_lists_ = n; }
  // Values read by Python's rules, asked of the importer: kind, the value's text -> answer.
  //   kHookTime: a time's JSON text -> "<TimeState> <ns>"
  //   kHookInt:  a string's text that _any_int reads -> "" (None), "!<why>" (int() raises),
  //              or the integer in decimal
  //   kHookText: the JSON text of a list, object, NaN or Infinity -> str(value)
  //   kHookStep: a name "ProfilerStep#..." with non-ASCII bytes -> "1" if it is a step
  //   kHookDump: the JSON text of Input Dims/Input type/Concrete Inputs holding an object
  //              -> its compact json.dumps
  // Without a hook those values throw KinetoError (the fuzz harness runs without one).
  enum HookKind : int { kHookTime, kHookInt, kHookText, kHookStep, kHookDump };
  using Hook = std::function<std::string(int kind, const char* s, size_t n)>;
  void set_hook(Hook h);
  // Threads for the body of traceEvents (1: this one only). With 2, a piece of at least
  // `min_split_bytes` left to parse is cut in two at a line break that starts an event;
  // a second thread parses the second part into a parser of its own, while this one
  // parses the first. Its rows, strings and counts are taken over, in order, only when
  // this parser then stands exactly at that event inside traceEvents; otherwise (a line
  // break inside an event, an error, a value the second parser could not take) this one
  // parses the part again itself. Rows, errors and their byte offsets are those of the
  // one-thread parse (docs/DECISIONS.md). Called with the hook already set or not; the
  // hook is shared with the second thread (it takes Python's GIL itself). `take_back`:
  // when the second thread has not begun its part by the time this one is done with the
  // first (no CPU was free for it), this one parses it, with nothing to copy (tests turn
  // it off to see the second thread's parts used).
  void set_threads(int n, size_t min_split_bytes = kMinSplitBytes, bool take_back = true);
  static constexpr size_t kMinSplitBytes = size_t{1} << 16;
  // Parts the second thread parsed and this parser took over (all files).
  int64_t parts_taken() const { return parts_taken_; }
  void feed(const char* data, size_t n);
  void finish();
  // The largest unit (one event, one top-level member) the parser holds while waiting for
  // its end. A longer one (a multi-gigabyte string, a file of spaces inside an event)
  // throws KinetoError "a JSON value of more than N bytes at byte M" instead of growing
  // the buffer until memory runs out; whitespace between units is never held.
  static constexpr size_t kMaxUnitBytes = size_t{256} << 20;
  void set_max_unit_bytes(size_t n) { max_unit_ = n; }  // the fuzz harness: a small limit

  // Top-level members other than traceEvents, as `"key":value,"key":value` source text.
  const std::string& header() const { return header_; }
  bool top_level_list() const { return top_list_; }
  int64_t events() const { return events_; }
  std::vector<size_t> rows() const;

  // Events left out because a value is unusable (counted, never stored), in the order of
  // kSkipNames; the importer reports them (docs/IMPORTERS.md, "Skipped events").
  enum SkipReason : int {
    kSkipNotNumber,
    kSkipNotFinite,
    kSkipOutOfRange,
    kSkipNegativeDur,
    kSkipBadArgs,
    kNumSkipReasons
  };
  static constexpr const char* kSkipNames[kNumSkipReasons] = {
      "time_not_a_number", "time_not_finite", "time_out_of_range", "negative_duration",
      "args_not_an_object"};
  // This file's skips (reset by begin_file).
  const std::array<int64_t, kNumSkipReasons>& skipped() const { return skipped_file_; }
  std::vector<std::vector<TakenColumn>> take_tables();
  std::pair<Owned, Owned> take_strings();
  // The rows parsed since the last take, handed over as a batch; the string dictionary
  // stays (strings are interned once per parse, whatever the batches). Each string
  // column's codes are renumbered into the batch's own dictionary of that column (first
  // appearance among its valid rows), whose strings come with it: per table, per column,
  // (int64 offsets, data), empty for columns that are not strings.
  struct Batch {
    std::vector<std::vector<TakenColumn>> tables;
    std::vector<std::vector<std::pair<Owned, Owned>>> dicts;
  };
  Batch take_batch();
  size_t num_strings() const { return dict_.size(); }
  size_t string_bytes() const { return dict_.data_bytes(); }

  // A key expected after another one (parser.cpp, KeyTable; two per previous key, the most
  // recent first): the key's bytes and its closing quote in three masked little-endian
  // words, their length (0: no guess), its id, and the guess slot it leads to.
  struct KeyGuess {
    uint64_t w[3] = {0, 0, 0};
    uint64_t m[3] = {0, 0, 0};
    uint32_t len = 0;
    int id = 0;
    unsigned next = 0;
  };
  static constexpr unsigned kGuessStart = 128;  // the slot before an object's first key

  // Strings as parsed: a span of the input (or of a scratch buffer) and what it was.
  struct Str {
    enum : uint8_t { kAbsent, kString, kLone, kOther, kBad } kind = kAbsent;
    const char* s = nullptr;
    size_t n = 0;
  };
  struct Triple {
    uint8_t state = 0;  // 0 absent/not a 3-list, 1 three values
    IntVal v[3];
  };
  // Args the importer reads (bit positions in Args::seen).
  enum ArgKey : int {
    kExtUpper,
    kExtLower,
    kDevice,
    kStream,
    kContext,
    kCorrelation,
    kRegs,
    kShmem,
    kBytes,
    kCbid,
    kSeq,
    kFlops,
    kMemBytes,
    kDevType,
    kAddr,
    kDevId,
    kTotalAlloc,
    kTotalRes,
    kInNelems,
    kOutNelems,
    kGroupSize,
    kCollSeq,  // collective args (NCCL kernels)
    kNumIntArgs,
    kGrid = kNumIntArgs,
    kBlock,
    kSyncKind,
    kDims,
    kTypes,
    kConcrete,
    kCollName,
    kCollDtype,
    kPgName,
    kCallFrom,  // python_function: "file:line" of the call in its caller
    kNoArg      // kNoArg < 64: Args::seen is a 64-bit mask
  };

 private:
  struct Args {
    uint64_t seen = 0;
    IntVal v[kNumIntArgs];
    Triple grid, block;
    Str sync, coll, dtype, pg;  // cuda_sync_kind; Collective name, dtype, Process Group Name
    Str call_from;              // CallFrom (python_function)
    bool dims_text = false, types_text = false, concrete_text = false;  // else null/absent
    bool has(int k) const { return seen >> k & 1u; }
  };
  struct Event {
    char ph = 0;
    Str name, cat;
    IntVal pid, tid;
    uint8_t ts_state = 0, dur_state = 0;  // TimeState (json.h)
    int64_t ts = 0, dur = 0;
    uint8_t args_state = 0;  // 0 absent or falsy, 1 object, 2 other (the event is skipped)
    Args a;
  };

  size_t parse(const char* p, size_t n, uint64_t at, size_t stop);
  size_t parse_split(const char* p, size_t n, uint64_t at);
  struct Helper;  // the second thread and its parser (parser.cpp)
  std::unique_ptr<Helper> helper_;
  bool body_only_ = false;  // the second parser: stop at anything but an event or a comma
  int64_t parts_taken_ = 0;
  void step(Cur& c);
  void member(Cur& c);
  void item(Cur& c);
  void event(Cur& c);
  void args(Cur& c);
  void str_field(Cur& c, std::string& scratch, Str& out);
  [[gnu::always_inline]] inline void int_field(Cur& c, IntVal& v);
  [[gnu::noinline]] void int_field_other(Cur& c, IntVal& v);
  void triple(Cur& c, Triple& t);
  [[gnu::always_inline]] inline uint8_t time_field(Cur& c, int64_t& out);
  [[gnu::noinline]] uint8_t time_field_other(Cur& c, int64_t& out);
  uint8_t time_value(Cur& c, int64_t& out);

  void dispatch();
  void add_memory();
  [[noreturn, gnu::cold, gnu::noinline]] void decline(const char* why) const;
  void skip(int reason) { ++skipped_file_[reason]; }
  bool skip_time(uint8_t state);
  const IntVal& arg(int k) const;
  const IntVal& arg_or(int k, const IntVal& fallback) const;
  int64_t val(const IntVal& v, bool& ok) const;
  int32_t name_code(bool stored = true);
  bool step_name(const Str& n) const;
  std::string ask(int kind, const char* s, size_t n) const;
  int32_t str_code(const Str& s);
  int route_of(const Str& cat) const;

  std::vector<std::pair<std::string, int>> routes_;
  std::vector<KTable> tables_;
  StringDict dict_;

  // Per file.
  // k*Comma: just after a separator, which is a unit of its own so that whitespace after it
  // is never held for the next piece.
  enum State {
    kStart,
    kObjFirst,
    kObjNext,
    kObjComma,
    kArrFirst,
    kArrNext,
    kArrComma,
    kDone
  } state_ = kStart;
  bool top_list_ = false;
  bool seen_events_ = false;
  bool final_ = false;
  std::string header_;
  int64_t events_ = 0;
  std::array<int64_t, kNumSkipReasons> skipped_file_{};
  int64_t base_ = 0;
  bool has_base_ = false;
  int skip_lists_ = 0;  // traceEvents members to pass over
  int lists_seen_ = 0;  // traceEvents members met so far
  Hook hook_;
  std::string buf_;          // input not parsed yet (the tail of a cut unit)
  uint64_t buf_offset_ = 0;  // file offset of buf_[0]
  uint64_t fed_ = 0;         // file bytes fed so far
  size_t retry_at_ = 0;      // re-parse a cut unit once this many bytes are pending
  size_t max_unit_ = kMaxUnitBytes;
  void check_unit_size() const;

  Event ev_;
  KeyGuess ev_guess_[2 * (kGuessStart + 1)], arg_guess_[2 * (kGuessStart + 1)];  // 2 per slot
  std::string key_buf_, ph_buf_, name_buf_, cat_buf_, sync_buf_, coll_buf_, dtype_buf_, pg_buf_,
      call_from_buf_, tmp_buf_, dims_, types_, concrete_;
  const IntVal absent_{};
};

}  // namespace tbdtrace::kineto
