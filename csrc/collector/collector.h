// The CUPTI session: a fixed pool of activity buffers, a flush thread that drains completed
// buffers through the decoder into column chunks and spills them to the spool file.
// One per process (CUPTI's activity callbacks are process-wide).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tbdtrace {

class CuptiApi;

struct CollectorConfig {
  std::string spool_path;               // spool file to write (one per process)
  std::vector<std::string> activities;  // kind names, see activity_names()
  // Which runtime/driver calls the runtime and driver kinds record: "lite" (the calls the
  // analysis reads, switched on per callback id; csrc/collector/api_filter.h) or "full".
  std::string api_set = "lite";
  uint64_t buffer_bytes = 4u << 20;  // size of one CUPTI activity buffer
  // Buffers allocated, zeroed and faulted in at start (on a collector thread); the flush
  // thread adds more while CUPTI holds more buffers (one per producing thread) than there
  // are spares, up to buffer_max (memory bound = size x buffer_max).
  uint32_t buffer_count = 8;
  uint32_t buffer_max = 64;
  uint32_t flush_interval_ms = 1000;  // periodic cuptiActivityFlushAll(0)
  uint64_t spill_rows = 1u << 16;     // spill chunks to the spool past this many rows
  CuptiApi* api = nullptr;            // CUPTI's activity API; nullptr = the real libcupti
  // Hardware counter metrics per kernel (Range Profiling API on each context created after
  // start; csrc/collector/counters_device.h, UNVERIFIED on a GPU); empty = off.
  std::vector<std::string> counter_metrics;
  uint64_t counter_max_ranges = 1u << 16;  // kernels profiled per context at most
  // Capture windows: start with recording paused (collector_pause) until collector_resume.
  bool start_paused = false;
};

struct StartResult {
  bool ok = false;
  std::string status;   // "ok", "no_device", "other_tool", "error"
  std::string message;  // one line for people
};

// Default kinds and every kind name --activities accepts.
const std::vector<std::string>& default_activities();
const std::vector<std::string>& activity_names();

StartResult collector_start(const CollectorConfig& cfg);
// Forced flush, disable, final spill and meta chunk; returns the spool path ("" if idle).
std::string collector_stop();
bool collector_running();
// Capture windows. Pause disables every enabled kind except device and context (rare, and
// needed to name what the windows recorded), force-flushes CUPTI's buffers and has the
// flush thread spill them; resume enables the same kinds again. The session (spool,
// buffers, subscriber) stays. false: no session, or already paused / not paused.
bool collector_pause();
bool collector_resume();
bool collector_paused();
// Installs SIGTERM/SIGINT handlers that stop the collector and re-raise (injection mode).
void collector_install_signal_handlers();

// CUPTI helpers usable without a device.
int cupti_version();  // cuptiGetVersion, or -result code on failure
std::string cupti_result_name(int code);
std::string cupti_library_path();  // file libcupti was loaded from

}  // namespace tbdtrace
