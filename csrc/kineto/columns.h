// Column storage for the Kineto JSON parser: typed value buffers with Arrow validity
// bitmaps, grouped into the staging tables the parser fills, and a string dictionary.
//
// Staging tables are the parser's output, one per kind of event row it recognises; Python
// (tbdtrace/importers/kineto/tables.py) turns them into schema tables (adds the file's
// time base and rank, finds steps among the annotations, maps names to enums).
// Each staging column that shares its name with a column of the schema table(s) it feeds
// has that column's type; tests/native/test_kineto_layout.py checks this against
// tbdtrace/schema.py.
//
// Buffers grow with realloc: big blocks are mmapped by glibc, so growing them is an
// mremap (no copy, no transient double footprint), and pages past the last row are never
// touched. Ownership of a buffer passes to Python with take(); Python frees it with free().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tbdtrace::kineto {

enum class KType : uint8_t { I32 = 1, I64 = 2, U64 = 3, STR = 4 };

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
  X(input_shapes, STR) X(input_dtypes, STR) X(concrete_inputs, STR) X(flops, I64)
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

#define KT_ENUM_ENTRY(col, type) col,
namespace kcol {
namespace kernels {
enum : int { KT_KERNELS(KT_ENUM_ENTRY) kCount };
}
namespace copy {
enum : int { KT_COPY(KT_ENUM_ENTRY) kCount };
}
namespace runtime {
enum : int { KT_RUNTIME(KT_ENUM_ENTRY) kCount };
}
namespace sync {
enum : int { KT_SYNC(KT_ENUM_ENTRY) kCount };
}
namespace ops {
enum : int { KT_OPS(KT_ENUM_ENTRY) kCount };
}
namespace markers {
enum : int { KT_MARKERS(KT_ENUM_ENTRY) kCount };
}
namespace memory {
enum : int { KT_MEMORY(KT_ENUM_ENTRY) kCount };
}
}  // namespace kcol
#undef KT_ENUM_ENTRY

#define KT_TABLE_ENUM(lname, uname, cols) uname,
enum Route : int { KT_TABLES(KT_TABLE_ENUM) kNumRoutes, kNoRoute = -1 };
#undef KT_TABLE_ENUM

struct KColumnDef {
  const char* name;
  KType type;
};
struct KTableDef {
  const char* name;
  std::vector<KColumnDef> columns;
};
// Staging tables in Route order.
const std::vector<KTableDef>& staging_defs();

// One column: values (4 or 8 bytes wide) and an Arrow validity bitmap (LSB first).
struct KColumn {
  KType type = KType::I64;
  void* data = nullptr;
  uint8_t* valid = nullptr;
  size_t nulls = 0;
  size_t width() const { return type == KType::I32 || type == KType::STR ? 4 : 8; }
};

// A buffer handed to Python: malloc'd, freed with free() by its new owner.
struct Owned {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// A column as handed over: data, bitmap (null when the column has no nulls), null count.
struct TakenColumn {
  std::string name;
  KType type;
  Owned data;
  Owned valid;
  size_t nulls = 0;
};

class KTable {
 public:
  explicit KTable(const KTableDef& def);
  ~KTable();
  KTable(const KTable&) = delete;
  KTable& operator=(const KTable&) = delete;
  KTable(KTable&& o) noexcept;

  size_t rows() const { return rows_; }
  // Starts a row: every column of it must then be set exactly once with set_*.
  size_t begin_row() {
    if (rows_ == cap_) grow();
    return rows_++;
  }
  void set_i64(int col, size_t row, int64_t v, bool ok) {
    KColumn& c = cols_[col];
    static_cast<int64_t*>(c.data)[row] = ok ? v : 0;
    mark(c, row, ok);
  }
  void set_u64(int col, size_t row, uint64_t v, bool ok) {
    KColumn& c = cols_[col];
    static_cast<uint64_t*>(c.data)[row] = ok ? v : 0;
    mark(c, row, ok);
  }
  // int32 columns (and string codes): a value outside int32 is null, as in every importer.
  void set_i32(int col, size_t row, int64_t v, bool ok) {
    ok = ok && v >= INT32_MIN && v <= INT32_MAX;
    KColumn& c = cols_[col];
    static_cast<int32_t*>(c.data)[row] = ok ? static_cast<int32_t>(v) : 0;
    mark(c, row, ok);
  }
  // Hands every column over (trimmed to the row count) and empties the table.
  std::vector<TakenColumn> take();

 private:
  static void mark(KColumn& c, size_t row, bool ok) {
    if (ok)
      c.valid[row >> 3] |= static_cast<uint8_t>(1u << (row & 7));
    else
      ++c.nulls;
  }
  void grow();
  void release();

  const KTableDef* def_;
  std::vector<KColumn> cols_;
  size_t rows_ = 0;
  size_t cap_ = 0;
};

// Interned strings: id -> bytes, in first-interned order; open addressing on a 64-bit hash.
class StringDict {
 public:
  StringDict();
  ~StringDict();
  StringDict(const StringDict&) = delete;
  StringDict& operator=(const StringDict&) = delete;

  int32_t intern(const char* s, size_t n);
  size_t size() const { return offsets_.size() - 1; }
  size_t data_bytes() const { return used_; }
  std::string_view at(size_t id) const {
    return {data_ + offsets_[id], static_cast<size_t>(offsets_[id + 1] - offsets_[id])};
  }
  // Hands over (offsets as int64, data) and empties the dictionary.
  std::pair<Owned, Owned> take();

 private:
  void rehash();

  char* data_ = nullptr;
  size_t used_ = 0;
  size_t cap_ = 0;
  std::vector<int64_t> offsets_;
  std::vector<uint64_t> hashes_;
  std::vector<int32_t> slots_;  // -1 = empty; size is a power of two
};

uint64_t hash_bytes(const char* s, size_t n);

}  // namespace tbdtrace::kineto
