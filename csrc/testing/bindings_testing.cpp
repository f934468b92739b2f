// tbdtrace._native_testing: test and benchmark hooks, kept out of the production module.
// Built only for in-place developer builds (setup.py build_ext --inplace, make native);
// never part of a wheel. Holds its own copy of the collector (csrc/collector/collector.cpp), driven
// through the fake CUPTI (fake_cupti.h); tbdtrace._native's copy is left alone.
#include <cupti_activity.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "collector/api_filter.h"
#include "collector/collector.h"
#include "collector/collector_tables.h"
#include "collector/counters_device.h"
#include "collector/decode.h"
#include "collector/spool.h"
#include "common/column_export.h"
#include "testing/fake_cupti.h"
#include "testing/testrecords.h"

namespace py = pybind11;
using namespace tbdtrace;
using tbdtrace::testing::FakeConfig;
using tbdtrace::testing::FakeCupti;

namespace {

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// {table: {column: (values, validity or None, null count)}} for the tables with rows: the
// production export (column_export.h).
py::dict chunks_to_python(ChunkSet& chunks) {
  py::dict out;
  for (auto& t : chunks.tables) {
    if (t.rows() == 0) continue;
    auto cols = t.take();
    out[t.def().name] = pyexport::columns_dict(cols);
  }
  return out;
}

std::vector<std::string> string_list(const Strings& strings) {
  std::vector<std::string> out;
  for (size_t i = 0; i < strings.size(); ++i) out.emplace_back(strings.dict.at(i));
  return out;
}

py::dict result(ChunkSet& chunks, Strings& strings, const Decoder& dec, int records, int status) {
  py::dict r;
  r["tables"] = chunks_to_python(chunks);
  r["strings"] = string_list(strings);
  r["records"] = records;
  r["status"] = status;
  r["unknown_kind"] = dec.stats().unknown_kind;
  r["marker_data"] = dec.stats().marker_data;
  r["unmatched_marker_end"] = dec.stats().unmatched_marker_end;
  return r;
}

// Copies `s` into 8-byte aligned storage: records are read through their struct types,
// which is only defined behaviour at their alignment.
std::vector<uint64_t> aligned_copy(const std::string& s) {
  std::vector<uint64_t> store(s.size() / 8 + 1);
  std::memcpy(store.data(), s.data(), s.size());
  return store;
}

// Walks a buffer with cuptiActivityGetNextRecord (the production walker) and decodes it.
py::dict walk_buffer(py::bytes data, size_t valid_size) {
  auto store = aligned_copy(data);
  auto* base = reinterpret_cast<uint8_t*>(store.data());
  ChunkSet chunks;
  Strings strings;
  Decoder dec(chunks, strings);
  CUpti_Activity* rec = nullptr;
  int n = 0;
  CUptiResult st;
  while ((st = cuptiActivityGetNextRecord(base, valid_size, &rec)) == CUPTI_SUCCESS) {
    dec.decode(rec);
    ++n;
  }
  dec.close_open_ranges();
  return result(chunks, strings, dec, n, static_cast<int>(st));
}

py::dict decode_records(const std::vector<py::bytes>& records) {
  ChunkSet chunks;
  Strings strings;
  Decoder dec(chunks, strings);
  int n = 0;
  for (const auto& b : records) {
    auto store = aligned_copy(b);
    dec.decode(reinterpret_cast<const CUpti_Activity*>(store.data()));
    ++n;
  }
  dec.close_open_ranges();
  return result(chunks, strings, dec, n, 0);
}

uint64_t write_spool(const std::string& path, const std::vector<py::bytes>& records, uint32_t pid,
                     size_t spill_every, const std::string& meta) {
  ChunkSet chunks;
  Strings strings;
  Decoder dec(chunks, strings);
  SpoolWriter w;
  std::string err = w.open(path, pid);
  if (!err.empty()) throw std::runtime_error(err);
  size_t n = 0;
  for (const auto& b : records) {
    auto store = aligned_copy(b);
    dec.decode(reinterpret_cast<const CUpti_Activity*>(store.data()));
    if (++n % spill_every == 0) spill(w, chunks, strings);
  }
  dec.close_open_ranges();
  spill(w, chunks, strings);
  if (!meta.empty()) w.write_meta(meta);
  w.close();
  return w.bytes_written();
}

py::bytes test_record(const std::string& kind, const py::dict& fields) {
  FieldValues ints;
  FieldStrings strs;
  for (auto item : fields) {
    auto k = py::cast<std::string>(item.first);
    if (py::isinstance<py::str>(item.second))
      strs[k] = py::cast<std::string>(item.second);
    else
      ints[k] = py::cast<int64_t>(item.second);
  }
  auto b = build_record(kind, ints, strs);
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

// n kernel records cycling over `names` distinct kernels, in one 8-byte aligned buffer.
std::vector<uint64_t> kernel_buffer(size_t n, size_t names) {
  std::vector<const char*> name_ptrs;
  for (size_t i = 0; i < names; ++i)
    name_ptrs.push_back(
        keep_string("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
                    "11FillFunctorIfEEEEvi" +
                    std::to_string(i)));
  const size_t stride = sizeof(CUpti_ActivityKernel10);
  std::vector<uint64_t> store(n * stride / 8 + 1);
  auto* buf = reinterpret_cast<uint8_t*>(store.data());
  for (size_t i = 0; i < n; ++i) {
    CUpti_ActivityKernel10 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.start = 1700000000000000000ull + i * 1000;
    r.end = r.start + 700;
    r.correlationId = static_cast<uint32_t>(i);
    r.gridX = 128, r.gridY = 1, r.gridZ = 1, r.blockX = 256, r.blockY = 1, r.blockZ = 1;
    r.streamId = 7, r.contextId = 1, r.registersPerThread = 32;
    r.name = name_ptrs[i % names];
    std::memcpy(buf + i * stride, &r, stride);
  }
  return store;
}

double ns_since(std::chrono::steady_clock::time_point t0, size_t n) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(n);
}

// Decode + columnarize benchmark (decoder alone, and with the CUPTI walker). Chunks are
// cleared (capacity kept) every `spill_rows` rows, as the collector's spill does.
py::dict bench_decode_kernels(size_t n, size_t names, size_t spill_rows) {
  auto store = kernel_buffer(n, names);
  auto* buf = reinterpret_cast<uint8_t*>(store.data());
  const size_t stride = sizeof(CUpti_ActivityKernel10);
  py::dict out;
  {
    ChunkSet chunks;
    Strings strings;
    Decoder dec(chunks, strings);
    size_t rows = 0;
    double c0 = thread_cpu_ns();
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) {
      dec.decode(reinterpret_cast<const CUpti_Activity*>(buf + i * stride));
      if (chunks.t(KERNELS).rows() == spill_rows) {
        rows += spill_rows;
        chunks.clear();
      }
    }
    out["decode_ns_per_record"] = ns_since(t0, n);
    out["rows"] = rows + chunks.t(KERNELS).rows();
    out["decode_cpu_ns_per_record"] = (thread_cpu_ns() - c0) / static_cast<double>(n);
  }
  if (cupti_version() > 0) {
    ChunkSet chunks;
    Strings strings;
    Decoder dec(chunks, strings);
    CUpti_Activity* rec = nullptr;
    size_t rows = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (cuptiActivityGetNextRecord(buf, n * stride, &rec) == CUPTI_SUCCESS) {
      dec.decode(rec);
      ++rows;
      if (chunks.t(KERNELS).rows() == spill_rows) chunks.clear();
    }
    out["walk_decode_ns_per_record"] = ns_since(t0, n);
    out["walk_rows"] = rows;
  }
  return out;
}

// The collector's whole per-record path after CUPTI: decode + columnarize + spool write
// (the spill: chunk headers, CRC-32, writev) to `path`, spilling every `spill_rows`.
py::dict bench_spool_kernels(const std::string& path, size_t n, size_t names, size_t spill_rows) {
  auto store = kernel_buffer(n, names);
  auto* buf = reinterpret_cast<uint8_t*>(store.data());
  const size_t stride = sizeof(CUpti_ActivityKernel10);
  ChunkSet chunks;
  Strings strings;
  Decoder dec(chunks, strings);
  SpoolWriter w;
  std::string err = w.open(path, 1);
  if (!err.empty()) throw std::runtime_error(err);
  double spill_ns = 0;
  double c0 = thread_cpu_ns();
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < n; ++i) {
    dec.decode(reinterpret_cast<const CUpti_Activity*>(buf + i * stride));
    if (chunks.t(KERNELS).rows() == spill_rows) {
      auto s0 = std::chrono::steady_clock::now();
      spill(w, chunks, strings);
      spill_ns +=
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - s0).count();
    }
  }
  auto s0 = std::chrono::steady_clock::now();
  spill(w, chunks, strings);
  spill_ns +=
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - s0).count();
  py::dict out;
  out["total_ns_per_record"] = ns_since(t0, n);
  out["total_cpu_ns_per_record"] = (thread_cpu_ns() - c0) / static_cast<double>(n);
  out["spill_ns_per_record"] = spill_ns / static_cast<double>(n);
  w.close();
  out["spool_bytes_per_record"] = static_cast<double>(w.bytes_written()) / static_cast<double>(n);
  out["spool_errors"] = w.errors();
  return out;
}

double bench_crc32(size_t nbytes, size_t repeat) {
  std::vector<uint8_t> b(nbytes);
  for (size_t i = 0; i < nbytes; ++i) b[i] = static_cast<uint8_t>(i * 131 + 7);
  uint32_t c = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t r = 0; r < repeat; ++r) c = crc32(b.data(), b.size(), c);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (c == 0x12345678) s += 1e-12;  // keeps the loop
  return static_cast<double>(nbytes) * static_cast<double>(repeat) / s;
}

// The fake stays alive while the collector may call it: from start() to stop(). Never
// destroyed (a static py::object would be released after the interpreter is gone).
py::object& fake_owner() {
  static auto* owner = new py::object();
  return *owner;
}

py::dict stats_dict(const FakeCupti& f) {
  auto s = f.stats();
  py::dict d;
  d["produced"] = s.produced;
  d["written"] = s.written;
  d["dropped"] = s.dropped;
  d["denied"] = s.denied;
  d["completed"] = s.completed;
  d["flushes"] = s.flushes;
  d["forced_flushes"] = s.forced_flushes;
  d["enables"] = s.enables;
  d["disables"] = s.disables;
  d["subscribes"] = s.subscribes;
  d["unsubscribes"] = s.unsubscribes;
  d["dirty_buffers"] = s.dirty_buffers;
  d["cold_buffers"] = s.cold_buffers;
  return d;
}

py::array_t<uint32_t> ids_array(std::vector<uint32_t> v) {
  py::array_t<uint32_t> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * 4);
  return a;
}

// A table of the four column types filled with rows given by formulas of their index i
// (tests/native/test_column_blocks.py computes the same values): a_i64 = i * 1000003 - 7;
// b_i32 = i, null where i % 7 == 3; c_str = i % 1000, null where i % 11 == 5; d_u64 =
// i << 33 | 5.
// clang-format off
#define BLOCK_COLS(X) X(a_i64, I64) X(b_i32, I32) X(c_str, STR) X(d_u64, U64)
// clang-format on
namespace blockcol {
TBD_COLUMN_HANDLES(BLOCK_COLS)
}

const TableDef& block_def() {
  static const TableDef d{"blocks", 0, {BLOCK_COLS(TBD_COLUMN_DEF)}};
  return d;
}

void block_fill(ColumnTable& t, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i) {
    size_t r = t.begin_row();
    t.set(blockcol::a_i64, r, static_cast<int64_t>(i) * 1000003 - 7);
    t.set_i32(blockcol::b_i32, r, static_cast<int64_t>(i), i % 7 != 3);
    t.set_str(blockcol::c_str, r, static_cast<int32_t>(i % 1000), i % 11 != 5);
    t.set(blockcol::d_u64, r, static_cast<uint64_t>(i) << 33 | 5);
  }
}

// Runs `steps` on one table, then hands it over as the production export does
// (column_export.h): ("fill", first, n) appends rows first..first+n-1; ("clear", 0, 0)
// forgets the rows and keeps the buffers (the collector after a spill); ("append",
// first, n) appends a second table holding those rows (ColumnTable::append, string codes
// mapped as they are). `initial_rows`: the first capacity; `prefault`: set_prefault.
py::dict column_blocks(const std::vector<std::tuple<std::string, size_t, size_t>>& steps,
                       size_t initial_rows, bool prefault) {
  std::vector<TakenColumn> cols;
  {
    py::gil_scoped_release nogil;
    ColumnTable t(block_def(), initial_rows);
    t.set_prefault(prefault);
    std::vector<int32_t> same(1000);
    for (int32_t k = 0; k < 1000; ++k) same[static_cast<size_t>(k)] = k;
    for (const auto& [op, first, n] : steps) {
      if (op == "fill") {
        block_fill(t, first, n);
      } else if (op == "clear") {
        t.clear();
      } else if (op == "append") {
        ColumnTable src(block_def(), initial_rows);
        block_fill(src, first, n);
        t.append(src, same.data());
      } else {
        throw std::invalid_argument("unknown step " + op);
      }
    }
    cols = t.take();
  }
  return pyexport::columns_dict(cols);
}

}  // namespace

PYBIND11_MODULE(_native_testing, m) {
  m.def("column_blocks", &column_blocks, py::arg("steps"), py::arg("initial_rows") = 1024,
        py::arg("prefault") = true);
  m.attr("column_map_bytes") = kMapBytes;
  m.doc() = "tbdtrace test and benchmark hooks (not for users; in-place builds only)";
  m.def("layout", [] {
    // [(table, spool table id, [(column, type)])]: the collector's tables
    // (csrc/collector/collector_tables.h).
    py::list out;
    for (const auto& t : table_defs()) {
      py::list cols;
      for (const auto& c : t.columns) cols.append(py::make_tuple(c.name, col_type_name(c.type)));
      out.append(py::make_tuple(t.name, t.id, cols));
    }
    return out;
  });
  m.def("record_size", [](const std::string& kind) { return build_record(kind, {}, {}).size(); });
  m.def("walk_buffer", &walk_buffer, py::arg("data"), py::arg("valid_size"));
  m.def("decode_records", &decode_records);
  m.def("test_record", &test_record);
  m.def("write_spool", &write_spool, py::arg("path"), py::arg("records"), py::arg("pid"),
        py::arg("spill_every") = 1000, py::arg("meta") = "");
  m.def(
      "write_counters_spool",
      [](const std::string& path, uint32_t pid, const std::string& chip,
         const std::vector<std::string>& metrics, uint64_t context_id, uint64_t dropped,
         py::bytes image) {
        std::string img = image;
        CounterData d{chip, metrics, context_id, dropped, {img.begin(), img.end()}};
        SpoolWriter w;
        std::string err = w.open(path, pid);
        if (!err.empty()) throw std::runtime_error(err);
        bool ok = write_counters(w, d);
        w.close();
        return ok;
      },
      py::arg("path"), py::arg("pid"), py::arg("chip"), py::arg("metrics"), py::arg("context_id"),
      py::arg("dropped_ranges"), py::arg("image"));
  m.def(
      "crc32",
      [](py::bytes b, uint32_t crc) {
        std::string s = b;
        return crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size(), crc);
      },
      py::arg("data"), py::arg("crc") = 0);
  m.def("bench_decode_kernels", &bench_decode_kernels, py::arg("n"), py::arg("names") = 64,
        py::arg("spill_rows") = 1 << 16);
  m.def("bench_spool_kernels", &bench_spool_kernels, py::arg("path"), py::arg("n"),
        py::arg("names") = 64, py::arg("spill_rows") = 1 << 16);
  m.def("bench_crc32_bytes_per_s", &bench_crc32, py::arg("nbytes"), py::arg("repeat"));

  py::class_<FakeCupti>(m, "FakeCupti")
      .def(py::init([](uint32_t threads, uint64_t records_per_thread, double rate_per_s,
                       uint32_t flush_delay_us, int subscribe_result,
                       const std::string& old_subscriber, int enable_result,
                       uint32_t enable_ok_count, bool hold_buffer) {
             FakeConfig c;
             c.threads = threads;
             c.records_per_thread = records_per_thread;
             c.rate_per_s = rate_per_s;
             c.flush_delay_us = flush_delay_us;
             c.subscribe_result = subscribe_result;
             c.old_subscriber = old_subscriber;
             c.enable_result = enable_result;
             c.enable_ok_count = enable_ok_count;
             c.hold_buffer = hold_buffer;
             return std::make_unique<FakeCupti>(c);
           }),
           py::arg("threads") = 4, py::arg("records_per_thread") = 1000,
           py::arg("rate_per_s") = 0.0, py::arg("flush_delay_us") = 0,
           py::arg("subscribe_result") = 0, py::arg("old_subscriber") = "",
           py::arg("enable_result") = 0, py::arg("enable_ok_count") = 1u << 30,
           py::arg("hold_buffer") = false)
      .def("start_producers", &FakeCupti::start_producers)
      .def("join_producers", &FakeCupti::join_producers, py::call_guard<py::gil_scoped_release>())
      .def("wait_in_flush", &FakeCupti::wait_in_flush, py::arg("timeout_ms"),
           py::call_guard<py::gil_scoped_release>())
      .def("stats", &stats_dict)
      .def("calls",
           [](const FakeCupti& f) {
             py::list out;
             for (const auto& c : f.calls()) out.append(py::make_tuple(c.what, c.id, c.value));
             return out;
           })
      .def("written_ids", [](const FakeCupti& f) { return ids_array(f.written_ids()); })
      .def("dropped_ids", [](const FakeCupti& f) { return ids_array(f.dropped_ids()); });

  m.def(
      "start",
      [](py::object fake, const std::string& spool_path, const std::vector<std::string>& acts,
         uint64_t buffer_bytes, uint32_t buffer_count, uint32_t flush_interval_ms,
         const std::string& api_set, uint32_t buffer_max, bool start_paused) {
        CollectorConfig cfg;
        cfg.api_set = api_set;
        cfg.buffer_max = buffer_max;
        cfg.start_paused = start_paused;
        cfg.spool_path = spool_path;
        cfg.activities = acts;
        cfg.buffer_bytes = buffer_bytes;
        cfg.buffer_count = buffer_count;
        cfg.flush_interval_ms = flush_interval_ms;
        cfg.api = fake.cast<FakeCupti*>();
        StartResult r;
        {
          py::gil_scoped_release nogil;
          r = collector_start(cfg);
        }
        if (r.ok) fake_owner() = fake;
        return py::make_tuple(r.ok, r.status, r.message);
      },
      py::arg("fake"), py::arg("spool_path"), py::arg("activities"), py::arg("buffer_bytes"),
      py::arg("buffer_count"), py::arg("flush_interval_ms"), py::arg("api_set") = "lite",
      py::arg("buffer_max") = 64, py::arg("start_paused") = false);
  m.def("lite_api_cbids", [] { return py::make_tuple(lite_runtime_cbids(), lite_driver_cbids()); });
  m.def("crc32_implementation", &crc32_implementation);
  m.def("pause", [] {
    py::gil_scoped_release nogil;
    return collector_pause();
  });
  m.def("resume", [] {
    py::gil_scoped_release nogil;
    return collector_resume();
  });
  m.def("paused", &collector_paused);
  m.def("stop", [] {
    std::string path;
    {
      py::gil_scoped_release nogil;
      path = collector_stop();
    }
    fake_owner() = py::none();
    return path;
  });
  m.def("running", &collector_running);
  m.def("install_signal_handlers", &collector_install_signal_handlers);
}
