// libFuzzer target for the Kineto JSON parser (csrc/kineto), built and run by `make fuzz`
// with AddressSanitizer and UndefinedBehaviorSanitizer.
//
// Each input is a file's content. Its first byte picks how the input is cut into pieces
// (and, when odd, a small limit on the unit the parser holds)
// (the parser is fed in pieces of any size, and a piece may end inside a token), so the
// resumption paths are exercised as much as the JSON itself. Every piece is copied to a
// heap block of exactly its size, so a read past the end of a piece is reported. A
// KinetoError (bad input, declined file) is the expected outcome for most inputs; any
// other exception, a crash or a sanitizer report is a finding. When the first byte has
// bit 1 set, the input is also parsed on two threads, which must give the same result.
//
// The category routes are the importer's (tbdtrace.importers.kineto.vocab.ROUTES), read
// from the file named by TBDTRACE_FUZZ_ROUTES ("category route" per line), which the
// Makefile writes from Python, so the two cannot drift apart.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kineto/parser.h"

namespace kt = tbdtrace::kineto;

static std::vector<std::pair<std::string, int>> g_routes;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("TBDTRACE_FUZZ_ROUTES");
  if (!path) {
    std::fprintf(stderr, "TBDTRACE_FUZZ_ROUTES is not set (run through `make fuzz`)\n");
    std::abort();
  }
  std::ifstream f(path);
  std::string cat;
  int route;
  while (f >> cat >> route) g_routes.emplace_back(cat, route);
  if (g_routes.empty()) {
    std::fprintf(stderr, "%s: no routes\n", path);
    std::abort();
  }
  return 0;
}

static void feed_piece(kt::Parser& p, const uint8_t* data, size_t n) {
  std::unique_ptr<char[]> piece(new char[n ? n : 1]);
  if (n) std::memcpy(piece.get(), data, n);
  p.feed(piece.get(), n);
}

// One parse of the input: the error's text, or every column's bytes and the strings.
static std::string parse_all(kt::Parser& parser, const uint8_t* data, size_t size, size_t step) {
  try {
    parser.begin_file();
    if (step == 0) {
      feed_piece(parser, data, size);
    } else {
      for (size_t off = 0; off < size; off += step)
        feed_piece(parser, data + off, std::min(step, size - off));
    }
    parser.finish();
  } catch (const kt::KinetoError& e) {
    return std::string("error: ") + e.what();
  }
  // A parsed file: hand the columns over as the importer does (frees them).
  std::string out = "events " + std::to_string(parser.events()) + "\n";
  for (auto n : parser.skipped()) out += std::to_string(n) + " ";
  auto tables = parser.take_tables();
  auto strings = parser.take_strings();
  for (auto& t : tables)
    for (auto& c : t) {
      out += "\n" + c.name + " " + std::to_string(c.nulls) + " ";
      out.append(static_cast<const char*>(c.data.ptr), c.data.bytes);
      if (c.valid.ptr) out.append(static_cast<const char*>(c.valid.ptr), c.valid.bytes);
      std::free(c.data.ptr);
      std::free(c.valid.ptr);
    }
  out.append(static_cast<const char*>(strings.first.ptr), strings.first.bytes);
  out.append(static_cast<const char*>(strings.second.ptr), strings.second.bytes);
  std::free(strings.first.ptr);
  std::free(strings.second.ptr);
  return out;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Piece sizes: 0 -> the whole input at once, else 1..255 bytes at a time.
  size_t step = data[0];
  ++data;
  --size;
  kt::Parser parser(g_routes);
  // An odd first byte: an 8 KiB unit limit, so that inputs of fuzzing size reach the
  // path that stops a value too long to hold (the importer's limit is 256 MiB).
  if (step & 1) parser.set_max_unit_bytes(8 << 10);
  std::string one = parse_all(parser, data, size, step);
  // Bit 1 of the first byte: the same input on two threads (Parser::set_threads), every
  // piece cut for the second thread, must give the same result, byte for byte.
  if (step & 2) {
    kt::Parser two(g_routes);
    if (step & 1) two.set_max_unit_bytes(8 << 10);
    two.set_threads(2, 2, false);
    if (parse_all(two, data, size, step) != one) {
      std::fprintf(stderr, "two threads parsed the input differently from one\n");
      std::abort();
    }
  }
  return 0;
}
