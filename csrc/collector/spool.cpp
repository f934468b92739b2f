#include "spool.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#if defined(TBDTRACE_HAVE_ISAL)
#include <isa-l/crc.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace tbdtrace {

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
#if defined(TBDTRACE_HAVE_ISAL)
  // ISA-L picks its PCLMULQDQ/VPCLMULQDQ folding at run time (plain C where the CPU has
  // neither); its gzip CRC is zlib's: same polynomial, reflection and pre/post inversion.
  return crc32_gzip_refl(crc, data, n);
#else
  // zlib takes uInt lengths; feed it in pieces below 4 GiB.
  while (n > 0) {
    uInt part = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
    crc = static_cast<uint32_t>(::crc32(crc, data, part));
    data += part;
    n -= part;
  }
  return crc;
#endif
}

const char* crc32_implementation() {
#if defined(TBDTRACE_HAVE_ISAL)
  return "isa-l";
#else
  return "zlib";
#endif
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

bool SpoolWriter::write_strings(const StringDict& dict, size_t first, size_t end) {
  std::string p;
  put(p, static_cast<uint64_t>(first));
  for (size_t i = first; i < end; ++i) {
    std::string_view v = dict.at(i);
    put(p, static_cast<uint32_t>(v.size()));
    p += v;
  }
  pad8(p);
  Piece piece{p.data(), 0, p.size()};
  return write_pieces(kStringsChunk, end - first, 0, std::string(), &piece, 1);
}

bool SpoolWriter::write_table(const ColumnTable& t) {
  const size_t rows = t.rows();
  std::string small;
  std::vector<Piece> pieces;
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
  return write_pieces(t.def().id, rows, static_cast<uint32_t>(t.num_columns()), small,
                      pieces.data(), pieces.size());
}

bool SpoolWriter::write_record(uint32_t type, const Part* parts, size_t n) {
  std::vector<Piece> pieces;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    pieces.push_back({parts[i].len ? parts[i].data : kZeros, 0, parts[i].len});
    total += parts[i].len;
  }
  pieces.push_back({kZeros, 0, pad_len(total)});
  return write_pieces(type, 0, 0, std::string(), pieces.data(), pieces.size());
}

void SpoolWriter::close() {
  if (fd_ >= 0) {
    ::fsync(fd_);
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace tbdtrace
