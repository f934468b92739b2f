#include "collector_tables.h"

namespace tbdtrace {

const std::vector<TableDef>& table_defs() {
#define TBD_TABLE_DEF(lname, uname, id) {#lname, uname, {TBD_##uname(TBD_COLUMN_DEF)}},
  static const std::vector<TableDef> defs = {TBD_TABLES(TBD_TABLE_DEF)};
#undef TBD_TABLE_DEF
  return defs;
}

ChunkSet::ChunkSet() {
  for (const auto& d : table_defs()) tables.emplace_back(d);
}

size_t ChunkSet::rows() const {
  size_t n = 0;
  for (const auto& t : tables) n += t.rows();
  return n;
}

void ChunkSet::clear() {
  for (auto& t : tables) t.clear();
}

bool spill(ChunkSink& sink, ChunkSet& chunks, Strings& strings) {
  const size_t n_strings = strings.size();
  if (strings.spilled < n_strings) {
    if (!sink.write_strings(strings.dict, strings.spilled, n_strings)) {
      sink.count_lost(chunks.rows());
      chunks.clear();
      return false;
    }
    strings.spilled = n_strings;
  }
  bool ok = true;
  for (auto& t : chunks.tables) {
    if (t.rows() == 0) continue;
    if (!sink.write_table(t)) ok = false;
    t.clear();
  }
  return ok;
}

}  // namespace tbdtrace
