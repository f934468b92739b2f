#include "common/column_core.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

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

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t page_round(size_t bytes) {
  const size_t page = page_size();
  return (bytes + page - 1) & ~(page - 1);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// Mappings moved, shrunk or unmapped so far: a prefault request made before the last
// change is dropped (its addresses may no longer be the column's). A request that slips
// between the check and its madvise faults in whatever is mapped there now, its contents
// unchanged (memory that may not be written refuses it).
std::atomic<uint64_t> g_map_epoch{0};

// The prefault thread (ColumnTable::set_prefault): one per process, started with the
// first request, sleeping while there is none. Requests that do not fit its queue, or
// that would wait for its lock, are not made: the writer faults those pages itself.
class Prefaulter {
 public:
  static Prefaulter& get() {
    static Prefaulter* p = new Prefaulter();  // never destroyed: its thread outlives exit
    return *p;
  }
  bool supported() const { return supported_.load(std::memory_order_relaxed); }
  // Ranges [addr, addr + len) of private anonymous mappings; false when not taken.
  bool post(const std::pair<char*, size_t>* ranges, size_t n) {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || count_ + n > kQueue) return false;
    const uint64_t epoch = g_map_epoch.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) {
      queue_[(head_ + count_) % kQueue] = Req{ranges[i].first, ranges[i].second, epoch};
      ++count_;
    }
    if (!started_) {
      started_ = true;
      try {
        std::thread([this] { run(); }).detach();
      } catch (...) {  // no thread: nothing is prefaulted
        supported_ = false;
        count_ = 0;
        return false;
      }
    }
    lock.unlock();
    cv_.notify_one();
    return true;
  }

 private:
  struct Req {
    char* addr;
    size_t len;
    uint64_t epoch;
  };
  static constexpr size_t kQueue = 4096;
  static constexpr size_t kStep = size_t{128} << 10;  // per madvise: the mmap lock held briefly

  void run() {
    for (;;) {
      Req r;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return count_ > 0; });
        r = queue_[head_];
        head_ = (head_ + 1) % kQueue;
        --count_;
      }
      for (size_t off = 0; off < r.len; off += kStep) {
        if (g_map_epoch.load(std::memory_order_relaxed) != r.epoch) break;
        if (madvise(r.addr + off, std::min(kStep, r.len - off), MADV_POPULATE_WRITE) != 0) {
          if (errno == EINVAL) supported_ = false;  // a kernel without it: ask no more
          break;
        }
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  Req queue_[kQueue];
  size_t head_ = 0, count_ = 0;
  bool started_ = false;
  std::atomic<bool> supported_{true};
};

// Resizes a column buffer of `old_bytes` (held in `p`; `mapped`: its mapping's length, 0
// when malloc'd) to `bytes`: a mapping is remapped (grown or shrunk, never copied), a
// malloc'd block reaching kMapBytes (when `may_map`) moves into a new mapping, anything
// else is realloc'd. bytes 0 frees it and returns null.
void* resize_block(void* p, size_t& mapped, size_t old_bytes, size_t bytes, bool may_map) {
  if (bytes == 0) {
    free_owned(Owned{p, 0, mapped});
    mapped = 0;
    return nullptr;
  }
  if (mapped) {
    size_t len = page_round(bytes);
    if (len == mapped) return p;
    void* q = mremap(p, mapped, len, len > mapped ? MREMAP_MAYMOVE : 0);
    if (q == MAP_FAILED) throw std::bad_alloc();
    // Moved, or its tail gone: requests made before are dropped.
    if (q != p || len < mapped) g_map_epoch.fetch_add(1, std::memory_order_relaxed);
    mapped = len;
    return q;
  }
  if (may_map && bytes >= kMapBytes) {
    size_t len = page_round(bytes);
    void* q = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) throw std::bad_alloc();
    if (old_bytes) std::memcpy(q, p, std::min(old_bytes, bytes));
    std::free(p);
    mapped = len;
    return q;
  }
  return grow_block(p, bytes);
}

}  // namespace

void free_owned(const Owned& o) {
  if (o.mapped) {
    g_map_epoch.fetch_add(1, std::memory_order_relaxed);
    munmap(o.ptr, o.mapped);
  } else {
    std::free(o.ptr);
  }
}

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
      mark_(o.mark_),
      prefaulted_(o.prefaulted_),
      initial_rows_(o.initial_rows_),
      map_blocks_(o.map_blocks_),
      prefault_(o.prefault_),
      any_mapped_(o.any_mapped_) {
  o.cols_.clear();
  o.rows_ = o.cap_ = o.mark_ = o.prefaulted_ = 0;
  o.any_mapped_ = false;
}

void ColumnTable::release() {
  for (auto& c : cols_) {
    free_owned(Owned{c.data, 0, c.data_mapped});
    free_owned(Owned{c.valid, 0, c.valid_mapped});
    c.data = nullptr;
    c.valid = nullptr;
    c.data_mapped = c.valid_mapped = 0;
  }
  rows_ = cap_ = mark_ = prefaulted_ = 0;
  any_mapped_ = false;
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
  k.valid = static_cast<uint8_t*>(resize_block(nullptr, k.valid_mapped, 0, cap_ / 8, map_blocks_));
  std::memset(k.valid, 0xff, cap_ / 8);
}

void ColumnTable::at_mark() {
  if (rows_ == cap_) grow();
  ahead();
}

// Sets the next stop of begin_row, and hands the pages of the rows up to two windows
// ahead to the prefault thread (rows_ < cap_ here).
void ColumnTable::ahead() {
  mark_ = cap_;
  if (!prefault_ || !any_mapped_) return;
  Prefaulter& pf = Prefaulter::get();
  if (!pf.supported()) return;
  const size_t lo = std::max(prefaulted_, rows_);
  const size_t hi = std::min(cap_, rows_ + 2 * kPrefaultRows);
  mark_ = std::min(cap_, rows_ + kPrefaultRows);
  if (hi <= lo) return;
  const size_t page = page_size();
  std::vector<std::pair<char*, size_t>> ranges;
  auto add = [&](void* block, size_t mapped, size_t from, size_t to) {
    if (!mapped) return;
    from &= ~(page - 1);
    to = std::min(page_round(to), mapped);
    if (to > from) ranges.emplace_back(static_cast<char*>(block) + from, to - from);
  };
  for (auto& c : cols_) {
    add(c.data, c.data_mapped, lo * c.width(), hi * c.width());
    if (c.valid) add(c.valid, c.valid_mapped, lo / 8, (hi + 7) / 8);
  }
  if (ranges.empty() || pf.post(ranges.data(), ranges.size())) prefaulted_ = hi;
}

void ColumnTable::grow() {
  size_t cap = cap_ ? cap_ * 2 : initial_rows_;
  for (auto& c : cols_) {
    c.data = resize_block(c.data, c.data_mapped, cap_ * c.width(), cap * c.width(), map_blocks_);
    if (c.valid != nullptr) {
      c.valid = static_cast<uint8_t*>(
          resize_block(c.valid, c.valid_mapped, cap_ / 8, cap / 8, map_blocks_));
      std::memset(c.valid + cap_ / 8, 0xff, (cap - cap_) / 8);
    }
    if (c.data_mapped) any_mapped_ = true;
  }
  cap_ = cap;
}

void ColumnTable::clear() {
  for (auto& c : cols_) {
    free_owned(Owned{c.valid, 0, c.valid_mapped});
    c.valid = nullptr;
    c.valid_mapped = 0;
  }
  rows_ = 0;
  mark_ = 0;  // the next row sets the next stop (pages already written stay faulted in)
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
  if (rows_ >= mark_) ahead();  // rows_ < cap_ unless full; ahead() then leaves mark_ = cap_
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
    if (c.data_mapped) {  // shrink to fit (pages only; null when empty)
      t.data.ptr = resize_block(c.data, c.data_mapped, 0, t.data.bytes, true);
      t.data.mapped = c.data_mapped;
    } else {
      t.data.ptr = grow_block(c.data, t.data.bytes);
    }
    c.data = nullptr;
    c.data_mapped = 0;
    if (t.nulls) {
      t.valid.bytes = (rows_ + 7) / 8;
      if (c.valid_mapped) {
        t.valid.ptr = resize_block(c.valid, c.valid_mapped, 0, t.valid.bytes, true);
        t.valid.mapped = c.valid_mapped;
      } else {
        t.valid.ptr = grow_block(c.valid, t.valid.bytes);
      }
    } else {
      free_owned(Owned{c.valid, 0, c.valid_mapped});
    }
    c.valid = nullptr;
    c.valid_mapped = 0;
    out.push_back(std::move(t));
  }
  rows_ = cap_ = mark_ = prefaulted_ = 0;
  any_mapped_ = false;
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
