// Record decoder: a pure function of one CUPTI activity record that appends a row to the
// column chunks. No CUPTI calls except cuptiGetCallbackName (API names, cached per cbid).
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "collector_tables.h"

namespace tbdtrace {

struct DecodeStats {
  uint64_t records = 0;
  uint64_t unknown_kind = 0;  // records of kinds we do not decode
  uint64_t marker_data = 0;   // MARKER_DATA records (payload/color: not stored)
  uint64_t unmatched_marker_end = 0;
};

class Decoder {
 public:
  Decoder(ChunkSet& out, Strings& strings) : out_(out), strings_(strings) {}
  // Appends the row(s) for one record. Returns false for kinds it does not decode.
  bool decode(const CUpti_Activity* rec);
  const DecodeStats& stats() const { return stats_; }
  // NVTX ranges still open (START seen, END not yet): emitted with end = start at close.
  void close_open_ranges();

 private:
  struct KernelName {
    int32_t demangled, mangled;
  };
  struct OpenRange {
    int64_t start;
    int32_t name, domain, pid;  // domain: -1 = none; pid: valid when has_pid
    int64_t tid;                // valid when has_tid
    bool has_pid, has_tid;
  };
  void kernel(const CUpti_ActivityKernel10& r);
  void memcpy(const CUpti_ActivityMemcpy6& r);
  void memcpy2(const CUpti_ActivityMemcpyPtoP4& r);
  void memset(const CUpti_ActivityMemset4& r);
  void memory(const CUpti_ActivityMemory4& r);
  void api(const CUpti_ActivityAPI& r, bool driver);
  void marker(const CUpti_ActivityMarker2& r);
  void sync(const CUpti_ActivitySynchronization2& r);
  void overhead(const CUpti_ActivityOverhead3& r);
  void device(const CUpti_ActivityDevice5& r);
  void context(const CUpti_ActivityContext3& r);
  template <class R>
  size_t copy_row(const R& r);
  void str_lit(ColumnTable& t, StrCol c, size_t row, const char* s);  // null for nullptr
  void emit_marker(int64_t start, int64_t end, const OpenRange& o, bool mark, uint32_t id);
  KernelName kernel_name(const char* name);
  int32_t api_name(uint32_t cbid, bool driver);

  ChunkSet& out_;
  Strings& strings_;
  DecodeStats stats_;
  // CUPTI keeps kernel name strings alive for the life of the module, so the pointer is a
  // valid cache key and saves hashing a long string per record.
  std::unordered_map<const char*, KernelName> kernel_names_;
  // A direct-mapped cache in front of kernel_names_: a training step launches a few hundred
  // distinct kernels, and a hit costs no hash-table probe (std::hash of a pointer leaves
  // the bucket to an integer division). It pays for the null bits of graph_id and
  // graph_node_id, null in most kernel rows (docs/COLLECTOR.md, Performance).
  struct NameSlot {
    const char* key = nullptr;
    KernelName value{-1, -1};
  };
  static constexpr size_t kNameSlots = 512;
  NameSlot name_cache_[kNameSlots];
  std::unordered_map<uint64_t, int32_t> api_names_;
  std::unordered_map<uint32_t, OpenRange> open_ranges_;
  std::unordered_map<const char*, int32_t> literals_;  // enum strings (string literals)
  int32_t lit(const char* s);                          // -1 for nullptr
};

}  // namespace tbdtrace
