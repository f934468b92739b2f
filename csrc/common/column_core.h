// The one column core: typed columns with Arrow validity bitmaps, grouped into tables, and
// the string dictionary their string columns index. Both producers of native columns fill
// it: the collector's decoder (CUPTI records -> csrc/collector/collector_tables.h tables -> spool)
// and the Kineto parser's row builder (JSON events -> csrc/kineto/staging_tables.h staging tables
// -> Python). Python receives a table with take() (csrc/common/column_export.h).
//
// One type enum (ColType), one null convention: a null is a cleared bit in the column's
// validity bitmap (Arrow's layout: LSB first, 1 = valid) and a 0 in its value slot; there
// are no sentinel values. A column that has had no null has no bitmap at all: the bitmap
// is made on the first null, all valid up to it, so storing a valid value never touches it.
//
// A table is declared once as an X-macro list of (column, TYPE); TBD_COLUMN_HANDLES turns
// the list into typed column handles (Col<ColType::I64> start_ns{0}, ...), and each setter
// takes the handle of its type and exactly that value type: storing into a column of
// another type, or an implicitly narrowed value, does not compile.
//
// A buffer of kMapBytes or more is a mapping of its own (mmap), grown with mremap: no
// copy, no transient double footprint, the pages already written keep their frames, and
// pages past the last row are never touched. glibc would do the same through realloc, but
// the CLI turns its mappings off for big inputs (tbdtrace/cli.py keep_freed_memory), and
// its realloc then copies each doubling inside the heap. Smaller buffers are malloc'd.
// Ownership of a buffer passes out with take(); its new owner frees it with free_owned()
// (munmap of a mapping, free() of a malloc'd block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tbdtrace {

// Column types. The integers are written into spool files (csrc/collector/spool.h): never renumber.
// STR columns hold int32 codes into a StringDict.
enum class ColType : uint8_t { I32 = 1, I64 = 2, U64 = 3, STR = 4 };

// "int32", "int64", "uint64", "string": the names Python's layout checks read.
const char* col_type_name(ColType t);
constexpr size_t col_width(ColType t) {
  return t == ColType::I64 || t == ColType::U64 ? 8 : 4;
}

// A typed handle on one column of a table (its index in the table's definition).
template <ColType T>
struct Col {
  int index;
};
using I32Col = Col<ColType::I32>;
using I64Col = Col<ColType::I64>;
using U64Col = Col<ColType::U64>;
using StrCol = Col<ColType::STR>;

// Declares, in the current namespace, `idx::<column>` (the index enum), kCount, and a
// typed handle `<column>` per entry of the X-macro list LIST(X) with X(column, TYPE).
#define TBD_COLUMN_INDEX_(col, type) col,
#define TBD_COLUMN_HANDLE_(col, type) \
  constexpr ::tbdtrace::Col<::tbdtrace::ColType::type> col{idx::col};
#define TBD_COLUMN_HANDLES(LIST)                 \
  namespace idx {                                \
  enum : int { LIST(TBD_COLUMN_INDEX_) kCount }; \
  }                                              \
  constexpr int kCount = idx::kCount;            \
  LIST(TBD_COLUMN_HANDLE_)
// {"column", ColType::TYPE}, per entry: a table definition's column list.
#define TBD_COLUMN_DEF(col, type) ::tbdtrace::ColumnDef{#col, ::tbdtrace::ColType::type},

struct ColumnDef {
  const char* name;
  ColType type;
};

struct TableDef {
  const char* name;
  uint32_t id;  // the spool's table id (csrc/collector/collector_tables.h), or the Kineto route
  std::vector<ColumnDef> columns;
};

// A buffer handed over, freed by its new owner with free_owned(): `mapped` is the length
// of its mapping (munmap), 0 for a malloc'd block (free).
struct Owned {
  void* ptr = nullptr;
  size_t bytes = 0;
  size_t mapped = 0;
};
void free_owned(const Owned& o);

// Buffers from this size on are mappings of their own (above).
constexpr size_t kMapBytes = size_t{1} << 20;

// A column as handed over: values, validity bitmap (absent when the column has no
// nulls), null count.
struct TakenColumn {
  std::string name;
  ColType type;
  Owned data;
  Owned valid;
  size_t nulls = 0;
};

// One column's storage. `valid` is null while the column has no nulls; nulls are counted
// from it when asked (ColumnTable::null_count), not on each store.
struct Column {
  ColType type = ColType::I64;
  void* data = nullptr;
  uint8_t* valid = nullptr;
  size_t data_mapped = 0;  // the length of data's mapping; 0: malloc'd (or null)
  size_t valid_mapped = 0;
  size_t width() const { return col_width(type); }
};

class ColumnTable {
 public:
  // initial_rows: the first capacity (a multiple of 8); capacity doubles after that.
  explicit ColumnTable(const TableDef& def, size_t initial_rows = 1024);
  ~ColumnTable();
  ColumnTable(const ColumnTable&) = delete;
  ColumnTable& operator=(const ColumnTable&) = delete;
  ColumnTable(ColumnTable&& o) noexcept;

  const TableDef& def() const { return *def_; }
  size_t rows() const { return rows_; }
  size_t num_columns() const { return cols_.size(); }
  // Column i as stored: values [0, rows()), bitmap (or null) covering them.
  const Column& column(size_t i) const { return cols_[i]; }
  // Nulls among the rows of column i (0 without a bitmap).
  size_t null_count(size_t i) const;

  // Starts a row: every column of it must then be set exactly once (a set or set_null).
  size_t begin_row() {
    if (rows_ == mark_) at_mark();
    return rows_++;
  }

  void set(I64Col c, size_t row, int64_t v) { at<int64_t>(c, row) = v; }
  void set(I32Col c, size_t row, int32_t v) { at<int32_t>(c, row) = v; }
  void set(U64Col c, size_t row, uint64_t v) { at<uint64_t>(c, row) = v; }
  void set(StrCol c, size_t row, int32_t code) { at<int32_t>(c, row) = code; }
  // Only the exact value type of the column: a conversion is the caller's, spelled out.
  template <ColType T, class V>
  void set(Col<T>, size_t, V) = delete;

  // Inlined into the row builders (GCC left it out of line): most rows of a wide table set
  // several nulls.
  template <ColType T>
  [[gnu::always_inline]] void set_null(Col<T> c, size_t row) {
    Column& k = cols_[c.index];
    if constexpr (col_width(T) == 8)
      static_cast<uint64_t*>(k.data)[row] = 0;
    else
      static_cast<uint32_t*>(k.data)[row] = 0;
    if (__builtin_expect(k.valid == nullptr, 0)) make_bitmap(k);
    k.valid[row >> 3] &= static_cast<uint8_t>(~(1u << (row & 7)));
  }

  // The value when ok, else null.
  [[gnu::always_inline]] void set_i64(I64Col c, size_t row, int64_t v, bool ok) {
    ok ? set(c, row, v) : set_null(c, row);
  }
  [[gnu::always_inline]] void set_u64(U64Col c, size_t row, uint64_t v, bool ok) {
    ok ? set(c, row, v) : set_null(c, row);
  }
  [[gnu::always_inline]] void set_str(StrCol c, size_t row, int32_t code, bool ok) {
    ok ? set(c, row, code) : set_null(c, row);
  }
  // An int32 column from a wider integer: a value outside int32 is null (the Kineto
  // importer's rule).
  [[gnu::always_inline]] void set_i32(I32Col c, size_t row, int64_t v, bool ok) {
    if (ok && v >= INT32_MIN && v <= INT32_MAX)
      set(c, row, static_cast<int32_t>(v));
    else
      set_null(c, row);
  }

  // Whether buffers of kMapBytes or more are mappings of their own (the default), or all
  // malloc'd: the streaming import hands a table over every batch and grows it again,
  // where glibc's heap (kept by the CLI) gives the next batch pages already faulted in.
  // Applies to buffers grown from then on (a mapping stays one).
  void set_map_blocks(bool on) { map_blocks_ = on; }

  // Whether the pages of mapped buffers are faulted in ahead of the rows by a thread of
  // their own (off by default): each time the rows pass a window of kPrefaultRows, the
  // window after the next one is handed to that thread, which asks the kernel to populate
  // it (madvise MADV_POPULATE_WRITE: contents unchanged, so it runs while rows are
  // written). The row builder never waits for it: a request that would wait, or a page it
  // has not reached, is faulted in by the writer as before. Without the kernel's support
  // (before Linux 5.14) nothing is asked.
  void set_prefault(bool on) { prefault_ = on; }
  static constexpr size_t kPrefaultRows = 16384;

  // Forgets the rows, keeps the value buffers (the collector after a spill).
  void clear();
  // Appends the rows of `src` (a table of the same definition), string codes through
  // `str_map` (src's code -> this table's; a null keeps code 0).
  void append(const ColumnTable& src, const int32_t* str_map);
  // Hands every column over (trimmed to the row count) and empties the table.
  std::vector<TakenColumn> take();

 private:
  template <class V, ColType T>
  V& at(Col<T> c, size_t row) {
    return static_cast<V*>(cols_[c.index].data)[row];
  }
  void make_bitmap(Column& k);
  void at_mark();
  void ahead();
  void grow();
  void release();

  const TableDef* def_;
  std::vector<Column> cols_;
  size_t rows_ = 0;
  size_t cap_ = 0;
  size_t mark_ = 0;        // begin_row's next stop: the capacity, or the next prefault window
  size_t prefaulted_ = 0;  // rows whose pages were handed to the prefault thread
  size_t initial_rows_;
  bool map_blocks_ = true;
  bool prefault_ = false;
  bool any_mapped_ = false;
};

// Interned strings: id -> bytes, in first-interned order; open addressing on a 64-bit hash.
class StringDict {
 public:
  StringDict();
  ~StringDict();
  StringDict(const StringDict&) = delete;
  StringDict& operator=(const StringDict&) = delete;

  int32_t intern(const char* s, size_t n);
  int32_t intern(std::string_view s) { return intern(s.data(), s.size()); }
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

}  // namespace tbdtrace
