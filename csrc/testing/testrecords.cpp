#include "testing/testrecords.h"

#include <cupti_activity.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>

namespace tbdtrace {

const char* keep_string(const std::string& s) {
  static std::deque<std::string> store;
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  store.push_back(s);
  return store.back().c_str();
}

namespace {

template <class R>
std::vector<uint8_t> bytes_of(const R& r) {
  std::vector<uint8_t> out(sizeof(R));
  std::memcpy(out.data(), &r, sizeof(R));
  return out;
}

#define SET(field)                               \
  if (k == #field) {                             \
    r.field = static_cast<decltype(r.field)>(v); \
    continue;                                    \
  }
#define SETS(field)           \
  if (k == #field) {          \
    r.field = keep_string(v); \
    continue;                 \
  }
#define UNKNOWN throw std::invalid_argument("record field '" + k + "' not settable for " + kind)

}  // namespace

// The SET(...) chains are one statement per field; clang-format 21 reflows them differently
// on every pass, so this function keeps its hand layout.
// clang-format off
std::vector<uint8_t> build_record(const std::string& kind, const FieldValues& ints,
                                  const FieldStrings& strs) {
  if (kind == "kernel") {
    CUpti_ActivityKernel10 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    for (const auto& [k, v] : ints) {
      SET(start)
      SET(end) SET(deviceId) SET(contextId) SET(streamId) SET(gridX) SET(gridY) SET(gridZ)
          SET(blockX) SET(blockY) SET(blockZ) SET(registersPerThread) SET(staticSharedMemory)
              SET(dynamicSharedMemory) SET(correlationId) SET(graphId) SET(graphNodeId) SET(kind)
                  UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      SETS(name) UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "memcpy") {
    CUpti_ActivityMemcpy6 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    for (const auto& [k, v] : ints) {
      SET(copyKind)
      SET(srcKind) SET(dstKind) SET(bytes) SET(start) SET(end) SET(deviceId) SET(contextId)
          SET(streamId) SET(correlationId) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "memcpy2") {
    CUpti_ActivityMemcpyPtoP4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    for (const auto& [k, v] : ints) {
      SET(copyKind)
      SET(srcKind) SET(dstKind) SET(bytes) SET(start) SET(end) SET(deviceId) SET(contextId)
          SET(streamId) SET(srcDeviceId) SET(dstDeviceId) SET(correlationId) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "memset") {
    CUpti_ActivityMemset4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    for (const auto& [k, v] : ints) {
      SET(value)
      SET(bytes) SET(start) SET(end) SET(deviceId) SET(contextId) SET(streamId) SET(correlationId)
          SET(memoryKind) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "memory") {
    CUpti_ActivityMemory4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    for (const auto& [k, v] : ints) {
      SET(memoryOperationType)
      SET(memoryKind) SET(correlationId) SET(address) SET(bytes) SET(timestamp) SET(processId)
          SET(deviceId) SET(contextId) SET(streamId) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "runtime" || kind == "driver") {
    CUpti_ActivityAPI r{};
    r.kind = kind == "runtime" ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
    for (const auto& [k, v] : ints) {
      SET(cbid) SET(start) SET(end) SET(processId) SET(threadId) SET(correlationId) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "marker") {
    CUpti_ActivityMarker2 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MARKER;
    r.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    for (const auto& [k, v] : ints) {
      SET(flags) SET(timestamp) SET(id) SET(objectKind) if (k == "processId") {
        r.objectId.pt.processId = static_cast<uint32_t>(v);
        continue;
      }
      if (k == "threadId") {
        r.objectId.pt.threadId = static_cast<uint32_t>(v);
        continue;
      }
      UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      SETS(name) SETS(domain) UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "sync") {
    CUpti_ActivitySynchronization2 r{};
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    for (const auto& [k, v] : ints) {
      SET(type)
      SET(start) SET(end) SET(correlationId) SET(contextId) SET(streamId) SET(cudaEventId) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "overhead") {
    CUpti_ActivityOverhead3 r{};
    r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    r.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    for (const auto& [k, v] : ints) {
      SET(overheadKind)
      SET(start) SET(end) SET(correlationId) SET(objectKind) if (k == "processId") {
        r.objectId.pt.processId = static_cast<uint32_t>(v);
        continue;
      }
      if (k == "threadId") {
        r.objectId.pt.threadId = static_cast<uint32_t>(v);
        continue;
      }
      UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "device") {
    CUpti_ActivityDevice5 r{};
    r.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    for (const auto& [k, v] : ints) {
      SET(globalMemoryBandwidth)
      SET(globalMemorySize) SET(numThreadsPerWarp) SET(coreClockRate) SET(numMultiprocessors)
          SET(maxRegistersPerBlock) SET(maxSharedMemoryPerBlock) SET(maxThreadsPerBlock)
              SET(computeCapabilityMajor) SET(computeCapabilityMinor) SET(id) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      SETS(name) UNKNOWN;
    }
    return bytes_of(r);
  }
  if (kind == "context") {
    CUpti_ActivityContext3 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
    for (const auto& [k, v] : ints) {
      SET(contextId) SET(deviceId) SET(nullStreamId) UNKNOWN;
    }
    for (const auto& [k, v] : strs) {
      (void)v;
      UNKNOWN;
    }
    return bytes_of(r);
  }
  throw std::invalid_argument("unknown record kind '" + kind + "'");
}
// clang-format on

}  // namespace tbdtrace
