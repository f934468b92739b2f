// The Kineto JSON parser's staging tables, declared on the column core (csrc/common/column_core.h):
// typed columns with validity bitmaps, and one string dictionary.
//
// Staging tables are the parser's output, one per kind of event row it recognises; Python
// (tbdtrace/importers/kineto/tables.py) turns them into schema tables (adds the file's
// time base and rank, finds steps among the annotations, maps names to enums).
// Each staging column that shares its name with a column of the schema table(s) it feeds
// has that column's type; tests/native/test_kineto_layout.py checks this against
// tbdtrace/schema.py.
#pragma once

#include <vector>

#include "common/column_core.h"

namespace tbdtrace::kineto {

// clang-format off
#define KT_KERNELS(X) X(start_ns, I64) X(end_ns, I64) X(device_id, I32) X(stream_id, I64) \
  X(context_id, I64) X(correlation_id, I64) X(external_id, I64) X(name, STR) \
  X(grid_x, I32) X(grid_y, I32) X(grid_z, I32) X(block_x, I32) X(block_y, I32) \
  X(block_z, I32) X(registers_per_thread, I32) X(static_shared_bytes, I32) \
  X(coll_name, STR) X(coll_in_nelems, I64) X(coll_out_nelems, I64) X(coll_group_size, I32) \
  X(coll_dtype, STR) X(coll_pg_name, STR) X(coll_seq, I64)
#define KT_COPY(X) X(start_ns, I64) X(end_ns, I64) X(device_id, I32) X(stream_id, I64) \
  X(context_id, I64) X(correlation_id, I64) X(external_id, I64) X(bytes, I64) X(name, STR)
#define KT_RUNTIME(X) X(start_ns, I64) X(end_ns, I64) X(pid, I32) X(tid, I64) \
  X(correlation_id, I64) X(external_id, I64) X(name, STR) X(category, STR) X(cbid, I32)
#define KT_SYNC(X) X(start_ns, I64) X(end_ns, I64) X(device_id, I32) X(stream_id, I64) \
  X(context_id, I64) X(correlation_id, I64) X(pid, I32) X(tid, I64) X(sync_kind, STR)
#define KT_OPS(X) X(start_ns, I64) X(end_ns, I64) X(pid, I32) X(tid, I64) \
  X(external_id, I64) X(name, STR) X(category, STR) X(sequence_number, I64) \
  X(input_shapes, STR) X(input_dtypes, STR) X(concrete_inputs, STR) X(flops, I64) \
  X(call_from, STR)
// Annotation ranges, and op-category ranges named ProfilerStep#...: the markers table.
#define KT_MARKERS(X) X(start_ns, I64) X(end_ns, I64) X(pid, I32) X(tid, I64) \
  X(external_id, I64) X(name, STR) X(category, STR) X(device_id, I32)
#define KT_MEMORY(X) X(ts_ns, I64) X(bytes, I64) X(address, U64) X(device_id, I32) \
  X(c10_device_type, I64) X(pid, I32) X(tid, I64) X(total_allocated_bytes, I64) \
  X(total_reserved_bytes, I64)
// Staging tables: (name, enum, columns). Route ids (Python's category map) are the enum.
#define KT_TABLES(T) T(kernels, KERNELS, KT_KERNELS) T(memcpy, MEMCPY, KT_COPY) \
  T(memset, MEMSET, KT_COPY) T(runtime, RUNTIME, KT_RUNTIME) T(sync, SYNC, KT_SYNC) \
  T(ops, OPS, KT_OPS) T(markers, MARKERS, KT_MARKERS) T(memory, MEMORY, KT_MEMORY)
// clang-format on

namespace kcol {
namespace kernels {
TBD_COLUMN_HANDLES(KT_KERNELS)
}
namespace copy {
TBD_COLUMN_HANDLES(KT_COPY)
}
namespace runtime {
TBD_COLUMN_HANDLES(KT_RUNTIME)
}
namespace sync {
TBD_COLUMN_HANDLES(KT_SYNC)
}
namespace ops {
TBD_COLUMN_HANDLES(KT_OPS)
}
namespace markers {
TBD_COLUMN_HANDLES(KT_MARKERS)
}
namespace memory {
TBD_COLUMN_HANDLES(KT_MEMORY)
}
}  // namespace kcol

#define KT_TABLE_ENUM(lname, uname, cols) uname,
enum Route : int { KT_TABLES(KT_TABLE_ENUM) kNumRoutes, kNoRoute = -1 };
#undef KT_TABLE_ENUM

// Staging tables in Route order (TableDef::id = the route).
const std::vector<TableDef>& staging_defs();

// The parser's names for the core's types.
using KTable = ColumnTable;

}  // namespace tbdtrace::kineto
