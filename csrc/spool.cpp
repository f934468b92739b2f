#include "spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tbdtrace {

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  // zlib's CRC-32 (polynomial 0xEDB88320), so Python checks it with zlib.crc32.
  static uint32_t table[256];
  static bool ready = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return true;
  }();
  (void)ready;
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

namespace {
template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void pad8(std::string& s) { s.append((8 - s.size() % 8) % 8, '\0'); }
}  // namespace

SpoolWriter::~SpoolWriter() { close(); }

std::string SpoolWriter::open(const std::string& path, uint32_t pid) {
  close();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return path + ": cannot create spool file (" + std::strerror(errno) + ")";
  std::string h("TBDSPOOL");
  put(h, kSpoolVersion);
  put(h, pid);
  if (::write(fd_, h.data(), h.size()) != static_cast<ssize_t>(h.size())) {
    close();
    return path + ": cannot write spool file (" + std::strerror(errno) + ")";
  }
  bytes_ = h.size();
  return "";
}

bool SpoolWriter::write_chunk(uint32_t type, uint64_t rows, uint32_t ncols,
                              const std::string& payload) {
  if (fd_ < 0) return false;
  std::string h;
  put(h, kChunkMagic);
  put(h, type);
  put(h, static_cast<uint64_t>(payload.size()));
  put(h, rows);
  put(h, crc32(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
  put(h, ncols);
  // One buffer, one write loop: a reader sees either a whole chunk or a short tail.
  std::string all = h + payload;
  size_t off = 0;
  while (off < all.size()) {
    ssize_t w = ::write(fd_, all.data() + off, all.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(w);
  }
  bytes_ += all.size();
  return true;
}

bool SpoolWriter::spill(ChunkSet& chunks, Strings& strings) {
  bool ok = true;
  if (strings.spilled < strings.values.size()) {
    std::string p;
    put(p, static_cast<uint64_t>(strings.spilled));
    for (size_t i = strings.spilled; i < strings.values.size(); ++i) {
      put(p, static_cast<uint32_t>(strings.values[i].size()));
      p += strings.values[i];
    }
    pad8(p);
    ok = write_chunk(kStringsChunk, strings.values.size() - strings.spilled, 0, p) && ok;
    strings.spilled = strings.values.size();
  }
  for (auto& t : chunks.tables) {
    if (t.rows == 0) continue;
    t.finalize();
    std::string p;
    for (size_t i = 0; i < t.cols.size(); ++i) {
      const auto& def = t.def->columns[i];
      const auto& col = t.cols[i];
      put(p, static_cast<uint16_t>(std::strlen(def.name)));
      put(p, static_cast<uint8_t>(def.type));
      put(p, static_cast<uint8_t>(0));
      put(p, static_cast<uint32_t>(0));
      put(p, static_cast<uint64_t>(col.nbytes()));
      p += def.name;
      pad8(p);
      p.append(static_cast<const char*>(col.data()), col.nbytes());
      pad8(p);
    }
    ok = write_chunk(t.def->id, t.rows, static_cast<uint32_t>(t.cols.size()), p) && ok;
    t.clear();
  }
  return ok;
}

bool SpoolWriter::write_meta(const std::string& json) {
  std::string p = json;
  pad8(p);
  return write_chunk(kMetaChunk, 0, 0, p);
}

void SpoolWriter::close() {
  if (fd_ >= 0) {
    ::fsync(fd_);
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace tbdtrace
