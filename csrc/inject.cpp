// CUDA_INJECTION64_PATH entry point: the CUDA driver calls InitializeInjection() once per
// process when it initializes, so any program (and its children, which inherit the
// environment) is captured without changes. Settings come from the environment that
// `tbdtrace capture` sets (the one documented place the collector reads it):
//   TBDTRACE_SPOOL_DIR         directory for <pid>.tbds spool files (required)
//   TBDTRACE_ACTIVITIES        comma-separated kinds (default: collector defaults)
//   TBDTRACE_BUFFER_BYTES, TBDTRACE_BUFFER_COUNT, TBDTRACE_FLUSH_INTERVAL_MS
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "collector.h"

namespace {

uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  return (end && *end == '\0' && x > 0) ? x : dflt;
}

void stop_at_exit() { tbdtrace::collector_stop(); }

}  // namespace

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
    std::stringstream ss(acts);
    std::string a;
    while (std::getline(ss, a, ','))
      if (!a.empty()) cfg.activities.push_back(a);
  } else {
    cfg.activities = tbdtrace::default_activities();
  }
  cfg.buffer_bytes = env_u64("TBDTRACE_BUFFER_BYTES", cfg.buffer_bytes);
  cfg.buffer_count = static_cast<uint32_t>(env_u64("TBDTRACE_BUFFER_COUNT", cfg.buffer_count));
  cfg.flush_interval_ms =
      static_cast<uint32_t>(env_u64("TBDTRACE_FLUSH_INTERVAL_MS", cfg.flush_interval_ms));
  tbdtrace::StartResult r = tbdtrace::collector_start(cfg);
  if (!r.ok) {
    std::fprintf(stderr, "tbdtrace: pid %d: %s\n", static_cast<int>(getpid()), r.message.c_str());
    return 1;  // the program runs on untraced
  }
  tbdtrace::collector_install_signal_handlers();
  std::atexit(stop_at_exit);
  return 1;
}
