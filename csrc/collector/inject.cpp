// CUDA_INJECTION64_PATH entry point: the CUDA driver calls InitializeInjection() once per
// process when it initializes, so any program (and its children, which inherit the
// environment) is captured without changes. Settings come from the environment that
// `tbdtrace capture` sets (the one documented place the collector reads it):
//   TBDTRACE_SPOOL_DIR         directory for <pid>.tbds spool files (required)
//   TBDTRACE_ACTIVITIES        comma-separated kinds (default: collector defaults)
//   TBDTRACE_API               lite (default) or full: the runtime/driver calls recorded
//   TBDTRACE_BUFFER_BYTES, TBDTRACE_BUFFER_COUNT, TBDTRACE_BUFFER_MAX,
//   TBDTRACE_FLUSH_INTERVAL_MS
//   TBDTRACE_COUNTER_METRICS   comma-separated hardware counter metrics per kernel (Range
//                              Profiling API, kernel replay; UNVERIFIED on a GPU)
//   TBDTRACE_START_PAUSED      1: start paused (capture windows; see tbdtrace_collector_*)
// (declared, with every name that crosses the process boundary, in
// tbdtrace/collector/child_protocol.py; tests/collector/test_child_protocol.py checks them)
//
// The same library is also NVTX's injection library (NVTX_INJECTION64_PATH): NVTX dlopens
// that path and calls InitializeInjectionNvtx2, which is passed on to the libcupti already
// in the process. Pointing NVTX at a libcupti file directly would map a second copy when
// the program's libcupti (torch's wheel) lives at another path: glibc shares a library by
// SONAME only for names without a slash. The second copy's NVTX hooks feed a CUPTI that
// nobody enabled, and every NVTX range is lost.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collector.h"

namespace {

// "a,b,,c" -> {a, b, c}; no iostreams in the profiled process (see meta_json in collector.cpp).
std::vector<std::string> split_commas(const char* text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = text;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*c == '\0') break;
    } else {
      cur += *c;
    }
  }
  return out;
}

uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  return (end && *end == '\0' && x > 0) ? x : dflt;
}

void stop_at_exit() {
  tbdtrace::collector_stop();
}

// libcupti's entry point `name`, from the copy this process already has: ours is a
// DT_NEEDED of this library, and a program's own libcupti.so.13 has the same SONAME, so
// RTLD_NOLOAD by SONAME finds the one copy that both use.
void* cupti_entry(const char* name) {
  void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  void* f = dlsym(h, name);
  dlclose(h);  // drops the reference RTLD_NOLOAD took; the library stays loaded
  return f;
}

using NvtxInit = int (*)(const void*);

int forward_nvtx(const char* name, const void* get_export_table) {
  auto f = reinterpret_cast<NvtxInit>(cupti_entry(name));
  if (f == nullptr) {
    std::fprintf(stderr, "tbdtrace: libcupti has no %s; NVTX ranges are not captured\n", name);
    return 0;  // NVTX then turns its calls into no-ops
  }
  return f(get_export_table);
}

}  // namespace

// NVTX v3 (and v2, and the payload extension) injection entry points.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void* t) {
  return forward_nvtx("InitializeInjectionNvtx2", t);
}
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx(const void* t) {
  return forward_nvtx("InitializeInjectionNvtx", t);
}
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(
    const void* t) {
  return forward_nvtx("InitializeInjectionNvtxExtension", t);
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* dir = std::getenv("TBDTRACE_SPOOL_DIR");
  if (dir == nullptr || *dir == '\0') {
    std::fprintf(stderr, "tbdtrace: TBDTRACE_SPOOL_DIR is not set; nothing captured\n");
    return 1;
  }
  tbdtrace::CollectorConfig cfg;
  cfg.spool_path = std::string(dir) + "/" + std::to_string(getpid()) + ".tbds";
  const char* acts = std::getenv("TBDTRACE_ACTIVITIES");
  if (acts != nullptr && *acts != '\0') {
    cfg.activities = split_commas(acts);
  } else {
    cfg.activities = tbdtrace::default_activities();
  }
  const char* counters = std::getenv("TBDTRACE_COUNTER_METRICS");
  if (counters != nullptr && *counters != '\0') {
    cfg.counter_metrics = split_commas(counters);
  }
  const char* api = std::getenv("TBDTRACE_API");
  if (api != nullptr && *api != '\0') cfg.api_set = api;
  cfg.buffer_bytes = env_u64("TBDTRACE_BUFFER_BYTES", cfg.buffer_bytes);
  cfg.buffer_max = static_cast<uint32_t>(env_u64("TBDTRACE_BUFFER_MAX", cfg.buffer_max));
  cfg.buffer_count = static_cast<uint32_t>(env_u64("TBDTRACE_BUFFER_COUNT", cfg.buffer_count));
  cfg.flush_interval_ms =
      static_cast<uint32_t>(env_u64("TBDTRACE_FLUSH_INTERVAL_MS", cfg.flush_interval_ms));
  cfg.start_paused = env_u64("TBDTRACE_START_PAUSED", 0) == 1;
  tbdtrace::StartResult r = tbdtrace::collector_start(cfg);
  if (!r.ok) {
    std::fprintf(stderr, "tbdtrace: pid %d: %s\n", static_cast<int>(getpid()), r.message.c_str());
    return 1;  // the program runs on untraced
  }
  tbdtrace::collector_install_signal_handlers();
  std::atexit(stop_at_exit);
  return 1;
}

// Capture windows: the window controller in the program's Python
// (tbdtrace.collector.windows.InjectedWindows) calls these through ctypes at a window's
// first step and at its last step's end. 1: done; 0: no session, or already so.
extern "C" __attribute__((visibility("default"))) int tbdtrace_collector_pause(void) {
  return tbdtrace::collector_pause() ? 1 : 0;
}
extern "C" __attribute__((visibility("default"))) int tbdtrace_collector_resume(void) {
  return tbdtrace::collector_resume() ? 1 : 0;
}
extern "C" __attribute__((visibility("default"))) int tbdtrace_collector_paused(void) {
  return tbdtrace::collector_paused() ? 1 : 0;
}
