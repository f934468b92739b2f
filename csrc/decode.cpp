#include "decode.h"

#include <cupti_callbacks.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

namespace tbdtrace {

int32_t Strings::intern(std::string_view s) {
  auto it = ids.find(std::string(s));
  if (it != ids.end()) return it->second;
  auto id = static_cast<int32_t>(values.size());
  values.emplace_back(s);
  ids.emplace(values.back(), id);
  return id;
}

namespace {

inline int64_t i64(uint64_t v) {
  return static_cast<int64_t>(v);
}
// CUPTI uses 0 for "not launched from a graph".
inline int64_t graph_or_null(uint64_t v) {
  return v == 0 ? kNull64 : static_cast<int64_t>(v);
}

// Names follow schema.MEMCPY_KINDS / MEMORY_KINDS / SYNC_KINDS.
const char* copy_kind_name(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return nullptr;
  }
}

const char* memory_kind_name(uint32_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "device_static";
    default:
      return "unknown";
  }
}

const char* sync_kind_name(uint32_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "stream_wait_event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "stream";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "context";
    default:
      return "unknown";
  }
}

const char* overhead_kind_name(uint32_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "driver_compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "cupti_buffer_flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "cupti_instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "cupti_resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return "module_loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
      return "lazy_function_loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
      return "command_buffer_full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
      return "activity_buffer_request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
      return "uvm_activity_init";
    default:
      return "unknown";
  }
}

// Process and thread of an object id (THREAD or PROCESS objects); null otherwise.
void object_pid_tid(CUpti_ActivityObjectKind kind, const CUpti_ActivityObjectKindId& id,
                    int32_t& pid, int64_t& tid) {
  pid = kNull32;
  tid = kNull64;
  if (kind == CUPTI_ACTIVITY_OBJECT_PROCESS || kind == CUPTI_ACTIVITY_OBJECT_THREAD) {
    pid = static_cast<int32_t>(id.pt.processId);
    if (kind == CUPTI_ACTIVITY_OBJECT_THREAD) tid = id.pt.threadId;
  }
}

}  // namespace

int32_t Decoder::lit(const char* s) {
  if (s == nullptr) return -1;
  auto it = literals_.find(s);
  if (it != literals_.end()) return it->second;
  int32_t id = strings_.intern(s);
  literals_.emplace(s, id);
  return id;
}

Decoder::KernelName Decoder::kernel_name(const char* name) {
  auto it = kernel_names_.find(name);
  if (it != kernel_names_.end()) return it->second;
  KernelName kn{-1, -1};
  if (name != nullptr) {
    kn.mangled = strings_.intern(name);
    int status = 0;
    char* dem = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    kn.demangled = (status == 0 && dem != nullptr) ? strings_.intern(dem) : kn.mangled;
    std::free(dem);
  }
  kernel_names_.emplace(name, kn);
  return kn;
}

int32_t Decoder::api_name(uint32_t cbid, bool driver) {
  uint64_t key = (static_cast<uint64_t>(driver) << 32) | cbid;
  auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const char* name = nullptr;
  auto dom = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
  std::string s;
  if (cuptiGetCallbackName(dom, cbid, &name) == CUPTI_SUCCESS && name != nullptr) {
    s = name;
    // Runtime names carry the API version ("cudaLaunchKernel_v7000"); users know the
    // function name.
    auto pos = s.rfind("_v");
    if (pos != std::string::npos && pos + 2 < s.size() &&
        s.find_first_not_of("0123456789", pos + 2) == std::string::npos)
      s.resize(pos);
  } else {
    s = std::string(driver ? "driver_cbid_" : "runtime_cbid_") + std::to_string(cbid);
  }
  int32_t id = strings_.intern(s);
  api_names_.emplace(key, id);
  return id;
}

bool Decoder::decode(const CUpti_Activity* rec) {
  ++stats_.records;
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      memcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      memcpy2(*reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      memset(*reinterpret_cast<const CUpti_ActivityMemset4*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      memory(*reinterpret_cast<const CUpti_ActivityMemory4*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      api(*reinterpret_cast<const CUpti_ActivityAPI*>(rec), false);
      return true;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      api(*reinterpret_cast<const CUpti_ActivityAPI*>(rec), true);
      return true;
    case CUPTI_ACTIVITY_KIND_MARKER:
      marker(*reinterpret_cast<const CUpti_ActivityMarker2*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_MARKER_DATA:
      ++stats_.marker_data;
      return true;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      sync(*reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      overhead(*reinterpret_cast<const CUpti_ActivityOverhead3*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_DEVICE:
      device(*reinterpret_cast<const CUpti_ActivityDevice5*>(rec));
      return true;
    case CUPTI_ACTIVITY_KIND_CONTEXT:
      context(*reinterpret_cast<const CUpti_ActivityContext3*>(rec));
      return true;
    default:
      ++stats_.unknown_kind;
      return false;
  }
}

// One room check per row, then unchecked stores at that row (TableChunk::make_room).
#define ROW_BEGIN(TID)                       \
  auto& t = out_.t(TID);                     \
  const size_t row_ = t.rows;                \
  if (row_ >= t.room) t.make_room(row_ + 1); \
  void* const* c = t.ptr.data()
#define P64(col, v) static_cast<int64_t*>(c[col])[row_] = static_cast<int64_t>(v)
#define P32(col, v) static_cast<int32_t*>(c[col])[row_] = static_cast<int32_t>(v)

void Decoder::kernel(const CUpti_ActivityKernel10& r) {
  using namespace kernels;
  ROW_BEGIN(KERNELS);
  KernelName kn = kernel_name(r.name);
  P64(start_ns, i64(r.start));
  P64(end_ns, i64(r.end));
  P32(device_id, static_cast<int32_t>(r.deviceId));
  P64(stream_id, r.streamId);
  P64(context_id, r.contextId);
  P64(correlation_id, r.correlationId);
  P32(name, kn.demangled);
  P32(mangled_name, kn.mangled);
  P32(grid_x, r.gridX);
  P32(grid_y, r.gridY);
  P32(grid_z, r.gridZ);
  P32(block_x, r.blockX);
  P32(block_y, r.blockY);
  P32(block_z, r.blockZ);
  P32(registers_per_thread, r.registersPerThread);
  P32(static_shared_bytes, r.staticSharedMemory);
  P32(dynamic_shared_bytes, r.dynamicSharedMemory);
  P64(graph_id, graph_or_null(r.graphId));
  P64(graph_node_id, graph_or_null(r.graphNodeId));
  t.rows = row_ + 1;
}

void Decoder::memcpy(const CUpti_ActivityMemcpy6& r) {
  using namespace memcpy_;
  ROW_BEGIN(MEMCPY);
  P64(start_ns, i64(r.start));
  P64(end_ns, i64(r.end));
  P32(device_id, static_cast<int32_t>(r.deviceId));
  P64(stream_id, r.streamId);
  P64(context_id, r.contextId);
  P64(correlation_id, r.correlationId);
  P64(bytes, i64(r.bytes));
  P32(copy_kind, lit(copy_kind_name(r.copyKind)));
  P32(src_kind, lit(memory_kind_name(r.srcKind)));
  P32(dst_kind, lit(memory_kind_name(r.dstKind)));
  P32(src_device_id, kNull32);
  P32(dst_device_id, kNull32);
  t.rows = row_ + 1;
}

void Decoder::memcpy2(const CUpti_ActivityMemcpyPtoP4& r) {
  using namespace memcpy_;
  ROW_BEGIN(MEMCPY);
  P64(start_ns, i64(r.start));
  P64(end_ns, i64(r.end));
  P32(device_id, static_cast<int32_t>(r.deviceId));
  P64(stream_id, r.streamId);
  P64(context_id, r.contextId);
  P64(correlation_id, r.correlationId);
  P64(bytes, i64(r.bytes));
  P32(copy_kind, lit(copy_kind_name(r.copyKind)));
  P32(src_kind, lit(memory_kind_name(r.srcKind)));
  P32(dst_kind, lit(memory_kind_name(r.dstKind)));
  P32(src_device_id, static_cast<int32_t>(r.srcDeviceId));
  P32(dst_device_id, static_cast<int32_t>(r.dstDeviceId));
  t.rows = row_ + 1;
}

void Decoder::memset(const CUpti_ActivityMemset4& r) {
  using namespace memset_;
  ROW_BEGIN(MEMSET);
  P64(start_ns, i64(r.start));
  P64(end_ns, i64(r.end));
  P32(device_id, static_cast<int32_t>(r.deviceId));
  P64(stream_id, r.streamId);
  P64(context_id, r.contextId);
  P64(correlation_id, r.correlationId);
  P64(bytes, i64(r.bytes));
  P32(value, static_cast<int32_t>(r.value));
  P32(memory_kind, lit(memory_kind_name(r.memoryKind)));
  t.rows = row_ + 1;
}

void Decoder::memory(const CUpti_ActivityMemory4& r) {
  using namespace memory;
  const char* action =
      r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION ? "alloc"
      : r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE  ? "free"
                                                                               : nullptr;
  if (action == nullptr) {
    ++stats_.unknown_kind;
    return;
  }
  ROW_BEGIN(MEMORY);
  P64(ts_ns, i64(r.timestamp));
  P32(memory::action, lit(action));
  P64(bytes, i64(r.bytes));
  P64(address, i64(r.address));
  P32(device_id, static_cast<int32_t>(r.deviceId));
  P32(memory_kind, lit(memory_kind_name(r.memoryKind)));
  P64(stream_id, r.streamId);
  P64(correlation_id, r.correlationId);
  P32(pid, static_cast<int32_t>(r.processId));
  t.rows = row_ + 1;
}

void Decoder::api(const CUpti_ActivityAPI& r, bool driver) {
  using namespace runtime;
  ROW_BEGIN(RUNTIME);
  P64(start_ns, i64(r.start));
  P64(end_ns, i64(r.end));
  P32(pid, static_cast<int32_t>(r.processId));
  P64(tid, r.threadId);
  P64(correlation_id, r.correlationId);
  P32(name, api_name(r.cbid, driver));
  P32(runtime::api, lit(driver ? "driver" : "runtime"));
  P32(cbid, static_cast<int32_t>(r.cbid));
  t.rows = row_ + 1;
}

void Decoder::emit_marker(int64_t start, int64_t end, const OpenRange& o, bool mark, uint32_t id) {
  using namespace markers;
  ROW_BEGIN(MARKERS);
  P64(start_ns, start);
  P64(end_ns, end);
  P32(pid, o.pid);
  P64(tid, o.tid);
  P32(name, o.name);
  P32(domain, o.domain);
  P32(kind, lit(mark ? "mark" : "range"));
  P64(marker_id, id);
  t.rows = row_ + 1;
}

void Decoder::marker(const CUpti_ActivityMarker2& r) {
  OpenRange o{};
  object_pid_tid(r.objectKind, r.objectId, o.pid, o.tid);
  o.start = i64(r.timestamp);
  // NVTX's default domain has no name; CUPTI gives nullptr or "".
  o.name = r.name != nullptr ? strings_.intern(r.name) : -1;
  o.domain = (r.domain != nullptr && r.domain[0] != '\0') ? strings_.intern(r.domain) : -1;
  if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
    if (o.name < 0) o.name = strings_.intern("");
    emit_marker(o.start, o.start, o, true, r.id);
  } else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
    if (o.name < 0) o.name = strings_.intern("");
    open_ranges_[r.id] = o;
  } else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
    auto it = open_ranges_.find(r.id);
    if (it == open_ranges_.end()) {
      ++stats_.unmatched_marker_end;
      return;
    }
    emit_marker(it->second.start, o.start, it->second, false, r.id);
    open_ranges_.erase(it);
  }
}

void Decoder::close_open_ranges() {
  for (const auto& [id, o] : open_ranges_) emit_marker(o.start, o.start, o, false, id);
  open_ranges_.clear();
}

void Decoder::sync(const CUpti_ActivitySynchronization2& r) {
  using namespace sync;
  ROW_BEGIN(SYNC);
  P64(start_ns, i64(r.start));
  P64(end_ns, i64(r.end));
  // streamId is CUPTI_SYNCHRONIZATION_INVALID_VALUE (all ones) for context syncs.
  P64(stream_id, r.streamId == 0xffffffffu ? kNull64 : r.streamId);
  P64(context_id, r.contextId);
  P64(correlation_id, r.correlationId);
  P32(sync_kind, lit(sync_kind_name(r.type)));
  t.rows = row_ + 1;
}

void Decoder::overhead(const CUpti_ActivityOverhead3& r) {
  using namespace overhead;
  ROW_BEGIN(OVERHEAD);
  int32_t p;
  int64_t th;
  object_pid_tid(r.objectKind, r.objectId, p, th);
  P64(start_ns, i64(r.start));
  P64(end_ns, i64(r.end));
  P32(pid, p);
  P64(tid, th);
  P32(name, lit(overhead_kind_name(r.overheadKind)));
  t.rows = row_ + 1;
}

void Decoder::device(const CUpti_ActivityDevice5& r) {
  using namespace devices;
  ROW_BEGIN(DEVICES);
  P32(device_id, static_cast<int32_t>(r.id));
  P32(name, strings_.intern(r.name != nullptr ? r.name : ""));
  P32(sm_count, static_cast<int32_t>(r.numMultiprocessors));
  P32(compute_capability_major, static_cast<int32_t>(r.computeCapabilityMajor));
  P32(compute_capability_minor, static_cast<int32_t>(r.computeCapabilityMinor));
  P64(core_clock_khz, r.coreClockRate);  // header: kHz
  P64(memory_bytes, i64(r.globalMemorySize));
  P64(memory_bandwidth_bytes_per_s, i64(r.globalMemoryBandwidth) * 1000);  // header: KB/s
  P32(max_threads_per_block, static_cast<int32_t>(r.maxThreadsPerBlock));
  P64(shared_memory_per_block_bytes, r.maxSharedMemoryPerBlock);
  P32(registers_per_block, static_cast<int32_t>(r.maxRegistersPerBlock));
  P32(warp_size, static_cast<int32_t>(r.numThreadsPerWarp));
  t.rows = row_ + 1;
}

void Decoder::context(const CUpti_ActivityContext3& r) {
  using namespace contexts;
  ROW_BEGIN(CONTEXTS);
  P64(context_id, r.contextId);
  P32(device_id, static_cast<int32_t>(r.deviceId));
  P64(null_stream_id, r.nullStreamId);
  t.rows = row_ + 1;
}

#undef P64
#undef P32
#undef ROW_BEGIN

}  // namespace tbdtrace
