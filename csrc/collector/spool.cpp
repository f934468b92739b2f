#include "spool.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "counters_device.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace tbdtrace {

namespace {

uint32_t crc32_zlib(const uint8_t* data, size_t n, uint32_t crc) {
  // zlib takes uInt lengths; feed it in pieces below 4 GiB.
  while (n > 0) {
    uInt part = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
    crc = static_cast<uint32_t>(::crc32(crc, data, part));
    data += part;
    n -= part;
  }
  return crc;
}

#if defined(__x86_64__)
// CRC-32 by carry-less multiplication (PCLMULQDQ), folding 64 bytes per step: Gopal et al.,
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009),
// with the bit-reflected constants for zlib's polynomial, as in Chromium's zlib
// (crc32_simd.c). The same values as zlib (tests/native/test_spool_crc.py checks), about
// 4x its speed here: the CRC was the largest cost of a spill. `crc` is the pre-inverted
// running value; len is a multiple of 16, at least 64.
__attribute__((target("sse4.1,pclmul"))) uint32_t crc32_pclmul(const uint8_t* buf, size_t len,
                                                               uint32_t crc) {
  alignas(16) static const uint64_t k1k2[] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const uint64_t k3k4[] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const uint64_t k5k0[] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const uint64_t poly[] = {0x01db710641, 0x01f7011641};
  __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;
  auto ld = [](const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  x1 = ld(buf + 0x00);
  x2 = ld(buf + 0x10);
  x3 = ld(buf + 0x20);
  x4 = ld(buf + 0x30);
  x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128(static_cast<int>(crc)));
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  buf += 64;
  len -= 64;
  while (len >= 64) {  // four lanes folded in parallel
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
    x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
    x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
    x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
    y5 = ld(buf + 0x00);
    y6 = ld(buf + 0x10);
    y7 = ld(buf + 0x20);
    y8 = ld(buf + 0x30);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
    x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
    x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
    x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
    buf += 64;
    len -= 64;
  }
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));  // four lanes into one
  for (__m128i next : {x2, x3, x4}) {
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, next), x5);
  }
  while (len >= 16) {
    x2 = ld(buf);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    buf += 16;
    len -= 16;
  }
  // 128 bits to 64, then Barrett reduction to 32.
  x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
  x3 = _mm_setr_epi32(~0, 0, ~0, 0);
  x1 = _mm_srli_si128(x1, 8);
  x1 = _mm_xor_si128(x1, x2);
  x0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2 = _mm_srli_si128(x1, 4);
  x1 = _mm_and_si128(x1, x3);
  x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  x0 = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2 = _mm_and_si128(x1, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
  x2 = _mm_and_si128(x2, x3);
  x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
  x1 = _mm_xor_si128(x1, x2);
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

// __builtin_cpu_init first: this runs in a static initializer, maybe before libgcc's.
const bool kHavePclmul =
    (__builtin_cpu_init(), __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"));
#endif

}  // namespace

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  if (kHavePclmul && n >= 64) {
    size_t body = n & ~size_t{15};
    crc = ~crc32_pclmul(data, body, ~crc);
    data += body;
    n -= body;
  }
#endif
  return crc32_zlib(data, n, crc);
}

// One part of a chunk's payload: bytes at `ptr`, or (ptr == nullptr) at offset `off` of the
// chunk's small-header string (which may still grow while the pieces are listed).
struct SpoolWriter::Piece {
  const void* ptr;
  size_t off;
  size_t len;
};

namespace {

const uint8_t kZeros[8] = {0, 0, 0, 0, 0, 0, 0, 0};

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
size_t pad_len(size_t n) {
  return (8 - n % 8) % 8;
}
void pad8(std::string& s) {
  s.append(pad_len(s.size()), '\0');
}

}  // namespace

SpoolWriter::~SpoolWriter() {
  close();
}

std::string SpoolWriter::open(const std::string& path, uint32_t pid) {
  close();
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return path + ": cannot create spool file (" + std::strerror(errno) + ")";
  std::string h("TBDSPOOL");
  put(h, kSpoolVersion);
  put(h, pid);
  if (::write(fd_, h.data(), h.size()) != static_cast<ssize_t>(h.size())) {
    int err = errno;
    close();
    return path + ": cannot write spool file (" + std::strerror(err) + ")";
  }
  bytes_ = h.size();
  return "";
}

void SpoolWriter::record_error(int err, uint64_t rows) {
  ++errors_;
  lost_rows_ += rows;
  if (first_error_.empty()) {
    first_error_ = path_ + ": " + (err ? std::strerror(err) : "short write");
    // Once per spool: the meta chunk may not fit on a full disk, so say it here too.
    std::fprintf(stderr,
                 "tbdtrace: pid %d: cannot write the spool (%s); the trace will be incomplete\n",
                 static_cast<int>(getpid()), first_error_.c_str());
  }
}

bool SpoolWriter::write_pieces(uint32_t type, uint64_t rows, uint32_t ncols,
                               const std::string& small, Piece* pieces, size_t n) {
  if (fd_ < 0) return false;
  // The header's CRC covers the payload pieces in order; zlib continues across pieces.
  uint32_t crc = 0;
  uint64_t payload = 0;
  for (size_t i = 0; i < n; ++i) {
    if (pieces[i].ptr == nullptr) pieces[i].ptr = small.data() + pieces[i].off;
    crc = crc32(static_cast<const uint8_t*>(pieces[i].ptr), pieces[i].len, crc);
    payload += pieces[i].len;
  }
  std::string h;
  put(h, kChunkMagic);
  put(h, type);
  put(h, payload);
  put(h, rows);
  put(h, crc);
  put(h, ncols);
  std::vector<iovec> iov;
  iov.reserve(n + 1);
  iov.push_back({const_cast<char*>(h.data()), h.size()});
  for (size_t i = 0; i < n; ++i)
    if (pieces[i].len) iov.push_back({const_cast<void*>(pieces[i].ptr), pieces[i].len});
  // One writev loop: a reader sees either a whole chunk or a short tail.
  size_t first = 0;
  uint64_t done = 0, total = h.size() + payload;
  while (done < total) {
    int cnt = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    ssize_t w = ::writev(fd_, iov.data() + first, cnt);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : 0;
      // Cut the torn chunk off so later chunks stay readable, and try again next spill.
      if (ftruncate(fd_, static_cast<off_t>(bytes_)) != 0 ||
          lseek(fd_, static_cast<off_t>(bytes_), SEEK_SET) < 0) {
        ::close(fd_);  // the file cannot be repaired: stop writing to it
        fd_ = -1;
      }
      record_error(err, rows);
      return false;
    }
    done += static_cast<uint64_t>(w);
    size_t left = static_cast<size_t>(w);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  bytes_ += total;
  return true;
}

bool SpoolWriter::spill(ChunkSet& chunks, Strings& strings) {
  bool ok = true;
  const size_t n_strings = strings.size();
  if (strings.spilled < n_strings) {
    std::string p;
    put(p, static_cast<uint64_t>(strings.spilled));
    for (size_t i = strings.spilled; i < n_strings; ++i) {
      std::string_view v = strings.dict.at(i);
      put(p, static_cast<uint32_t>(v.size()));
      p += v;
    }
    pad8(p);
    Piece piece{p.data(), 0, p.size()};
    // Every later chunk needs these strings: on failure they are retried next spill
    // (strings.spilled only moves on success).
    if (!write_pieces(kStringsChunk, n_strings - strings.spilled, 0, std::string(), &piece, 1)) {
      // Table chunks would name strings the file lacks: they are dropped (and counted).
      for (auto& t : chunks.tables) {
        lost_rows_ += t.rows();
        t.clear();
      }
      return false;
    }
    strings.spilled = n_strings;
  }
  std::string small;
  std::vector<Piece> pieces;
  for (auto& t : chunks.tables) {
    const size_t rows = t.rows();
    if (rows == 0) continue;
    small.clear();
    pieces.clear();
    for (size_t i = 0; i < t.num_columns(); ++i) {
      const ColumnDef& def = t.def().columns[i];
      const Column& col = t.column(i);
      const size_t nbytes = rows * col.width();
      const bool has_valid = col.valid != nullptr;  // made on the column's first null
      const size_t vbytes = has_valid ? (rows + 7) / 8 : 0;
      size_t off = small.size();
      size_t nlen = std::strlen(def.name);
      put(small, static_cast<uint16_t>(nlen));
      put(small, static_cast<uint8_t>(def.type));
      put(small, static_cast<uint8_t>(has_valid ? kColumnHasValidity : 0));
      put(small, static_cast<uint32_t>(0));
      put(small, static_cast<uint64_t>(nbytes));
      small += def.name;
      pad8(small);
      pieces.push_back({nullptr, off, small.size() - off});
      pieces.push_back({col.data, 0, nbytes});
      pieces.push_back({kZeros, 0, pad_len(nbytes)});
      if (has_valid) {
        pieces.push_back({col.valid, 0, vbytes});
        pieces.push_back({kZeros, 0, pad_len(vbytes)});
      }
    }
    if (!write_pieces(t.def().id, rows, static_cast<uint32_t>(t.num_columns()), small,
                      pieces.data(), pieces.size()))
      ok = false;
    t.clear();
  }
  return ok;
}

bool SpoolWriter::write_meta(const std::string& json) {
  std::string p = json;
  pad8(p);
  Piece piece{p.data(), 0, p.size()};
  return write_pieces(kMetaChunk, 0, 0, std::string(), &piece, 1);
}

bool SpoolWriter::write_counters(const CounterData& d) {
  std::string p;
  put(p, static_cast<uint32_t>(d.chip.size()));
  p += d.chip;
  put(p, static_cast<uint32_t>(d.metrics.size()));
  for (const auto& m : d.metrics) {
    put(p, static_cast<uint32_t>(m.size()));
    p += m;
  }
  put(p, d.context_id);
  put(p, d.dropped_ranges);
  put(p, static_cast<uint64_t>(d.image.size()));
  size_t off = p.size();
  Piece pieces[3] = {{p.data(), 0, off},
                     {d.image.empty() ? kZeros : d.image.data(), 0, d.image.size()},
                     {kZeros, 0, pad_len(off + d.image.size())}};
  return write_pieces(kCountersChunk, 0, 0, std::string(), pieces, 3);
}

void SpoolWriter::close() {
  if (fd_ >= 0) {
    ::fsync(fd_);
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace tbdtrace
