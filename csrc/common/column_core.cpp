#include "common/column_core.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace tbdtrace {

const char* col_type_name(ColType t) {
  switch (t) {
    case ColType::I32:
      return "int32";
    case ColType::I64:
      return "int64";
    case ColType::U64:
      return "uint64";
    case ColType::STR:
      return "string";
  }
  return "?";
}

namespace {

void* grow_block(void* p, size_t bytes) {
  void* q = std::realloc(p, bytes ? bytes : 1);
  if (!q) throw std::bad_alloc();
  return q;
}

}  // namespace

ColumnTable::ColumnTable(const TableDef& def, size_t initial_rows)
    : def_(&def), initial_rows_((initial_rows + 7) & ~size_t{7}) {
  for (const auto& c : def.columns) {
    Column k;
    k.type = c.type;
    cols_.push_back(k);
  }
}

ColumnTable::~ColumnTable() {
  release();
}

ColumnTable::ColumnTable(ColumnTable&& o) noexcept
    : def_(o.def_),
      cols_(std::move(o.cols_)),
      rows_(o.rows_),
      cap_(o.cap_),
      initial_rows_(o.initial_rows_) {
  o.cols_.clear();
  o.rows_ = o.cap_ = 0;
}

void ColumnTable::release() {
  for (auto& c : cols_) {
    std::free(c.data);
    std::free(c.valid);
    c.data = nullptr;
    c.valid = nullptr;
  }
  rows_ = cap_ = 0;
}

size_t ColumnTable::null_count(size_t i) const {
  const uint8_t* v = cols_[i].valid;
  if (v == nullptr) return 0;
  size_t valid = 0, full = rows_ / 8;
  for (size_t b = 0; b < full; ++b) valid += static_cast<size_t>(__builtin_popcount(v[b]));
  if (rows_ % 8)
    valid += static_cast<size_t>(__builtin_popcount(v[full] & ((1u << (rows_ % 8)) - 1)));
  return rows_ - valid;
}

// All valid up to the capacity: rows before the first null were valid, and rows after it
// are valid until marked otherwise.
void ColumnTable::make_bitmap(Column& k) {
  k.valid = static_cast<uint8_t*>(grow_block(nullptr, cap_ / 8));
  std::memset(k.valid, 0xff, cap_ / 8);
}

void ColumnTable::grow() {
  size_t cap = cap_ ? cap_ * 2 : initial_rows_;
  for (auto& c : cols_) {
    c.data = grow_block(c.data, cap * c.width());
    if (c.valid != nullptr) {
      c.valid = static_cast<uint8_t*>(grow_block(c.valid, cap / 8));
      std::memset(c.valid + cap_ / 8, 0xff, (cap - cap_) / 8);
    }
  }
  cap_ = cap;
}

void ColumnTable::clear() {
  for (auto& c : cols_) {
    std::free(c.valid);
    c.valid = nullptr;
  }
  rows_ = 0;
}

void ColumnTable::append(const ColumnTable& src, const int32_t* str_map) {
  const size_t n = src.rows_;
  if (n == 0) return;
  while (rows_ + n > cap_) grow();
  for (size_t i = 0; i < cols_.size(); ++i) {
    Column& d = cols_[i];
    const Column& s = src.cols_[i];
    const uint8_t* sv = s.valid;
    char* out = static_cast<char*>(d.data) + rows_ * d.width();
    if (d.type == ColType::STR) {
      auto* o = reinterpret_cast<int32_t*>(out);
      const auto* in = static_cast<const int32_t*>(s.data);
      if (sv == nullptr) {
        for (size_t r = 0; r < n; ++r) o[r] = str_map[in[r]];
      } else {
        for (size_t r = 0; r < n; ++r) o[r] = (sv[r >> 3] >> (r & 7) & 1) ? str_map[in[r]] : 0;
      }
    } else {
      std::memcpy(out, s.data, n * d.width());
    }
    if (sv != nullptr) {  // rows past rows_ are valid until marked (make_bitmap, grow)
      if (d.valid == nullptr) make_bitmap(d);
      for (size_t r = 0; r < n; ++r) {
        if (!(sv[r >> 3] >> (r & 7) & 1)) {
          size_t row = rows_ + r;
          d.valid[row >> 3] &= static_cast<uint8_t>(~(1u << (row & 7)));
        }
      }
    }
  }
  rows_ += n;
}

std::vector<TakenColumn> ColumnTable::take() {
  std::vector<TakenColumn> out;
  for (size_t i = 0; i < cols_.size(); ++i) {
    Column& c = cols_[i];
    TakenColumn t;
    t.name = def_->columns[i].name;
    t.type = c.type;
    t.nulls = null_count(i);
    t.data.bytes = rows_ * c.width();
    t.data.ptr = grow_block(c.data, t.data.bytes);  // shrink to fit
    c.data = nullptr;
    if (t.nulls) {
      t.valid.bytes = (rows_ + 7) / 8;
      t.valid.ptr = grow_block(c.valid, t.valid.bytes);
    } else {
      std::free(c.valid);
    }
    c.valid = nullptr;
    out.push_back(std::move(t));
  }
  rows_ = cap_ = 0;
  return out;
}

// 64-bit hash, 8 bytes per step (multiply-xorshift mixing); strings here are names of a
// few to a few hundred bytes. From 32 bytes on, four independent lanes take 32 bytes per
// step: one lane's chain of multiplies cost ~5 cycles per 8 bytes, and the Kineto parser
// hashes every kernel name it reads (a few hundred bytes of C++ template signature).
namespace {

inline uint64_t mix(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

inline uint64_t word(const char* s) {
  uint64_t w;
  std::memcpy(&w, s, 8);
  return w;
}

// Equality of n bytes: the strings compared are mostly short (categories, op names), where
// two overlapping word compares beat a call to memcmp.
inline bool same_bytes(const char* a, const char* b, size_t n) {
  if (n >= 8 && n <= 16) return word(a) == word(b) && word(a + n - 8) == word(b + n - 8);
  if (n < 8) {
    for (size_t i = 0; i < n; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }
  return std::memcmp(a, b, n) == 0;
}

}  // namespace

uint64_t hash_bytes(const char* s, size_t n) {
  const uint64_t m = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (n * m);
  size_t i = 0;
  if (n >= 32) {
    uint64_t a = h, b = h ^ 0x452821E638D01377ull, c = h ^ 0xBE5466CF34E90C6Cull,
             d = h ^ 0xC0AC29B7C97C50DDull;
    for (; i + 32 <= n; i += 32) {
      a = mix(a, word(s + i));
      b = mix(b, word(s + i + 8));
      c = mix(c, word(s + i + 16));
      d = mix(d, word(s + i + 24));
    }
    h = mix(mix(mix(a, b), c), d);
  }
  for (; i + 8 <= n; i += 8) h = mix(h, word(s + i));
  if (i < n) {  // the last 1..7 bytes: the string's last word (overlapping), or pieces of it
    uint64_t w;
    if (n >= 8) {
      w = word(s + n - 8);
    } else if (n >= 4) {
      uint32_t lo, hi;
      std::memcpy(&lo, s, 4);
      std::memcpy(&hi, s + n - 4, 4);
      w = lo | uint64_t{hi} << 32;
    } else {
      w = static_cast<uint8_t>(s[0]) | uint64_t{static_cast<uint8_t>(s[n / 2])} << 8 |
          uint64_t{static_cast<uint8_t>(s[n - 1])} << 16;
    }
    h = mix(h, w);
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

StringDict::StringDict() : offsets_{0}, slots_(1024, -1) {}

StringDict::~StringDict() {
  std::free(data_);
}

int32_t StringDict::intern(const char* s, size_t n) {
  uint64_t h = hash_bytes(s, n);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    int32_t id = slots_[i];
    if (id < 0) {
      id = static_cast<int32_t>(size());
      if (used_ + n > cap_) {
        size_t cap = cap_ ? cap_ : 1 << 16;
        while (cap < used_ + n) cap *= 2;
        data_ = static_cast<char*>(grow_block(data_, cap));
        cap_ = cap;
      }
      if (n) std::memcpy(data_ + used_, s, n);
      used_ += n;
      offsets_.push_back(static_cast<int64_t>(used_));
      hashes_.push_back(h);
      slots_[i] = id;
      if (size() * 2 > slots_.size()) rehash();
      return id;
    }
    if (hashes_[id] == h && static_cast<size_t>(offsets_[id + 1] - offsets_[id]) == n &&
        same_bytes(data_ + offsets_[id], s, n))
      return id;
  }
}

void StringDict::rehash() {
  std::vector<int32_t> slots(slots_.size() * 2, -1);
  size_t mask = slots.size() - 1;
  for (size_t id = 0; id < hashes_.size(); ++id) {
    size_t i = hashes_[id] & mask;
    while (slots[i] >= 0) i = (i + 1) & mask;
    slots[i] = static_cast<int32_t>(id);
  }
  slots_.swap(slots);
}

std::pair<Owned, Owned> StringDict::take() {
  Owned offs, data;
  offs.bytes = offsets_.size() * sizeof(int64_t);
  offs.ptr = grow_block(nullptr, offs.bytes);
  std::memcpy(offs.ptr, offsets_.data(), offs.bytes);
  data.bytes = used_;
  data.ptr = grow_block(data_, used_);
  data_ = nullptr;
  used_ = cap_ = 0;
  offsets_.assign(1, 0);
  hashes_.clear();
  slots_.assign(1024, -1);
  return {offs, data};
}

}  // namespace tbdtrace
