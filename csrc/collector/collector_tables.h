// The collector's tables: struct-of-arrays chunks on the column core (column_core.h) that
// mirror tbdtrace/schema.py.
//
// Each table is declared once below as an X-macro list of (column, type). The same list
// generates the typed column handles the decoder stores through and the layout that
// Python checks against schema.py (tests/native/test_layout.py), so the two cannot drift
// silently. Nulls are validity bits (the core's one convention); string columns hold codes
// into the collector's StringDict.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "chunk_sink.h"
#include "common/column_core.h"

namespace tbdtrace {

// clang-format off
#define TBD_KERNELS(X) X(start_ns, I64) X(end_ns, I64) X(device_id, I32) X(stream_id, I64) \
  X(context_id, I64) X(correlation_id, I64) X(name, STR) X(mangled_name, STR) \
  X(grid_x, I32) X(grid_y, I32) X(grid_z, I32) X(block_x, I32) X(block_y, I32) \
  X(block_z, I32) X(registers_per_thread, I32) X(static_shared_bytes, I32) \
  X(dynamic_shared_bytes, I32) X(graph_id, I64) X(graph_node_id, I64)
#define TBD_MEMCPY(X) X(start_ns, I64) X(end_ns, I64) X(device_id, I32) X(stream_id, I64) \
  X(context_id, I64) X(correlation_id, I64) X(bytes, I64) X(copy_kind, STR) \
  X(src_kind, STR) X(dst_kind, STR) X(src_device_id, I32) X(dst_device_id, I32)
#define TBD_MEMSET(X) X(start_ns, I64) X(end_ns, I64) X(device_id, I32) X(stream_id, I64) \
  X(context_id, I64) X(correlation_id, I64) X(bytes, I64) X(value, I32) X(memory_kind, STR)
#define TBD_MEMORY(X) X(ts_ns, I64) X(action, STR) X(bytes, I64) X(address, U64) \
  X(device_id, I32) X(memory_kind, STR) X(stream_id, I64) X(correlation_id, I64) X(pid, I32)
#define TBD_RUNTIME(X) X(start_ns, I64) X(end_ns, I64) X(pid, I32) X(tid, I64) \
  X(correlation_id, I64) X(name, STR) X(api, STR) X(cbid, I32)
#define TBD_MARKERS(X) X(start_ns, I64) X(end_ns, I64) X(pid, I32) X(tid, I64) X(name, STR) \
  X(domain, STR) X(kind, STR) X(marker_id, I64)
#define TBD_SYNC(X) X(start_ns, I64) X(end_ns, I64) X(stream_id, I64) X(context_id, I64) \
  X(correlation_id, I64) X(sync_kind, STR)
#define TBD_OVERHEAD(X) X(start_ns, I64) X(end_ns, I64) X(pid, I32) X(tid, I64) X(name, STR)
#define TBD_DEVICES(X) X(device_id, I32) X(name, STR) X(sm_count, I32) \
  X(compute_capability_major, I32) X(compute_capability_minor, I32) X(core_clock_khz, I64) \
  X(memory_bytes, I64) X(memory_bandwidth_bytes_per_s, I64) X(max_threads_per_block, I32) \
  X(shared_memory_per_block_bytes, I64) X(registers_per_block, I32) X(warp_size, I32)
// Not a schema table: goes into meta.json (extra.contexts).
#define TBD_CONTEXTS(X) X(context_id, I64) X(device_id, I32) X(null_stream_id, I64)

// Table ids are written into spool chunk headers: never renumber, only append.
#define TBD_TABLES(T) T(kernels, KERNELS, 1) T(memcpy, MEMCPY, 2) T(memset, MEMSET, 3) \
  T(memory, MEMORY, 4) T(runtime, RUNTIME, 5) T(markers, MARKERS, 6) T(sync, SYNC, 7) \
  T(overhead, OVERHEAD, 8) T(devices, DEVICES, 9) T(_contexts, CONTEXTS, 10)
// clang-format on

namespace kernels {
TBD_COLUMN_HANDLES(TBD_KERNELS)
}
namespace memcpy_ {
TBD_COLUMN_HANDLES(TBD_MEMCPY)
}
namespace memset_ {
TBD_COLUMN_HANDLES(TBD_MEMSET)
}
namespace memory {
TBD_COLUMN_HANDLES(TBD_MEMORY)
}
namespace runtime {
TBD_COLUMN_HANDLES(TBD_RUNTIME)
}
namespace markers {
TBD_COLUMN_HANDLES(TBD_MARKERS)
}
namespace sync {
TBD_COLUMN_HANDLES(TBD_SYNC)
}
namespace overhead {
TBD_COLUMN_HANDLES(TBD_OVERHEAD)
}
namespace devices {
TBD_COLUMN_HANDLES(TBD_DEVICES)
}
namespace contexts {
TBD_COLUMN_HANDLES(TBD_CONTEXTS)
}

#define TBD_TABLE_ID(lname, uname, id) uname = id,
enum TableId : uint32_t { TBD_TABLES(TBD_TABLE_ID) kNumTables = 11 };
#undef TBD_TABLE_ID

// All tables, in TableId order (index = id - 1).
const std::vector<TableDef>& table_defs();

// Interned strings; ids are indices, stable for the life of the process's collector.
struct Strings {
  StringDict dict;
  size_t spilled = 0;  // ids [0, spilled) are already in the sink
  int32_t intern(std::string_view s) { return dict.intern(s); }
  size_t size() const { return dict.size(); }
};

// One chunk of every table, being filled between spills.
struct ChunkSet {
  std::vector<ColumnTable> tables;  // index = TableId - 1
  ChunkSet();
  ColumnTable& t(TableId id) { return tables[id - 1]; }
  size_t rows() const;
  void clear();
};

// Hands `sink` the strings it has not had yet, then every non-empty table chunk, and clears
// the chunks. When the strings cannot be written the tables are dropped (they would name
// strings the sink lacks) and counted lost; strings.spilled only moves on success, so they
// are offered again next time. False when anything was lost.
bool spill(ChunkSink& sink, ChunkSet& chunks, Strings& strings);

}  // namespace tbdtrace
