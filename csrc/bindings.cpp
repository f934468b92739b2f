// The private module tbdtrace._native: the collector, the Kineto parser and the hardware
// counters; nothing test-only (test and benchmark hooks: testing/bindings_testing.cpp).
#include <cxxabi.h>
#include <execinfo.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/column_export.h"
#include "common/proto_rows.h"
#include "kineto/parser.h"
#ifdef TBDTRACE_WITH_COLLECTOR
#include "collector/collector.h"
#include "collector/counters_host.h"
#endif

namespace py = pybind11;
using namespace tbdtrace;

namespace {

#ifdef TBDTRACE_WITH_COLLECTOR
// ---- Hardware counters, host side (csrc/collector/counters_host.h); errors are RuntimeError ----

void bind_counters(py::module_& m) {
  m.def("profiler_chips", &profiler_chips);
  m.def(
      "counter_metric_properties",
      [](const std::string& chip, const std::vector<std::string>& metrics) {
        py::list out;
        for (const auto& p : metric_properties(chip, metrics)) {
          py::dict d;
          d["name"] = p.name;
          d["description"] = p.description;
          d["hw_unit"] = p.hw_unit;
          d["dim_unit"] = p.dim_unit;
          d["type"] = p.type;
          out.append(d);
        }
        return out;
      },
      py::arg("chip"), py::arg("metrics"));
  m.def(
      "counter_config",
      [](const std::string& chip, const std::vector<std::string>& metrics) {
        CounterConfig c = counter_config(chip, metrics);
        return py::make_tuple(
            py::bytes(reinterpret_cast<const char*>(c.image.data()), c.image.size()), c.passes);
      },
      py::arg("chip"), py::arg("metrics"));
  m.def(
      "evaluate_counter_data",
      [](const std::string& chip, py::bytes image, const std::vector<std::string>& metrics) {
        std::string s = image;
        std::vector<uint8_t> data(s.begin(), s.end());
        py::list out;
        for (auto& r : evaluate_counter_data(chip, data, metrics))
          out.append(py::make_tuple(r.name, r.values));
        return out;
      },
      py::arg("chip"), py::arg("counter_data"), py::arg("metrics"));
}
#endif  // TBDTRACE_WITH_COLLECTOR

// ---- Kineto JSON parser (csrc/kineto) ----

namespace kt = tbdtrace::kineto;

// Everything parsed so far, handed over: {"tables": {table: {column: (values, validity
// bitmap or None, null count)}}, "strings": (int64 offsets, uint8 data)}.
py::dict take_parsed(kt::Parser& p) {
  std::vector<std::vector<TakenColumn>> tables;
  std::pair<Owned, Owned> strings;
  {
    py::gil_scoped_release nogil;
    tables = p.take_tables();
    strings = p.take_strings();
  }
  py::dict out, tdict;
  const auto& defs = kt::staging_defs();
  for (size_t i = 0; i < tables.size(); ++i)
    tdict[defs[i].name] = pyexport::columns_dict(tables[i]);
  out["tables"] = tdict;
  out["strings"] = pyexport::strings_tuple(strings);
  return out;
}

// The rows parsed since the last take (Parser::take_batch): {"tables": {table: {column:
// (values, validity bitmap or None, null count)}}, "dicts": {table: {string column: (int64
// offsets, uint8 data)}}}, string columns' codes indexing their own dictionary.
py::dict take_batch(kt::Parser& p) {
  kt::Parser::Batch b;
  {
    py::gil_scoped_release nogil;
    b = p.take_batch();
  }
  py::dict out, tdict, ddict;
  const auto& defs = kt::staging_defs();
  for (size_t i = 0; i < b.tables.size(); ++i) {
    py::dict cols;
    for (size_t j = 0; j < b.tables[i].size(); ++j)
      if (b.tables[i][j].type == ColType::STR)
        cols[py::str(b.tables[i][j].name)] = pyexport::strings_tuple(b.dicts[i][j]);
    tdict[defs[i].name] = pyexport::columns_dict(b.tables[i]);
    ddict[defs[i].name] = cols;
  }
  out["tables"] = tdict;
  out["dicts"] = ddict;
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
  Owned out{std::malloc(n ? n * 4 : 4), n * 4};
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
  py::array codes_out = pyexport::owned_array<int32_t>(out);
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
      .def("set_base", &kt::Parser::set_base, py::arg("base"))
      .def("set_skip_lists", &kt::Parser::set_skip_lists, py::arg("n"))
      .def("set_hook",
           [](kt::Parser& p, py::function f) {
             // Called from feed()/finish(), which run without the GIL.
             p.set_hook([f](int kind, const char* s, size_t n) -> std::string {
               py::gil_scoped_acquire gil;
               return f(kind, py::bytes(s, n)).cast<std::string>();
             });
           })
      .def("set_threads", &kt::Parser::set_threads, py::arg("n"),
           py::arg("min_split_bytes") = kt::Parser::kMinSplitBytes, py::arg("take_back") = true)
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
      .def_property_readonly("parts_taken", &kt::Parser::parts_taken)
      .def_property_readonly("num_strings", &kt::Parser::num_strings)
      .def("rows", &kt::Parser::rows)
      .def("skipped",
           [](const kt::Parser& p) {
             py::dict out;
             for (int i = 0; i < kt::Parser::kNumSkipReasons; ++i)
               if (p.skipped()[i]) out[kt::Parser::kSkipNames[i]] = p.skipped()[i];
             return out;
           })
      .def("take", &take_parsed)
      .def("take_batch", &take_batch);
  m.def("kineto_recode", &recode, py::arg("codes"), py::arg("valid"), py::arg("n_strings"));
  m.def("kineto_layout", [] { return pyexport::layout_list(kt::staging_defs()); });
}

// An Itanium C++ ABI mangled name (``_Z...``, what ROCm and Nsight Systems record for
// many kernels) demangled by the C++ runtime's own demangler, abi::__cxa_demangle; any
// other text (already demangled, a C name, a mangled name the runtime cannot read) comes
// back unchanged. Kernel names are classified by their function name, which only the
// demangled form separates from template arguments (analysis/engine/kernel_names.py).
std::string demangle(const std::string& name) {
  if (name.size() < 3 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return name;
  return std::string(out.get());
}

void bind_names(py::module_& m) {
  m.def("demangle", &demangle, py::arg("name"),
        "abi::__cxa_demangle of an Itanium-mangled name; other text unchanged");
}

// ---- interval search (tbdtrace/analysis/engine/intervals.py: innermost) ----
//
// Ranges sorted by (start, end descending); per query time t, the last range j with
// start[j] <= t <= end[j], -1 if none: from the last range starting at or before t, the
// chain of previous ranges with a greater-or-equal end (a monotonic stack), as deep as
// the nesting; past 64 steps, a max-tree descent (O(log n)).
using I64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

int64_t last_at_least(const std::vector<int64_t>& tree, size_t leaves, int64_t j, int64_t t) {
  // The last index <= j whose end is >= t in the max-tree over ends (leaves at [leaves, 2 leaves)).
  size_t node = leaves + static_cast<size_t>(j);
  if (tree[node] >= t) return j;
  // Climb while this node is a left child or its left sibling holds nothing >= t.
  while (node > 1) {
    if ((node & 1) && tree[node - 1] >= t) {
      node -= 1;
      while (node < leaves) node = tree[2 * node + 1] >= t ? 2 * node + 1 : 2 * node;
      return static_cast<int64_t>(node - leaves);
    }
    node >>= 1;
  }
  return -1;
}

// The search over the ranges at positions at(0) < at(1) < ... of starts/ends (every row,
// or one thread's rows of a whole table: no gathered copies). P: the type of the chain
// links (int32 below 2^31 ranges: half the memory).
template <class P, class At>
void innermost_at(const int64_t* s, const int64_t* e, size_t n, At at, const int64_t* t, size_t q,
                  int64_t* o) {
  std::vector<P> prev(n);
  std::vector<P> stack;
  for (size_t i = 0; i < n; ++i) {
    const int64_t ei = e[at(i)];
    while (!stack.empty() && e[at(static_cast<size_t>(stack.back()))] < ei) stack.pop_back();
    prev[i] = stack.empty() ? P(-1) : stack.back();
    stack.push_back(static_cast<P>(i));
  }
  std::vector<P>().swap(stack);
  std::vector<int64_t> tree;  // built on the first query that walks too far
  size_t leaves = 1;
  for (size_t k = 0; k < q; ++k) {
    size_t lo = 0, hi = n;  // the first position starting after t (upper_bound)
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (s[at(mid)] <= t[k])
        lo = mid + 1;
      else
        hi = mid;
    }
    int64_t j = static_cast<int64_t>(lo) - 1;
    int steps = 0;
    while (j >= 0 && e[at(static_cast<size_t>(j))] < t[k]) {
      if (++steps > 64) {
        if (tree.empty()) {
          while (leaves < n) leaves <<= 1;
          tree.assign(2 * leaves, std::numeric_limits<int64_t>::min());
          for (size_t i = 0; i < n; ++i) tree[leaves + i] = e[at(i)];
          for (size_t i = leaves - 1; i >= 1; --i) tree[i] = std::max(tree[2 * i], tree[2 * i + 1]);
        }
        j = last_at_least(tree, leaves, j, t[k]);
        break;
      }
      j = static_cast<int64_t>(prev[static_cast<size_t>(j)]);
    }
    o[k] = j;
  }
}

template <class At>
void innermost_any(const int64_t* s, const int64_t* e, size_t n, At at, const int64_t* t, size_t q,
                   int64_t* o) {
  if (n < static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    innermost_at<int32_t>(s, e, n, at, t, q, o);
  else
    innermost_at<int64_t>(s, e, n, at, t, q, o);
}

// The search over n ranges (position i at at(i)) for every time, without the GIL.
template <class At>
py::array_t<int64_t> innermost_of(I64Array& starts, I64Array& ends, size_t n, At at,
                                  I64Array& times) {
  const size_t q = static_cast<size_t>(times.shape(0));
  py::array_t<int64_t> out(static_cast<py::ssize_t>(q));
  const int64_t* s = starts.data();
  const int64_t* e = ends.data();
  const int64_t* t = times.data();
  int64_t* o = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    innermost_any(s, e, n, at, t, q, o);
  }
  return out;
}

py::array_t<int64_t> innermost_sorted(I64Array starts, I64Array ends, I64Array times) {
  if (starts.ndim() != 1 || ends.ndim() != 1 || times.ndim() != 1 ||
      starts.shape(0) != ends.shape(0))
    throw py::value_error("starts and ends: one-dimensional, of one length; times: 1-D");
  const size_t n = static_cast<size_t>(starts.shape(0));
  return innermost_of(starts, ends, n, [](size_t i) { return i; }, times);
}

py::array_t<int64_t> innermost_rows(I64Array starts, I64Array ends,
                                    py::array_t<int32_t, py::array::c_style> rows, I64Array times) {
  if (starts.ndim() != 1 || ends.ndim() != 1 || rows.ndim() != 1 || times.ndim() != 1 ||
      starts.shape(0) != ends.shape(0))
    throw py::value_error("starts and ends: one-dimensional, of one length; rows, times: 1-D");
  const size_t n = static_cast<size_t>(rows.shape(0));
  const size_t size = static_cast<size_t>(starts.shape(0));
  const int32_t* r = rows.data();
  for (size_t i = 0; i < n; ++i)
    if (r[i] < 0 || static_cast<size_t>(r[i]) >= size)
      throw py::index_error("innermost_rows: a row outside starts and ends");
  return innermost_of(starts, ends, n, [r](size_t i) { return static_cast<size_t>(r[i]); }, times);
}

void bind_intervals(py::module_& m) {
  m.def("innermost_sorted", &innermost_sorted, py::arg("starts"), py::arg("ends"), py::arg("times"),
        "per time, the last range (sorted by start, then end descending) holding it; -1 if none");
  m.def("innermost_rows", &innermost_rows, py::arg("starts"), py::arg("ends"), py::arg("rows"),
        py::arg("times"),
        "innermost_sorted over the ranges at int32 positions rows of starts/ends (a thread's "
        "rows of a table, in order), without gathering them; positions into rows, -1 if none");
}

}  // namespace

namespace {
// ---- protobuf rows (the Perfetto writer, tbdtrace/export/perfetto.py) ----
//
// The messages as Python declares them (common/proto_rows.h): a field is a tuple
// (kind, key bytes, int64 values or None, the int added to them, bool mask or None,
// sub-fields or None).
// Every array a message reads must have a value for the highest row its entries use.
proto::Message parse_message(const py::handle& fields, int64_t rows_needed,
                             std::vector<py::buffer_info>& keep) {
  proto::Message out;
  for (const auto& item : py::cast<py::list>(fields)) {
    auto t = py::cast<py::tuple>(item);
    if (t.size() != 6) throw py::value_error("a field is (kind, key, values, add, mask, sub)");
    proto::Field f;
    int kind = py::cast<int>(t[0]);
    if (kind < 0 || kind > 3) throw py::value_error("bad field kind");
    f.kind = static_cast<proto::Kind>(kind);
    f.key = py::cast<std::string>(t[1]);
    auto column = [&](const py::handle& h, ssize_t itemsize) -> const void* {
      py::buffer_info b = py::cast<py::buffer>(h).request();
      if (b.ndim != 1 || b.itemsize != itemsize || (b.shape[0] > 1 && b.strides[0] != itemsize))
        throw py::value_error("field values are contiguous int64, masks contiguous bool");
      if (b.shape[0] < rows_needed)
        throw py::value_error("a field has fewer rows than its entries use");
      const void* p = b.ptr;
      keep.push_back(std::move(b));
      return p;
    };
    bool has_values = f.kind == proto::Kind::kVarint || f.kind == proto::Kind::kFixed64;
    if (has_values) {
      if (t[2].is_none()) throw py::value_error("a varint or fixed64 field needs values");
      f.values = static_cast<const int64_t*>(column(t[2], 8));
    }
    f.add = py::cast<int64_t>(t[3]);
    if (f.add != 0 && f.kind != proto::Kind::kVarint) throw py::value_error("add is for varints");
    if (!t[4].is_none()) f.mask = static_cast<const uint8_t*>(column(t[4], 1));
    if (f.kind == proto::Kind::kMessage) f.sub = parse_message(t[5], rows_needed, keep);
    out.push_back(std::move(f));
  }
  return out;
}

py::bytes encode_rows(const py::list& kinds, py::array_t<int8_t, py::array::c_style> which,
                      py::array_t<int64_t, py::array::c_style> rows) {
  if (which.ndim() != 1 || rows.ndim() != 1 || which.shape(0) != rows.shape(0))
    throw py::value_error("which and rows are 1-d and of one length");
  size_t n = static_cast<size_t>(which.shape(0));
  const int8_t* wh = which.data();
  const int64_t* rw = rows.data();
  std::vector<int64_t> need(kinds.size(), 0);  // rows each kind's arrays must hold
  for (size_t e = 0; e < n; ++e) {
    if (wh[e] < 0 || static_cast<size_t>(wh[e]) >= kinds.size()) throw py::value_error("bad kind");
    if (rw[e] < 0) throw py::value_error("a negative row");
    need[static_cast<size_t>(wh[e])] = std::max(need[static_cast<size_t>(wh[e])], rw[e] + 1);
  }
  std::vector<proto::Message> messages;
  std::vector<py::buffer_info> keep;  // the arrays stay alive while they are read
  for (size_t k = 0; k < kinds.size(); ++k)
    messages.push_back(parse_message(kinds[k], need[k], keep));
  for (auto& m : messages) proto::prepare(m);
  std::string bytes;
  {
    py::gil_scoped_release nogil;
    bytes = proto::encode(messages, wh, rw, n);
  }
  py::bytes out(bytes);
  return out;
}

// ---- JSON text of a report document (tbdtrace/report/emit.py json_text, DECISIONS 239) ----
// Byte for byte what Python's json.dumps(value, indent=2) writes (ensure_ascii, NaN and
// Infinity allowed, keys in dict order), for the exact types a document is made of: dict
// with str keys, list, tuple, str, int, float, bool and None. Anything else (a subclass, a
// numpy scalar, a non-str key, nesting past kMaxDepth, which is also how a cycle ends) is
// declined and Python's json encodes the value instead, with its own errors.

constexpr int kMaxDepth = 256;

enum class Json { kOk, kDeclined, kError };

void json_indent(std::string& out, int level) {
  out.push_back('\n');
  out.append(static_cast<size_t>(level) * 2, ' ');
}

// json's c_encode_basestring_ascii: printable ASCII but '"' and '\\' as is, the five short
// escapes, every other code point as \uXXXX (lower-case hex; a surrogate pair above U+FFFF).
void json_string(std::string& out, PyObject* s) {
  static const char kHex[] = "0123456789abcdef";
  const Py_ssize_t n = PyUnicode_GET_LENGTH(s);
  const int kind = PyUnicode_KIND(s);
  const void* data = PyUnicode_DATA(s);
  out.push_back('"');
  auto unit = [&out](Py_UCS4 c) {
    char u[6] = {'\\',        'u', kHex[(c >> 12) & 15], kHex[(c >> 8) & 15], kHex[(c >> 4) & 15],
                 kHex[c & 15]};
    out.append(u, 6);
  };
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
      out.push_back(static_cast<char>(c));
      continue;
    }
    switch (c) {
      case '\\':
        out.append("\\\\");
        break;
      case '"':
        out.append("\\\"");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (c >= 0x10000) {
          c -= 0x10000;
          unit(0xd800 | ((c >> 10) & 0x3ff));
          unit(0xdc00 | (c & 0x3ff));
        } else {
          unit(c);
        }
    }
  }
  out.push_back('"');
}

Json json_value(std::string& out, PyObject* o, int level) {
  if (o == Py_None) {
    out.append("null");
  } else if (o == Py_True) {
    out.append("true");
  } else if (o == Py_False) {
    out.append("false");
  } else if (PyUnicode_CheckExact(o)) {
    json_string(out, o);
  } else if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) {  // past 64 bits: int's own repr, as json writes it
      PyObject* r = PyObject_Repr(o);
      if (r == nullptr) return Json::kError;
      Py_ssize_t len = 0;
      const char* t = PyUnicode_AsUTF8AndSize(r, &len);
      if (t != nullptr) out.append(t, static_cast<size_t>(len));
      Py_DECREF(r);
      if (t == nullptr) return Json::kError;
    } else {
      if (v == -1 && PyErr_Occurred()) return Json::kError;
      char buf[24];
      const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
      out.append(buf, static_cast<size_t>(end - buf));
    }
  } else if (PyFloat_CheckExact(o)) {
    const double d = PyFloat_AS_DOUBLE(o);
    if (std::isnan(d)) {
      out.append("NaN");
    } else if (std::isinf(d)) {
      out.append(d > 0 ? "Infinity" : "-Infinity");
    } else {  // float.__repr__, which json uses
      char* t = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, nullptr);
      if (t == nullptr) return Json::kError;
      out.append(t);
      PyMem_Free(t);
    }
  } else if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    const bool list = PyList_CheckExact(o);
    const Py_ssize_t n = list ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
    if (n == 0) {
      out.append("[]");
      return Json::kOk;
    }
    if (level >= kMaxDepth) return Json::kDeclined;
    out.push_back('[');
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (i > 0) out.push_back(',');
      json_indent(out, level + 1);
      Json r = json_value(out, list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i), level + 1);
      if (r != Json::kOk) return r;
    }
    json_indent(out, level);
    out.push_back(']');
  } else if (PyDict_CheckExact(o)) {
    if (PyDict_GET_SIZE(o) == 0) {
      out.append("{}");
      return Json::kOk;
    }
    if (level >= kMaxDepth) return Json::kDeclined;
    out.push_back('{');
    Py_ssize_t pos = 0;
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    bool first = true;
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (!PyUnicode_CheckExact(key)) return Json::kDeclined;
      if (!first) out.push_back(',');
      first = false;
      json_indent(out, level + 1);
      json_string(out, key);
      out.append(": ");
      Json r = json_value(out, value, level + 1);
      if (r != Json::kOk) return r;
    }
    json_indent(out, level);
    out.push_back('}');
  } else {
    return Json::kDeclined;
  }
  return Json::kOk;
}

py::object json_dumps_indent2(const py::handle& value) {
  std::string out;
  out.reserve(1 << 16);
  Json r = json_value(out, value.ptr(), 0);
  if (r == Json::kError) throw py::error_already_set();
  if (r == Json::kDeclined) return py::none();
  PyObject* s = PyUnicode_New(static_cast<Py_ssize_t>(out.size()), 127);
  if (s == nullptr) throw py::error_already_set();
  std::memcpy(PyUnicode_1BYTE_DATA(s), out.data(), out.size());
  return py::reinterpret_steal<py::object>(s);
}

void bind_json(py::module_& m) {
  m.def("json_dumps_indent2", &json_dumps_indent2, py::arg("value"),
        "json.dumps(value, indent=2), the same text, for dict (str keys), list, tuple, str, int, "
        "float, bool and None; None for a value holding anything else");
}

// TBDTRACE_NATIVE_BACKTRACE=1: a crash prints the native frames (library(+offset) for
// addr2line) before the default action, for diagnosing a crash on a GPU machine where no
// debugger can attach (scripts/gpu_diag.sh). Off unless asked for.
void on_fatal_signal(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  const char head[] = "tbdtrace: native backtrace:\n";
  ssize_t ignored = write(2, head, sizeof(head) - 1);
  (void)ignored;
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}
void maybe_install_backtrace() {
  const char* v = std::getenv("TBDTRACE_NATIVE_BACKTRACE");
  if (v == nullptr || v[0] != '1') return;
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGILL}) signal(sig, on_fatal_signal);
}
}  // namespace

PYBIND11_MODULE(_native, m) {
  maybe_install_backtrace();
  m.doc() = "tbdtrace native code: CUPTI collector and Kineto JSON parser (private)";
  bind_kineto(m);
  bind_names(m);
  bind_intervals(m);
  bind_json(m);
  m.def("encode_rows", &encode_rows, py::arg("kinds"), py::arg("which"), py::arg("rows"),
        "protobuf messages of columns, one per entry (common/proto_rows.h)");
#ifndef TBDTRACE_WITH_COLLECTOR
  // The analysis-only build (CMake -DTBDTRACE_COLLECTOR=OFF, or no CUPTI found).
  m.attr("has_collector") = false;
#else
  m.attr("has_collector") = true;
  m.def("cupti_version", &cupti_version, "cuptiGetVersion(), or -(CUPTI result) on failure");
  m.def("cupti_result_name", &cupti_result_name);
  m.def("cupti_library_path", &cupti_library_path);
  m.def("activity_names", &activity_names);
  m.def("default_activities", &default_activities);
  m.def(
      "start",
      [](const std::string& spool_path, const std::vector<std::string>& activities,
         uint64_t buffer_bytes, uint32_t buffer_count, uint32_t flush_interval_ms,
         const std::string& api_set, uint32_t buffer_max) {
        CollectorConfig cfg;
        cfg.spool_path = spool_path;
        cfg.activities = activities;
        cfg.buffer_bytes = buffer_bytes;
        cfg.buffer_count = buffer_count;
        cfg.flush_interval_ms = flush_interval_ms;
        cfg.api_set = api_set;
        cfg.buffer_max = buffer_max;
        StartResult r;
        {
          py::gil_scoped_release nogil;
          r = collector_start(cfg);
        }
        return py::make_tuple(r.ok, r.status, r.message);
      },
      py::arg("spool_path"), py::arg("activities"), py::arg("buffer_bytes"),
      py::arg("buffer_count"), py::arg("flush_interval_ms"), py::arg("api_set") = "lite",
      py::arg("buffer_max") = 64);
  m.def("stop", [] {
    py::gil_scoped_release nogil;
    return collector_stop();
  });
  m.def("running", &collector_running);
  // Capture windows in an in-process capture (tbdtrace.collector.inprocess).
  m.def("pause", [] {
    py::gil_scoped_release nogil;
    return collector_pause();
  });
  m.def("resume", [] {
    py::gil_scoped_release nogil;
    return collector_resume();
  });
  m.def("paused", &collector_paused);
  bind_counters(m);
#endif
}
