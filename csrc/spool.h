// Spool file: whole chunks, each with a header, a length and a CRC-32 of its payload, so a
// process killed mid-write leaves a file whose complete chunks all read back.
//
// File:   "TBDSPOOL" u32 version u32 pid                                (16 bytes)
// Chunk:  u32 magic 'TCHK' | u32 type | u64 payload_bytes | u64 rows | u32 crc32 | u32 ncols
//         then the payload (32-byte header; little-endian; payload padded to 8 bytes).
// type 1..10 = TableId; payload = per column: u16 name_len, u8 CType, u8 0, u32 0,
//   u64 data_bytes, name (padded to 8), data (padded to 8).
// type 100 = strings: u64 first_id, then per string u32 length + bytes (rows = count).
// type 101 = meta: UTF-8 JSON object (rows = 0).
#pragma once

#include <cstdint>
#include <string>

#include "columns.h"
#include "decode.h"

namespace tbdtrace {

constexpr uint32_t kSpoolVersion = 1;
constexpr uint32_t kChunkMagic = 0x4B484354;  // "TCHK"
constexpr uint32_t kStringsChunk = 100;
constexpr uint32_t kMetaChunk = 101;

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);

class SpoolWriter {
 public:
  ~SpoolWriter();
  // Opens (truncates) the file and writes the file header. Returns an error text or "".
  std::string open(const std::string& path, uint32_t pid);
  // Writes new strings, then every non-empty table chunk, then clears the chunks.
  bool spill(ChunkSet& chunks, Strings& strings);
  bool write_meta(const std::string& json);
  void close();
  uint64_t bytes_written() const { return bytes_; }
  bool is_open() const { return fd_ >= 0; }

 private:
  bool write_chunk(uint32_t type, uint64_t rows, uint32_t ncols, const std::string& payload);
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

}  // namespace tbdtrace
