// The only file that includes pybind11: the private module tbdtrace._native.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cupti_activity.h>

#include <time.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "collector.h"
#include "columns.h"
#include "decode.h"
#include "kineto/parser.h"
#include "spool.h"
#include "testrecords.h"

namespace py = pybind11;
using namespace tbdtrace;

namespace {

double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

const char* type_name(CType t) {
  switch (t) {
    case CType::I32: return "int32";
    case CType::I64: return "int64";
    case CType::U64: return "uint64";
    case CType::STR: return "string";
  }
  return "?";
}

// Hands a column's storage to numpy without copying: the array moves into a capsule.
template <class T>
py::array to_numpy(PodVec<T>&& v, CType t) {
  auto* owner = new PodVec<T>(std::move(v));
  py::capsule cap(owner, [](void* p) { delete static_cast<PodVec<T>*>(p); });
  if (t == CType::U64)
    return py::array_t<uint64_t>(owner->size(), reinterpret_cast<uint64_t*>(owner->data()), cap);
  return py::array_t<T>(owner->size(), owner->data(), cap);
}

py::dict chunks_to_python(ChunkSet& chunks) {
  py::dict out;
  for (auto& t : chunks.tables) {
    if (t.rows == 0) continue;
    t.finalize();
    py::dict cols;
    for (size_t i = 0; i < t.cols.size(); ++i) {
      auto& c = t.cols[i];
      cols[t.def->columns[i].name] =
          c.is32() ? to_numpy(std::move(c.v32), c.type) : to_numpy(std::move(c.v64), c.type);
    }
    out[t.def->name] = cols;
    // The storage went to numpy: the chunk starts again from nothing.
    t.rows = t.room = 0;
    t.ptr.assign(t.cols.size(), nullptr);
  }
  return out;
}

py::dict result(ChunkSet& chunks, Strings& strings, const Decoder& dec, int records,
                int status) {
  py::dict r;
  r["tables"] = chunks_to_python(chunks);
  r["strings"] = strings.values;
  r["records"] = records;
  r["status"] = status;
  r["unknown_kind"] = dec.stats().unknown_kind;
  r["marker_data"] = dec.stats().marker_data;
  r["unmatched_marker_end"] = dec.stats().unmatched_marker_end;
  return r;
}

// Walks a buffer with cuptiActivityGetNextRecord (the production walker).
py::dict walk_buffer(py::bytes data, size_t valid_size, size_t misalign) {
  std::string s = data;
  // 8-byte aligned storage, then shifted by `misalign` to test CUPTI's alignment check.
  std::vector<uint64_t> store(s.size() / 8 + 2);
  auto* base = reinterpret_cast<uint8_t*>(store.data()) + misalign;
  std::memcpy(base, s.data(), s.size());
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

// Decodes records one by one (no CUPTI call): the decoder unit tests.
py::dict decode_records(const std::vector<py::bytes>& records) {
  ChunkSet chunks;
  Strings strings;
  Decoder dec(chunks, strings);
  int n = 0;
  for (const auto& b : records) {
    std::string s = b;
    std::vector<uint64_t> store(s.size() / 8 + 1);
    std::memcpy(store.data(), s.data(), s.size());
    dec.decode(reinterpret_cast<const CUpti_Activity*>(store.data()));
    ++n;
  }
  dec.close_open_ranges();
  return result(chunks, strings, dec, n, 0);
}

// Writes a spool the way the collector does (decode, spill every `spill_every` records,
// optional meta chunk): spool round-trip and crash tests without a device.
uint64_t write_spool(const std::string& path, const std::vector<py::bytes>& records,
                     uint32_t pid, size_t spill_every, const std::string& meta) {
  ChunkSet chunks;
  Strings strings;
  Decoder dec(chunks, strings);
  SpoolWriter w;
  std::string err = w.open(path, pid);
  if (!err.empty()) throw std::runtime_error(err);
  size_t n = 0;
  for (const auto& b : records) {
    std::string s = b;
    std::vector<uint64_t> store(s.size() / 8 + 1);
    std::memcpy(store.data(), s.data(), s.size());
    dec.decode(reinterpret_cast<const CUpti_Activity*>(store.data()));
    if (++n % spill_every == 0) w.spill(chunks, strings);
  }
  dec.close_open_ranges();
  w.spill(chunks, strings);
  if (!meta.empty()) w.write_meta(meta);
  w.close();
  return w.bytes_written();
}

py::bytes test_record(const std::string& kind, const py::dict& fields) {
  FieldValues ints;
  FieldStrings strs;
  for (auto item : fields) {
    auto k = py::cast<std::string>(item.first);
    if (py::isinstance<py::str>(item.second)) strs[k] = py::cast<std::string>(item.second);
    else ints[k] = py::cast<int64_t>(item.second);
  }
  auto b = build_record(kind, ints, strs);
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

// Decode+columnarize benchmark: n kernel records cycling over `names` distinct kernels,
// held in one buffer, decoded one by one on this thread. Returns ns per record for the
// decoder alone and for the CUPTI walker + decoder.
// Chunks are cleared (capacity kept) every `spill_rows` rows, as the collector's spill does.
py::dict bench_decode_kernels(size_t n, size_t names, size_t spill_rows) {
  std::vector<const char*> name_ptrs;
  for (size_t i = 0; i < names; ++i)
    name_ptrs.push_back(keep_string("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
                                    "11FillFunctorIfEEEEvi" + std::to_string(i)));
  const size_t stride = sizeof(CUpti_ActivityKernel10);
  std::vector<uint64_t> store(n * stride / 8 + 1);
  auto* buf = reinterpret_cast<uint8_t*>(store.data());
  for (size_t i = 0; i < n; ++i) {
    CUpti_ActivityKernel10 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.start = 1700000000000000000ull + i * 1000;
    r.end = r.start + 700;
    r.correlationId = static_cast<uint32_t>(i);
    r.gridX = 128; r.gridY = 1; r.gridZ = 1; r.blockX = 256; r.blockY = 1; r.blockZ = 1;
    r.streamId = 7; r.contextId = 1; r.registersPerThread = 32;
    r.name = name_ptrs[i % names];
    std::memcpy(buf + i * stride, &r, stride);
  }
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
      if (chunks.t(KERNELS).rows == spill_rows) { rows += spill_rows; chunks.clear(); }
    }
    auto t1 = std::chrono::steady_clock::now();
    out["decode_ns_per_record"] =
        std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
    out["rows"] = rows + chunks.t(KERNELS).rows;
    // CPU time of this thread: the figure that does not depend on other processes' load.
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
      if (chunks.t(KERNELS).rows == spill_rows) chunks.clear();
    }
    auto t1 = std::chrono::steady_clock::now();
    out["walk_decode_ns_per_record"] =
        std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
    out["walk_rows"] = rows;
  }
  return out;
}

// ---- Kineto JSON parser (csrc/kineto) ----

namespace kt = tbdtrace::kineto;

// A malloc'd buffer handed to numpy: the array owns it and frees it.
template <class T>
py::array owned_array(kt::Owned o) {
  void* p = o.ptr ? o.ptr : std::malloc(sizeof(T));
  if (!p) throw std::bad_alloc();
  py::capsule cap(p, [](void* q) { std::free(q); });
  return py::array_t<T>(static_cast<py::ssize_t>(o.bytes / sizeof(T)), static_cast<T*>(p), cap);
}

py::array column_array(kt::TakenColumn& c) {
  switch (c.type) {
    case kt::KType::I32:
    case kt::KType::STR: return owned_array<int32_t>(c.data);
    case kt::KType::I64: return owned_array<int64_t>(c.data);
    case kt::KType::U64: return owned_array<uint64_t>(c.data);
  }
  return py::none();
}

const char* ktype_name(kt::KType t) {
  switch (t) {
    case kt::KType::I32: return "int32";
    case kt::KType::I64: return "int64";
    case kt::KType::U64: return "uint64";
    case kt::KType::STR: return "string";
  }
  return "?";
}

// Everything parsed so far, handed over: {"tables": {table: {column: (values, validity
// bitmap or None, null count)}}, "strings": (int64 offsets, uint8 data)}.
py::dict take_parsed(kt::Parser& p) {
  std::vector<std::vector<kt::TakenColumn>> tables;
  std::pair<kt::Owned, kt::Owned> strings;
  {
    py::gil_scoped_release nogil;
    tables = p.take_tables();
    strings = p.take_strings();
  }
  py::dict out, tdict;
  const auto& defs = kt::staging_defs();
  for (size_t i = 0; i < tables.size(); ++i) {
    py::dict cols;
    for (auto& c : tables[i]) {
      py::object valid = c.nulls ? py::object(owned_array<uint8_t>(c.valid)) : py::none();
      cols[py::str(c.name)] = py::make_tuple(column_array(c), valid, c.nulls);
    }
    tdict[defs[i].name] = cols;
  }
  out["tables"] = tdict;
  out["strings"] = py::make_tuple(owned_array<int64_t>(strings.first),
                                  owned_array<uint8_t>(strings.second));
  return out;
}

// Dictionary codes -> codes numbered in first-appearance order over the valid rows, and the
// old code of each new one (so the dictionary becomes strings[used]).
py::tuple recode(py::array_t<int32_t, py::array::c_style | py::array::forcecast> codes,
                 py::object valid, size_t n_strings) {
  const size_t n = static_cast<size_t>(codes.size());
  const int32_t* c = codes.data();
  py::array_t<uint8_t, py::array::c_style | py::array::forcecast> vbits;
  const uint8_t* v = nullptr;
  if (!valid.is_none()) {
    vbits = valid;
    if (static_cast<size_t>(vbits.size()) * 8 < n) throw py::value_error("validity too short");
    v = vbits.data();
  }
  kt::Owned out{std::malloc(n ? n * 4 : 4), n * 4};
  if (!out.ptr) throw std::bad_alloc();
  std::vector<int32_t> used;
  bool bad = false;
  {
    py::gil_scoped_release nogil;
    auto* o = static_cast<int32_t*>(out.ptr);
    std::vector<int32_t> map(n_strings, -1);
    for (size_t i = 0; i < n; ++i) {
      if (v && !(v[i >> 3] >> (i & 7) & 1)) {
        o[i] = 0;
        continue;
      }
      int32_t id = c[i];
      if (id < 0 || static_cast<size_t>(id) >= n_strings) {
        bad = true;
        break;
      }
      int32_t m = map[id];
      if (m < 0) {
        m = map[id] = static_cast<int32_t>(used.size());
        used.push_back(id);
      }
      o[i] = m;
    }
  }
  py::array codes_out = owned_array<int32_t>(out);
  if (bad) throw py::value_error("code out of range");
  py::array_t<int32_t> used_arr(static_cast<py::ssize_t>(used.size()));
  if (!used.empty()) std::memcpy(used_arr.mutable_data(), used.data(), used.size() * 4);
  return py::make_tuple(codes_out, used_arr);
}

void bind_kineto(py::module_& m) {
  py::register_exception<kt::KinetoError>(m, "KinetoError", PyExc_ValueError);
  py::class_<kt::Parser>(m, "KinetoParser")
      .def(py::init<const std::vector<std::pair<std::string, int>>&>(), py::arg("routes"))
      .def("begin_file", &kt::Parser::begin_file)
      .def("feed",
           [](kt::Parser& p, py::buffer b) {
             py::buffer_info info = b.request();
             auto* data = static_cast<const char*>(info.ptr);
             size_t n = static_cast<size_t>(info.size * info.itemsize);
             py::gil_scoped_release nogil;
             p.feed(data, n);
           })
      .def("finish",
           [](kt::Parser& p) {
             py::gil_scoped_release nogil;
             p.finish();
           })
      .def("header", [](const kt::Parser& p) { return py::bytes(p.header()); })
      .def_property_readonly("top_level_list", &kt::Parser::top_level_list)
      .def_property_readonly("events", &kt::Parser::events)
      .def_property_readonly("num_strings", &kt::Parser::num_strings)
      .def("rows", &kt::Parser::rows)
      .def("skipped",
           [](const kt::Parser& p) {
             py::dict out;
             for (int i = 0; i < kt::Parser::kNumSkipReasons; ++i)
               if (p.skipped()[i]) out[kt::Parser::kSkipNames[i]] = p.skipped()[i];
             return out;
           })
      .def("take", &take_parsed);
  m.def("kineto_recode", &recode, py::arg("codes"), py::arg("valid"), py::arg("n_strings"));
  m.def("kineto_layout", [] {
    py::list out;
    for (const auto& t : kt::staging_defs()) {
      py::list cols;
      for (const auto& c : t.columns) cols.append(py::make_tuple(c.name, ktype_name(c.type)));
      out.append(py::make_tuple(t.name, cols));
    }
    return out;
  });
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "tbdtrace native code: CUPTI collector and Kineto JSON parser (private)";
  m.def("cupti_version", &cupti_version, "cuptiGetVersion(), or -(CUPTI result) on failure");
  m.def("cupti_result_name", &cupti_result_name);
  m.def("cupti_library_path", &cupti_library_path);
  m.def("layout", [] {
    py::list out;
    for (const auto& t : table_defs()) {
      py::list cols;
      for (const auto& c : t.columns) cols.append(py::make_tuple(c.name, type_name(c.type)));
      out.append(py::make_tuple(t.name, static_cast<int>(t.id), cols));
    }
    return out;
  });
  m.def("activity_names", &activity_names);
  m.def("default_activities", &default_activities);
  m.def("record_size", [](const std::string& kind) {
    return build_record(kind, {}, {}).size();
  });
  m.def(
      "start",
      [](const std::string& spool_path, const std::vector<std::string>& activities,
         uint64_t buffer_bytes, uint32_t buffer_count, uint32_t flush_interval_ms) {
        CollectorConfig cfg;
        cfg.spool_path = spool_path;
        cfg.activities = activities;
        cfg.buffer_bytes = buffer_bytes;
        cfg.buffer_count = buffer_count;
        cfg.flush_interval_ms = flush_interval_ms;
        StartResult r;
        {
          py::gil_scoped_release nogil;
          r = collector_start(cfg);
        }
        return py::make_tuple(r.ok, r.status, r.message);
      },
      py::arg("spool_path"), py::arg("activities"), py::arg("buffer_bytes"),
      py::arg("buffer_count"), py::arg("flush_interval_ms"));
  m.def("stop", [] {
    py::gil_scoped_release nogil;
    return collector_stop();
  });
  m.def("running", &collector_running);
  m.def("walk_buffer", &walk_buffer, py::arg("data"), py::arg("valid_size"),
        py::arg("misalign") = 0);
  m.def("decode_records", &decode_records);
  m.def("_test_record", &test_record);
  m.def("_write_spool", &write_spool, py::arg("path"), py::arg("records"), py::arg("pid"),
        py::arg("spill_every") = 1000, py::arg("meta") = "");
  m.def("_bench_decode_kernels", &bench_decode_kernels, py::arg("n"), py::arg("names") = 64,
        py::arg("spill_rows") = 1 << 16);
  bind_kineto(m);
}
