// The column core's one export to Python (numpy arrays that Python wraps as Arrow arrays):
// included by the production module (bindings.cpp) and the test module
// (testing/bindings_testing.cpp). Buffers handed over are owned by their numpy arrays.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "common/column_core.h"

namespace tbdtrace::pyexport {

namespace py = pybind11;

// A buffer handed over as a 1-d array that owns it and frees it (free_owned: a malloc'd
// block with free(), a mapping with munmap of its length, which the capsule keeps).
template <class T>
py::array owned_array(Owned o) {
  if (!o.ptr) {
    o.ptr = std::malloc(sizeof(T));
    o.mapped = 0;
    if (!o.ptr) throw std::bad_alloc();
  }
  const auto n = static_cast<py::ssize_t>(o.bytes / sizeof(T));
  auto* p = static_cast<T*>(o.ptr);
  if (!o.mapped) {
    py::capsule cap(o.ptr, [](void* q) { std::free(q); });
    return py::array_t<T>(n, p, cap);
  }
  auto* held = new Owned(o);
  py::capsule cap(held, [](void* q) {
    auto* h = static_cast<Owned*>(q);
    free_owned(*h);
    delete h;
  });
  return py::array_t<T>(n, p, cap);
}

inline py::array values_array(const TakenColumn& c) {
  switch (c.type) {
    case ColType::I32:
    case ColType::STR:
      return owned_array<int32_t>(c.data);
    case ColType::I64:
      return owned_array<int64_t>(c.data);
    case ColType::U64:
      return owned_array<uint64_t>(c.data);
  }
  return py::none();
}

// {column: (values, validity bitmap (uint8, Arrow's layout) or None, null count)}: the
// triple tbdtrace's Arrow conversion reads (pa.Array.from_buffers).
inline py::dict columns_dict(std::vector<TakenColumn>& cols) {
  py::dict out;
  for (auto& c : cols) {
    py::object valid = c.nulls ? py::object(owned_array<uint8_t>(c.valid)) : py::none();
    out[py::str(c.name)] = py::make_tuple(values_array(c), valid, c.nulls);
  }
  return out;
}

// A string dictionary handed over: (int64 offsets, uint8 data), string i is
// data[offsets[i]:offsets[i + 1]].
inline py::tuple strings_tuple(std::pair<Owned, Owned> s) {
  return py::make_tuple(owned_array<int64_t>(s.first), owned_array<uint8_t>(s.second));
}

// [(table, [(column, type name)])] for the layout checks against tbdtrace/schema.py.
inline py::list layout_list(const std::vector<TableDef>& defs) {
  py::list out;
  for (const auto& t : defs) {
    py::list cols;
    for (const auto& c : t.columns) cols.append(py::make_tuple(c.name, col_type_name(c.type)));
    out.append(py::make_tuple(t.name, cols));
  }
  return out;
}

}  // namespace tbdtrace::pyexport
