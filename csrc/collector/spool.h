// Spool file: whole chunks, each with a header, a length and a CRC-32 of its payload, so a
// process killed mid-write leaves a file whose complete chunks all read back.
//
// File:   "TBDSPOOL" u32 version u32 pid                                (16 bytes)
// Chunk:  u32 magic 'TCHK' | u32 type | u64 payload_bytes | u64 rows | u32 crc32 | u32 ncols
//         then the payload (32-byte header; little-endian; payload padded to 8 bytes).
// type 1..10 = TableId; payload = per column: u16 name_len, u8 ColType, u8 flags, u32 0,
//   u64 data_bytes, name (padded to 8), data (padded to 8), then, when flags has
//   kColumnHasValidity, the column's Arrow validity bitmap (ceil(rows / 8) bytes, LSB
//   first, 1 = valid; padded to 8). A null's value slot holds 0. Version 1 (read by
//   tbdtrace/collector/spool.py, no longer written) had no bitmaps: a null was the type's
//   minimum value, or -1 for a string code.
// type 100 = strings: u64 first_id, then per string u32 length + bytes (rows = count).
// type 101 = meta: UTF-8 JSON object (rows = 0).
// type 102 = hardware counter data of one context (rows = 0): u32 chip length, chip,
//   u32 metric count, per metric u32 length + name, u64 context id, u64 dropped ranges,
//   u64 image bytes, the Range Profiling API's counter data image (padded to 8).
//
// Write errors (a full disk, a file size limit) never leave a torn chunk in the middle of
// the file: the file is cut back to the end of the last whole chunk, the error is counted
// (errors(), lost_rows()) and reported once on stderr, and later spills try again.
#pragma once

#include <cstdint>
#include <string>

#include "chunk_sink.h"
#include "common/column_core.h"

namespace tbdtrace {

constexpr uint32_t kSpoolVersion = 2;  // 2: validity bitmaps (column flag) instead of sentinels
constexpr uint8_t kColumnHasValidity = 1;
constexpr uint32_t kChunkMagic = 0x4B484354;  // "TCHK"

// CRC-32 with zlib's values (polynomial 0xEDB88320, Python's zlib.crc32): ISA-L's
// crc32_gzip_refl where the build found ISA-L (Debian libisal-dev), else zlib's crc32.
uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);
// "isa-l" or "zlib": which implementation crc32() uses.
const char* crc32_implementation();

class SpoolWriter final : public ChunkSink {
 public:
  ~SpoolWriter() override;
  // Opens (truncates) the file and writes the file header. Returns an error text or "".
  std::string open(const std::string& path, uint32_t pid);
  bool write_strings(const StringDict& dict, size_t first, size_t end) override;
  bool write_table(const ColumnTable& table) override;
  bool write_record(uint32_t type, const Part* parts, size_t n) override;
  void count_lost(uint64_t rows) override { lost_rows_ += rows; }
  void close();
  uint64_t bytes_written() const { return bytes_; }
  uint64_t errors() const { return errors_; }
  uint64_t lost_rows() const { return lost_rows_; }
  const std::string& first_error() const { return first_error_; }

 private:
  struct Piece;
  bool write_pieces(uint32_t type, uint64_t rows, uint32_t ncols, const std::string& small,
                    Piece* pieces, size_t n);
  void record_error(int err, uint64_t rows);
  int fd_ = -1;
  std::string path_;
  uint64_t bytes_ = 0;
  uint64_t errors_ = 0;
  uint64_t lost_rows_ = 0;
  std::string first_error_;
};

}  // namespace tbdtrace
