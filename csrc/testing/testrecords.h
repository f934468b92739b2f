// Builds CUPTI 13.0 activity records (the real structs) from field values, for the CPU
// tests and the decode benchmark: the one seam where CUPTI is faked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tbdtrace {

using FieldValues = std::map<std::string, int64_t>;
using FieldStrings = std::map<std::string, std::string>;

// Returns the record bytes (sizeof the 13.0 struct for that kind, the stride
// cuptiActivityGetNextRecord uses with libcupti 13.0.85). Unknown field names throw.
std::vector<uint8_t> build_record(const std::string& kind, const FieldValues& ints,
                                  const FieldStrings& strs);
// Stable storage for string fields (records hold pointers to them).
const char* keep_string(const std::string& s);

}  // namespace tbdtrace
