// Where the collector's output goes: whole chunks of column data, new entries of the string
// dictionary, and opaque records (the meta JSON, hardware counter images). The sink knows
// only the column core's types: no decoder, no CUPTI, no counters (kineto's ActivityLogger
// plays this part there). The spool file (spool.h) is the one production sink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/column_core.h"

namespace tbdtrace {

// Record types of write_record(); written into spool chunk headers, never renumber.
constexpr uint32_t kStringsChunk = 100;
constexpr uint32_t kMetaChunk = 101;
constexpr uint32_t kCountersChunk = 102;

class ChunkSink {
 public:
  struct Part {
    const void* data;
    size_t len;
  };
  virtual ~ChunkSink() = default;
  // Strings [first, end) of `dict`, which every later table chunk may name.
  virtual bool write_strings(const StringDict& dict, size_t first, size_t end) = 0;
  // One chunk of `table`'s rows (its TableDef id names it). False: the rows are lost.
  virtual bool write_table(const ColumnTable& table) = 0;
  // An opaque record of `type`, the concatenation of `parts`; rows = 0.
  virtual bool write_record(uint32_t type, const Part* parts, size_t n) = 0;
  // Rows the producer dropped without offering them (a chunk they depend on failed).
  virtual void count_lost(uint64_t rows) = 0;

  bool write_meta(const std::string& json) {
    Part p{json.data(), json.size()};
    return write_record(kMetaChunk, &p, 1);
  }
};

}  // namespace tbdtrace
