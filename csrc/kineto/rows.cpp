// Parser::dispatch: one parsed event -> one staging row (docs/IMPORTERS.md says which
// fields each table takes; tests/rawkineto.py, the tests' oracle, reads them independently).
#include <cstring>

#include "kineto/parser.h"

namespace tbdtrace::kineto {

// A time field that is not a usable value: count the event as skipped (true).
bool Parser::skip_time(uint8_t state) {
  switch (state) {
    case kTimeOk:
      return false;
    case kTimeNotFinite:
      skip(kSkipNotFinite);
      return true;
    case kTimeOutOfRange:
      skip(kSkipOutOfRange);
      return true;
    default:
      skip(kSkipNotNumber);
      return true;
  }
}

// An event the importer cannot store: "<why> in event <index>" (repair.py makes it one line).
void Parser::decline(const char* why) const {
  throw KinetoError(std::string(why) + " in event " + std::to_string(events_));
}

// ^ProfilerStep#(\d+)$ (Python's re: $ also matches before a final newline, \d any
// Unicode digit, which the hook decides).
bool Parser::step_name(const Str& n) const {
  if (n.kind != Str::kString || n.n < 14 || std::memcmp(n.s, "ProfilerStep#", 13) != 0)
    return false;
  const char* d = n.s + 13;
  size_t k = n.n - 13;
  if (d[k - 1] == '\n') --k;
  bool ascii_digits = k > 0;
  for (size_t i = 0; i < k && ascii_digits; ++i) ascii_digits = d[i] >= '0' && d[i] <= '9';
  if (ascii_digits) return true;
  for (size_t i = 0; i < n.n - 13; ++i)
    if (static_cast<uint8_t>(d[i]) >= 0x80) return hook_ && ask(kHookStep, n.s, n.n) == "1";
  return false;
}

const IntVal& Parser::arg(int k) const {
  return ev_.a.has(k) ? ev_.a.v[k] : absent_;
}

// args.get(key, fallback)
const IntVal& Parser::arg_or(int k, const IntVal& fallback) const {
  return ev_.a.has(k) ? ev_.a.v[k] : fallback;
}

// _int(v): the value when it fits int64, else null (ok = false).
int64_t Parser::val(const IntVal& v, bool& ok) const {
  if (v.state == IntVal::kBad) decline("an integer field int() cannot read");
  ok = v.i64_ok();
  return v.i64;
}

// `stored`: the name is a column of the table (memcpy and memset names are only matched
// against patterns, where an unpaired surrogate and its U+FFFD replacement read the same).
int32_t Parser::name_code(bool stored) {
  const Str& n = ev_.name;
  if (n.kind == Str::kAbsent) return dict_.intern("None", 4);  // str(ev.get("name"))
  if (n.kind == Str::kLone && stored)
    decline("a name with an unpaired UTF-16 surrogate, which cannot be stored,");
  if (n.kind == Str::kBad) decline("a name that is not text");
  return dict_.intern(n.s, n.n);
}

int32_t Parser::str_code(const Str& s) {
  return dict_.intern(s.s, s.n);
}

int Parser::route_of(const Str& cat) const {
  // The first byte before memcmp: several categories share a length ("kernel", "Memcpy").
  for (const auto& r : routes_)
    if (r.first.size() == cat.n && (cat.n == 0 || r.first[0] == cat.s[0]) &&
        std::memcmp(r.first.data(), cat.s, cat.n) == 0)
      return r.second;
  return kNoRoute;
}

void Parser::dispatch() {
  const Event& e = ev_;
  if (e.ph == 'i' && e.name.kind == Str::kString && e.name.n == 8 &&
      std::memcmp(e.name.s, "[memory]", 8) == 0) {
    add_memory();
    return;
  }
  if (e.ph != 'X' || e.ts_state == 0) return;
  // Only events that would become rows are checked: a category other than a string, or
  // one not routed, is ignored whatever its values.
  int route = e.cat.kind == Str::kString ? route_of(e.cat) : kNoRoute;
  if (route == kNoRoute) return;
  // Value checks, in the documented order (docs/IMPORTERS.md, "Skipped events").
  if (e.ts_state == kTimeDefer || e.dur_state == kTimeDefer) decline("a time given as text");
  if (skip_time(e.ts_state) || (e.dur_state != kTimeAbsent && skip_time(e.dur_state))) return;
  int64_t dur = e.dur_state ? e.dur : 0, start = e.ts, end;
  if (dur < 0) return skip(kSkipNegativeDur);
  if (__builtin_add_overflow(start, dur, &end)) return skip(kSkipOutOfRange);
  if (has_base_ &&
      (__builtin_add_overflow(start, base_, &start) || __builtin_add_overflow(end, base_, &end)))
    return skip(kSkipOutOfRange);
  if (e.args_state == 2) return skip(kSkipBadArgs);
  bool ok;
  const IntVal& ext_v = arg_or(kExtUpper, arg(kExtLower));
  int64_t ext = val(ext_v, ok);
  bool ext_ok = ok;
  // An op range named ProfilerStep#<n> is a marker (and a step).
  if (route == OPS && step_name(e.name)) route = MARKERS;
  KTable& t = tables_[route];
  // Inlined: a call per column cost more than the store it makes.
  auto i64 = [&](size_t r, I64Col col, const IntVal& v) __attribute__((always_inline)) {
    int64_t x = val(v, ok);
    t.set_i64(col, r, x, ok);
  };
  auto i32 = [&](size_t r, I32Col col, const IntVal& v) __attribute__((always_inline)) {
    int64_t x = val(v, ok);
    t.set_i32(col, r, x, ok);
  };
  auto code = [&](size_t r, StrCol col, int32_t id) { t.set(col, r, id); };
  switch (route) {
    case KERNELS: {
      namespace k = kcol::kernels;
      size_t r = t.begin_row();
      t.set_i64(k::start_ns, r, start, true);
      t.set_i64(k::end_ns, r, end, true);
      i32(r, k::device_id, arg_or(kDevice, e.pid));
      i64(r, k::stream_id, arg_or(kStream, e.tid));
      i64(r, k::context_id, arg(kContext));
      i64(r, k::correlation_id, arg(kCorrelation));
      t.set_i64(k::external_id, r, ext, ext_ok);
      code(r, k::name, name_code());
      const Triple& g = e.a.grid;
      const Triple& b = e.a.block;
      bool gv = e.a.has(kGrid) && g.state, bv = e.a.has(kBlock) && b.state;
      const I32Col grid[3] = {k::grid_x, k::grid_y, k::grid_z};
      const I32Col block[3] = {k::block_x, k::block_y, k::block_z};
      for (int i = 0; i < 3; ++i) {
        i32(r, grid[i], gv ? g.v[i] : absent_);
        i32(r, block[i], bv ? b.v[i] : absent_);
      }
      i32(r, k::registers_per_thread, arg(kRegs));
      i32(r, k::static_shared_bytes, arg(kShmem));
      // Collective args (NCCL kernels): strings only when text, as isinstance(v, str).
      auto text = [&](StrCol col, int key, const Str& s) {
        bool ok = e.a.has(key) && s.kind == Str::kString;
        t.set_str(col, r, ok ? str_code(s) : 0, ok);
      };
      text(k::coll_name, kCollName, e.a.coll);
      text(k::coll_dtype, kCollDtype, e.a.dtype);
      text(k::coll_pg_name, kPgName, e.a.pg);
      i64(r, k::coll_in_nelems, arg(kInNelems));
      i64(r, k::coll_out_nelems, arg(kOutNelems));
      i32(r, k::coll_group_size, arg(kGroupSize));
      i64(r, k::coll_seq, arg(kCollSeq));
      return;
    }
    case MEMCPY:
    case MEMSET: {
      namespace k = kcol::copy;
      size_t r = t.begin_row();
      t.set_i64(k::start_ns, r, start, true);
      t.set_i64(k::end_ns, r, end, true);
      i32(r, k::device_id, arg_or(kDevice, e.pid));
      i64(r, k::stream_id, arg_or(kStream, e.tid));
      i64(r, k::context_id, arg(kContext));
      i64(r, k::correlation_id, arg(kCorrelation));
      t.set_i64(k::external_id, r, ext, ext_ok);
      i64(r, k::bytes, arg(kBytes));
      code(r, k::name, name_code(false));
      return;
    }
    case RUNTIME: {
      namespace k = kcol::runtime;
      size_t r = t.begin_row();
      t.set_i64(k::start_ns, r, start, true);
      t.set_i64(k::end_ns, r, end, true);
      i32(r, k::pid, e.pid);
      i64(r, k::tid, e.tid);
      i64(r, k::correlation_id, arg(kCorrelation));
      t.set_i64(k::external_id, r, ext, ext_ok);
      code(r, k::name, name_code());
      code(r, k::category, str_code(e.cat));
      i32(r, k::cbid, arg(kCbid));
      return;
    }
    case SYNC: {
      namespace k = kcol::sync;
      size_t r = t.begin_row();
      t.set_i64(k::start_ns, r, start, true);
      t.set_i64(k::end_ns, r, end, true);
      i32(r, k::device_id, arg(kDevice));
      i64(r, k::stream_id, arg(kStream));
      i64(r, k::context_id, arg(kContext));
      i64(r, k::correlation_id, arg(kCorrelation));
      i32(r, k::pid, e.pid);
      i64(r, k::tid, e.tid);
      // args.get("cuda_sync_kind", name): only a string can name a kind; others are null.
      const Str& kind = e.a.has(kSyncKind) ? e.a.sync : e.name;
      bool text = kind.kind == Str::kString;
      t.set_str(k::sync_kind, r, text ? str_code(kind) : 0, text);
      return;
    }
    case OPS: {
      namespace k = kcol::ops;
      size_t r = t.begin_row();
      t.set_i64(k::start_ns, r, start, true);
      t.set_i64(k::end_ns, r, end, true);
      i32(r, k::pid, e.pid);
      i64(r, k::tid, e.tid);
      t.set_i64(k::external_id, r, ext, ext_ok);
      code(r, k::name, name_code());
      code(r, k::category, str_code(e.cat));
      i64(r, k::sequence_number, arg(kSeq));
      bool dims = e.a.has(kDims) && e.a.dims_text, types = e.a.has(kTypes) && e.a.types_text;
      t.set_str(k::input_shapes, r, dims ? dict_.intern(dims_.data(), dims_.size()) : 0, dims);
      t.set_str(k::input_dtypes, r, types ? dict_.intern(types_.data(), types_.size()) : 0, types);
      bool concrete = e.a.has(kConcrete) && e.a.concrete_text;
      t.set_str(k::concrete_inputs, r,
                concrete ? dict_.intern(concrete_.data(), concrete_.size()) : 0, concrete);
      i64(r, k::flops, arg(kFlops));
      // python_function: where its caller called it (CallFrom, written by recent torch).
      bool from = e.a.has(kCallFrom) && e.a.call_from.kind == Str::kString;
      t.set_str(k::call_from, r, from ? str_code(e.a.call_from) : 0, from);
      return;
    }
    case MARKERS: {
      namespace k = kcol::markers;
      size_t r = t.begin_row();
      t.set_i64(k::start_ns, r, start, true);
      t.set_i64(k::end_ns, r, end, true);
      i32(r, k::pid, e.pid);
      i64(r, k::tid, e.tid);
      t.set_i64(k::external_id, r, ext, ext_ok);
      code(r, k::name, name_code());
      code(r, k::category, str_code(e.cat));
      i32(r, k::device_id, arg_or(kDevice, e.pid));  // GPU annotations: args.get("device", pid)
      return;
    }
    default:
      return;
  }
}

// A "[memory]" instant event (KinetoImporter._memory).
void Parser::add_memory() {
  const Event& e = ev_;
  if (e.args_state == 2) return skip(kSkipBadArgs);
  bool ok;
  int64_t nbytes = val(arg(kMemBytes), ok);
  if (!ok || e.ts_state == 0) return;
  if (e.ts_state == kTimeDefer) decline("a time given as text");
  if (skip_time(e.ts_state)) return;
  int64_t ts = e.ts;
  if (has_base_ && __builtin_add_overflow(ts, base_, &ts)) return skip(kSkipOutOfRange);
  namespace k = kcol::memory;
  KTable& t = tables_[MEMORY];
  size_t r = t.begin_row();
  t.set_i64(k::ts_ns, r, ts, true);
  t.set_i64(k::bytes, r, nbytes, true);
  const IntVal& addr = arg(kAddr);
  if (addr.state == IntVal::kBad) decline("an integer field int() cannot read");
  t.set_u64(k::address, r, addr.u64, addr.u64_ok());
  auto i64 = [&](I64Col col, const IntVal& v) {
    int64_t x = val(v, ok);
    t.set_i64(col, r, x, ok);
  };
  auto i32 = [&](I32Col col, const IntVal& v) {
    int64_t x = val(v, ok);
    t.set_i32(col, r, x, ok);
  };
  i32(k::device_id, arg(kDevId));
  i64(k::c10_device_type, arg(kDevType));
  i32(k::pid, e.pid);
  i64(k::tid, e.tid);
  i64(k::total_allocated_bytes, arg(kTotalAlloc));
  i64(k::total_reserved_bytes, arg(kTotalRes));
}

}  // namespace tbdtrace::kineto
