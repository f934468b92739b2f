// Column chunks: struct-of-arrays tables that mirror tbdtrace/schema.py.
//
// Each table is declared once below as an X-macro list of (column, type). The same list
// generates the column index enum used by the decoder and the layout that Python checks
// against schema.py (tests/native/test_layout.py), so the two cannot drift silently.
// Integer nulls are the type's minimum value; string columns hold interned ids (-1 = null).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <vector>

namespace tbdtrace {

enum class CType : uint8_t { I32 = 1, I64 = 2, U64 = 3, STR = 4 };

constexpr int32_t kNull32 = std::numeric_limits<int32_t>::min();
constexpr int64_t kNull64 = std::numeric_limits<int64_t>::min();

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

#define TBD_ENUM_ENTRY(col, type) col,
namespace kernels {
enum : int { TBD_KERNELS(TBD_ENUM_ENTRY) kCount };
}
namespace memcpy_ {
enum : int { TBD_MEMCPY(TBD_ENUM_ENTRY) kCount };
}
namespace memset_ {
enum : int { TBD_MEMSET(TBD_ENUM_ENTRY) kCount };
}
namespace memory {
enum : int { TBD_MEMORY(TBD_ENUM_ENTRY) kCount };
}
namespace runtime {
enum : int { TBD_RUNTIME(TBD_ENUM_ENTRY) kCount };
}
namespace markers {
enum : int { TBD_MARKERS(TBD_ENUM_ENTRY) kCount };
}
namespace sync {
enum : int { TBD_SYNC(TBD_ENUM_ENTRY) kCount };
}
namespace overhead {
enum : int { TBD_OVERHEAD(TBD_ENUM_ENTRY) kCount };
}
namespace devices {
enum : int { TBD_DEVICES(TBD_ENUM_ENTRY) kCount };
}
namespace contexts {
enum : int { TBD_CONTEXTS(TBD_ENUM_ENTRY) kCount };
}
#undef TBD_ENUM_ENTRY

#define TBD_TABLE_ID(lname, uname, id) uname = id,
enum TableId : uint32_t { TBD_TABLES(TBD_TABLE_ID) kNumTables = 11 };
#undef TBD_TABLE_ID

struct ColumnDef {
  const char* name;
  CType type;
};

struct TableDef {
  const char* name;
  TableId id;
  std::vector<ColumnDef> columns;
};

// All tables, in TableId order (index = id - 1).
const std::vector<TableDef>& table_defs();

// One column: 4-byte values for I32/STR, 8-byte values for I64/U64.
// A growable array of plain values without std::vector's per-element construction, so a
// table's columns can share one capacity: the decoder checks room once per row and then
// stores every field unchecked (see TableChunk::make_room).
template <class T>
class PodVec {
 public:
  PodVec() = default;
  ~PodVec() { std::free(p_); }
  PodVec(PodVec&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) {
    o.p_ = nullptr;
    o.n_ = o.cap_ = 0;
  }
  PodVec& operator=(PodVec&& o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = o.p_;
      n_ = o.n_;
      cap_ = o.cap_;
      o.p_ = nullptr;
      o.n_ = o.cap_ = 0;
    }
    return *this;
  }
  PodVec(const PodVec&) = delete;
  PodVec& operator=(const PodVec&) = delete;

  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  void clear() { n_ = 0; }
  void push_back(T v) {
    if (n_ == cap_) reserve(cap_ ? 2 * cap_ : 1024);
    p_[n_++] = v;
  }
  // Keeps the first size() values.
  void reserve(size_t cap) {
    if (cap <= cap_) return;
    T* q = static_cast<T*>(std::realloc(p_, cap * sizeof(T)));
    if (q == nullptr) throw std::bad_alloc();
    p_ = q;
    cap_ = cap;
  }
  // The values [0, n) are set (the decoder stored them unchecked).
  void set_size(size_t n) { n_ = n; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

struct Column {
  CType type;
  PodVec<int32_t> v32;
  PodVec<int64_t> v64;
  size_t size() const { return is32() ? v32.size() : v64.size(); }
  bool is32() const { return type == CType::I32 || type == CType::STR; }
  const void* data() const { return is32() ? static_cast<const void*>(v32.data()) : v64.data(); }
  size_t nbytes() const { return is32() ? v32.size() * 4 : v64.size() * 8; }
  void clear() {
    v32.clear();
    v64.clear();
  }
  void set_size(size_t n) {
    if (is32())
      v32.set_size(n);
    else
      v64.set_size(n);
  }
  void reserve(size_t n) {
    if (is32())
      v32.reserve(n);
    else
      v64.reserve(n);
  }
  void* raw() { return is32() ? static_cast<void*>(v32.data()) : static_cast<void*>(v64.data()); }
};

// One table's rows being collected. Rows are written by index: make_room() gives every
// column space for at least `need` rows and refreshes `ptr` (each column's storage),
// `rows` counts what was written, and finalize() makes each column's size() equal to it
// (done before a chunk is read: spill, hand-over to Python).
struct TableChunk {
  const TableDef* def = nullptr;
  std::vector<Column> cols;
  std::vector<void*> ptr;
  size_t rows = 0;
  size_t room = 0;
  void reserve(size_t n);
  void make_room(size_t need);
  void finalize();
  void clear();
};

struct ChunkSet {
  std::vector<TableChunk> tables;  // index = TableId - 1
  ChunkSet();
  TableChunk& t(TableId id) { return tables[id - 1]; }
  size_t rows() const;
  void clear();
};

}  // namespace tbdtrace
