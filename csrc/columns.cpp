#include "columns.h"

namespace tbdtrace {

#define TBD_COL_DEF(col, type) ColumnDef{#col, CType::type},
const std::vector<TableDef>& table_defs() {
  static const std::vector<TableDef> defs = {
      {"kernels", KERNELS, {TBD_KERNELS(TBD_COL_DEF)}},
      {"memcpy", MEMCPY, {TBD_MEMCPY(TBD_COL_DEF)}},
      {"memset", MEMSET, {TBD_MEMSET(TBD_COL_DEF)}},
      {"memory", MEMORY, {TBD_MEMORY(TBD_COL_DEF)}},
      {"runtime", RUNTIME, {TBD_RUNTIME(TBD_COL_DEF)}},
      {"markers", MARKERS, {TBD_MARKERS(TBD_COL_DEF)}},
      {"sync", SYNC, {TBD_SYNC(TBD_COL_DEF)}},
      {"overhead", OVERHEAD, {TBD_OVERHEAD(TBD_COL_DEF)}},
      {"devices", DEVICES, {TBD_DEVICES(TBD_COL_DEF)}},
      {"_contexts", CONTEXTS, {TBD_CONTEXTS(TBD_COL_DEF)}},
  };
  return defs;
}
#undef TBD_COL_DEF

void TableChunk::reserve(size_t n) {
  make_room(n);
}

void TableChunk::make_room(size_t need) {
  size_t want = room ? 2 * room : 1024;
  if (want < need) want = need;
  ptr.resize(cols.size());
  for (size_t i = 0; i < cols.size(); ++i) {
    cols[i].set_size(rows);  // realloc keeps the rows written so far
    cols[i].reserve(want);
    ptr[i] = cols[i].raw();
  }
  room = want;
}

void TableChunk::finalize() {
  for (auto& c : cols) c.set_size(rows);
}

void TableChunk::clear() {
  for (auto& c : cols) c.clear();
  rows = 0;
}

ChunkSet::ChunkSet() {
  for (const auto& d : table_defs()) {
    TableChunk t;
    t.def = &d;
    for (const auto& c : d.columns) t.cols.push_back(Column{c.type, {}, {}});
    t.ptr.assign(t.cols.size(), nullptr);
    tables.push_back(std::move(t));
  }
}

size_t ChunkSet::rows() const {
  size_t n = 0;
  for (const auto& t : tables) n += t.rows;
  return n;
}

void ChunkSet::clear() {
  for (auto& t : tables) t.clear();
}

}  // namespace tbdtrace
