// Columns to protobuf bytes: one message per row, laid out in a given row order.
//
// Columnar serialisation only: the caller (tbdtrace/export/perfetto.py) declares every
// message as a list of fields (field keys already encoded, nested messages, the value
// column of each field and the mask of the rows that have it); this writes, for each
// entry, the message of its kind at its row. It knows no Perfetto field and decides no
// value: a field is written when its mask says so, with the value its column holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tbdtrace::proto {

enum class Kind : int { kConst = 0, kVarint = 1, kFixed64 = 2, kMessage = 3 };

struct Field {
  Kind kind;
  std::string key;                  // the encoded key (kConst: the whole field's bytes)
  char head[16] = {};               // the key's first 16 bytes, copied whole (see encode)
  const int64_t* values = nullptr;  // kVarint, kFixed64: the value of each row
  int64_t add = 0;                  // kVarint: added to each value (ids numbered from 1)
  const uint8_t* mask = nullptr;    // rows that have the field (nullptr: every row)
  std::vector<Field> sub;           // kMessage: its fields, in order
};

using Message = std::vector<Field>;

inline size_t varint_size(uint64_t v) {
  // 1 byte per 7 bits of the highest set bit's position (v | 1: 0 takes one byte)
  return static_cast<size_t>((63 - __builtin_clzll(v | 1)) * 9 + 73) / 64;
}

inline char* put_varint(char* o, uint64_t v) {
  while (v >= 0x80) {
    *o++ = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  *o++ = static_cast<char>(v);
  return o;
}

// Bytes of the fields of `m` at row `r` (without an enclosing key and length). The size
// of each nested message present is appended to `sizes`, in the order they are written.
inline size_t message_size(const Message& m, int64_t r, std::vector<size_t>& sizes) {
  size_t n = 0;
  for (const Field& f : m) {
    if (f.mask != nullptr && f.mask[r] == 0) continue;
    n += f.key.size();
    switch (f.kind) {
      case Kind::kConst:
        break;
      case Kind::kVarint:
        n += varint_size(static_cast<uint64_t>(f.values[r]) + static_cast<uint64_t>(f.add));
        break;
      case Kind::kFixed64:
        n += 8;
        break;
      case Kind::kMessage: {
        size_t at = sizes.size();
        sizes.push_back(0);
        size_t s = message_size(f.sub, r, sizes);
        sizes[at] = s;
        n += varint_size(s) + s;
        break;
      }
    }
  }
  return n;
}

// Writes the fields of `m` at row `r`; `next` walks `sizes` as message_size filled it.
// `o` has 16 bytes of room past the message's end (a short key is copied 16 bytes whole).
inline char* write_message(const Message& m, int64_t r, const size_t*& next, char* o) {
  for (const Field& f : m) {
    if (f.mask != nullptr && f.mask[r] == 0) continue;
    if (f.key.size() <= sizeof f.head)
      std::memcpy(o, f.head, sizeof f.head);
    else
      std::memcpy(o, f.key.data(), f.key.size());
    o += f.key.size();
    switch (f.kind) {
      case Kind::kConst:
        break;
      case Kind::kVarint:
        o = put_varint(o, static_cast<uint64_t>(f.values[r]) + static_cast<uint64_t>(f.add));
        break;
      case Kind::kFixed64: {
        uint64_t v = static_cast<uint64_t>(f.values[r]);
        for (int j = 0; j < 8; ++j) o[j] = static_cast<char>((v >> (8 * j)) & 0xFF);
        o += 8;
        break;
      }
      case Kind::kMessage:
        o = put_varint(o, *next++);
        o = write_message(f.sub, r, next, o);
        break;
    }
  }
  return o;
}

// Fills each field's `head` from its key (call once the message is complete).
inline void prepare(Message& m) {
  for (Field& f : m) {
    std::memcpy(f.head, f.key.data(), std::min(f.key.size(), sizeof f.head));
    prepare(f.sub);
  }
}

// Entry e is message kinds[which[e]] at row rows[e]: the entries' bytes, in entry order.
inline std::string encode(const std::vector<Message>& kinds, const int8_t* which,
                          const int64_t* rows, size_t n) {
  std::string out(n * 48 + 4096, '\0');
  std::vector<size_t> sizes;
  size_t used = 0;
  for (size_t e = 0; e < n; ++e) {
    const Message& m = kinds[static_cast<size_t>(which[e])];
    sizes.clear();
    size_t len = message_size(m, rows[e], sizes);
    if (used + len + 16 > out.size()) out.resize(std::max(out.size() * 2, used + len + 4096));
    const size_t* next = sizes.data();
    write_message(m, rows[e], next, out.data() + used);
    used += len;
  }
  out.resize(used);
  return out;
}

}  // namespace tbdtrace::proto
