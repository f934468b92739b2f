#include "decode.h"

#include <cupti_callbacks.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

namespace tbdtrace {

namespace {

// CUPTI's unsigned fields as the schema's signed columns (two's complement, as stored).
inline int64_t i64(uint64_t v) {
  return static_cast<int64_t>(v);
}
inline int32_t i32(int64_t v) {
  return static_cast<int32_t>(v);
}

// Names follow schema.MEMCPY_KINDS / MEMORY_KINDS / SYNC_KINDS / OVERHEAD_KINDS; every one
// is checked against the schema by tests/native/test_enum_strings.py.
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
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "managed_static";
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

// Process and thread of an object id (THREAD or PROCESS objects); has_* false otherwise.
struct PidTid {
  int32_t pid = 0;
  int64_t tid = 0;
  bool has_pid = false, has_tid = false;
};
PidTid object_pid_tid(CUpti_ActivityObjectKind kind, const CUpti_ActivityObjectKindId& id) {
  PidTid o;
  if (kind == CUPTI_ACTIVITY_OBJECT_PROCESS || kind == CUPTI_ACTIVITY_OBJECT_THREAD) {
    o.pid = static_cast<int32_t>(id.pt.processId);
    o.has_pid = true;
    if (kind == CUPTI_ACTIVITY_OBJECT_THREAD) {
      o.tid = id.pt.threadId;
      o.has_tid = true;
    }
  }
  return o;
}

}  // namespace

void Decoder::str_lit(ColumnTable& t, StrCol c, size_t row, const char* s) {
  int32_t id = lit(s);
  t.set_str(c, row, id, id >= 0);
}

int32_t Decoder::lit(const char* s) {
  if (s == nullptr) return -1;
  auto it = literals_.find(s);
  if (it != literals_.end()) return it->second;
  int32_t id = strings_.intern(s);
  literals_.emplace(s, id);
  return id;
}

Decoder::KernelName Decoder::kernel_name(const char* name) {
  auto bits = reinterpret_cast<uintptr_t>(name);
  NameSlot& slot = name_cache_[((bits >> 3) ^ (bits >> 12)) & (kNameSlots - 1)];
  if (slot.key == name && name != nullptr) return slot.value;
  auto it = kernel_names_.find(name);
  if (it != kernel_names_.end()) {
    slot = {name, it->second};
    return it->second;
  }
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

// Each row: begin_row() (the one room check), then one typed store per column.

void Decoder::kernel(const CUpti_ActivityKernel10& r) {
  using namespace kernels;
  ColumnTable& t = out_.t(KERNELS);
  const size_t row = t.begin_row();
  KernelName kn = kernel_name(r.name);
  t.set(start_ns, row, i64(r.start));
  t.set(end_ns, row, i64(r.end));
  t.set(device_id, row, i32(r.deviceId));
  t.set(stream_id, row, i64(r.streamId));
  t.set(context_id, row, i64(r.contextId));
  t.set(correlation_id, row, i64(r.correlationId));
  t.set_str(name, row, kn.demangled, kn.demangled >= 0);
  t.set_str(mangled_name, row, kn.mangled, kn.mangled >= 0);
  t.set(grid_x, row, i32(r.gridX));
  t.set(grid_y, row, i32(r.gridY));
  t.set(grid_z, row, i32(r.gridZ));
  t.set(block_x, row, i32(r.blockX));
  t.set(block_y, row, i32(r.blockY));
  t.set(block_z, row, i32(r.blockZ));
  t.set(registers_per_thread, row, i32(r.registersPerThread));
  t.set(static_shared_bytes, row, i32(r.staticSharedMemory));
  t.set(dynamic_shared_bytes, row, i32(r.dynamicSharedMemory));
  // CUPTI uses 0 for "not launched from a graph".
  t.set_i64(graph_id, row, i64(r.graphId), r.graphId != 0);
  t.set_i64(graph_node_id, row, i64(r.graphNodeId), r.graphNodeId != 0);
}

// The columns memcpy and memcpy2 (peer-to-peer) records share.
template <class R>
size_t Decoder::copy_row(const R& r) {
  using namespace memcpy_;
  ColumnTable& t = out_.t(MEMCPY);
  const size_t row = t.begin_row();
  t.set(start_ns, row, i64(r.start));
  t.set(end_ns, row, i64(r.end));
  t.set(device_id, row, i32(r.deviceId));
  t.set(stream_id, row, i64(r.streamId));
  t.set(context_id, row, i64(r.contextId));
  t.set(correlation_id, row, i64(r.correlationId));
  t.set(bytes, row, i64(r.bytes));
  str_lit(t, copy_kind, row, copy_kind_name(r.copyKind));
  str_lit(t, src_kind, row, memory_kind_name(r.srcKind));
  str_lit(t, dst_kind, row, memory_kind_name(r.dstKind));
  return row;
}

void Decoder::memcpy(const CUpti_ActivityMemcpy6& r) {
  ColumnTable& t = out_.t(MEMCPY);
  const size_t row = copy_row(r);
  t.set_null(memcpy_::src_device_id, row);
  t.set_null(memcpy_::dst_device_id, row);
}

void Decoder::memcpy2(const CUpti_ActivityMemcpyPtoP4& r) {
  ColumnTable& t = out_.t(MEMCPY);
  const size_t row = copy_row(r);
  t.set(memcpy_::src_device_id, row, i32(r.srcDeviceId));
  t.set(memcpy_::dst_device_id, row, i32(r.dstDeviceId));
}

void Decoder::memset(const CUpti_ActivityMemset4& r) {
  using namespace memset_;
  ColumnTable& t = out_.t(MEMSET);
  const size_t row = t.begin_row();
  t.set(start_ns, row, i64(r.start));
  t.set(end_ns, row, i64(r.end));
  t.set(device_id, row, i32(r.deviceId));
  t.set(stream_id, row, i64(r.streamId));
  t.set(context_id, row, i64(r.contextId));
  t.set(correlation_id, row, i64(r.correlationId));
  t.set(bytes, row, i64(r.bytes));
  t.set(value, row, i32(r.value));
  str_lit(t, memory_kind, row, memory_kind_name(r.memoryKind));
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
  ColumnTable& t = out_.t(MEMORY);
  const size_t row = t.begin_row();
  t.set(ts_ns, row, i64(r.timestamp));
  str_lit(t, memory::action, row, action);
  t.set(bytes, row, i64(r.bytes));
  t.set(address, row, static_cast<uint64_t>(r.address));
  t.set(device_id, row, i32(r.deviceId));
  str_lit(t, memory_kind, row, memory_kind_name(r.memoryKind));
  t.set(stream_id, row, i64(r.streamId));
  t.set(correlation_id, row, i64(r.correlationId));
  t.set(pid, row, i32(r.processId));
}

void Decoder::api(const CUpti_ActivityAPI& r, bool driver) {
  using namespace runtime;
  ColumnTable& t = out_.t(RUNTIME);
  const size_t row = t.begin_row();
  t.set(start_ns, row, i64(r.start));
  t.set(end_ns, row, i64(r.end));
  t.set(pid, row, i32(r.processId));
  t.set(tid, row, i64(r.threadId));
  t.set(correlation_id, row, i64(r.correlationId));
  t.set(name, row, api_name(r.cbid, driver));
  str_lit(t, runtime::api, row, driver ? "driver" : "runtime");
  t.set(cbid, row, i32(r.cbid));
}

void Decoder::emit_marker(int64_t start, int64_t end, const OpenRange& o, bool mark, uint32_t id) {
  using namespace markers;
  ColumnTable& t = out_.t(MARKERS);
  const size_t row = t.begin_row();
  t.set(start_ns, row, start);
  t.set(end_ns, row, end);
  t.set_i64(tid, row, o.tid, o.has_tid);
  t.set(name, row, o.name);
  t.set_str(domain, row, o.domain, o.domain >= 0);
  str_lit(t, kind, row, mark ? "mark" : "range");
  t.set(marker_id, row, i64(id));
  if (o.has_pid)
    t.set(pid, row, o.pid);
  else
    t.set_null(pid, row);
}

void Decoder::marker(const CUpti_ActivityMarker2& r) {
  OpenRange o{};
  PidTid pt = object_pid_tid(r.objectKind, r.objectId);
  o.pid = pt.pid;
  o.tid = pt.tid;
  o.has_pid = pt.has_pid;
  o.has_tid = pt.has_tid;
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
  ColumnTable& t = out_.t(SYNC);
  const size_t row = t.begin_row();
  t.set(start_ns, row, i64(r.start));
  t.set(end_ns, row, i64(r.end));
  // streamId is CUPTI_SYNCHRONIZATION_INVALID_VALUE (all ones) for context syncs.
  t.set_i64(stream_id, row, i64(r.streamId), r.streamId != 0xffffffffu);
  t.set(context_id, row, i64(r.contextId));
  t.set(correlation_id, row, i64(r.correlationId));
  str_lit(t, sync_kind, row, sync_kind_name(r.type));
}

void Decoder::overhead(const CUpti_ActivityOverhead3& r) {
  using namespace overhead;
  ColumnTable& t = out_.t(OVERHEAD);
  const size_t row = t.begin_row();
  PidTid pt = object_pid_tid(r.objectKind, r.objectId);
  t.set(start_ns, row, i64(r.start));
  t.set(end_ns, row, i64(r.end));
  if (pt.has_pid)
    t.set(pid, row, pt.pid);
  else
    t.set_null(pid, row);
  t.set_i64(tid, row, pt.tid, pt.has_tid);
  str_lit(t, name, row, overhead_kind_name(r.overheadKind));
}

void Decoder::device(const CUpti_ActivityDevice5& r) {
  using namespace devices;
  ColumnTable& t = out_.t(DEVICES);
  const size_t row = t.begin_row();
  t.set(device_id, row, i32(r.id));
  t.set(name, row, strings_.intern(r.name != nullptr ? r.name : ""));
  t.set(sm_count, row, i32(r.numMultiprocessors));
  t.set(compute_capability_major, row, i32(r.computeCapabilityMajor));
  t.set(compute_capability_minor, row, i32(r.computeCapabilityMinor));
  t.set(core_clock_khz, row, i64(r.coreClockRate));  // header: kHz
  t.set(memory_bytes, row, i64(r.globalMemorySize));
  t.set(memory_bandwidth_bytes_per_s, row, i64(r.globalMemoryBandwidth) * 1000);  // KB/s
  t.set(max_threads_per_block, row, i32(r.maxThreadsPerBlock));
  t.set(shared_memory_per_block_bytes, row, i64(r.maxSharedMemoryPerBlock));
  t.set(registers_per_block, row, i32(r.maxRegistersPerBlock));
  t.set(warp_size, row, i32(r.numThreadsPerWarp));
}

void Decoder::context(const CUpti_ActivityContext3& r) {
  using namespace contexts;
  ColumnTable& t = out_.t(CONTEXTS);
  const size_t row = t.begin_row();
  t.set(context_id, row, i64(r.contextId));
  t.set(device_id, row, i32(r.deviceId));
  t.set(null_stream_id, row, i64(r.nullStreamId));
}

}  // namespace tbdtrace
