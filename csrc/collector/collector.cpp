#include "collector.h"

#include <cupti.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_set>

#include "api_filter.h"
#include "collector_tables.h"
#include "counters_device.h"
#include "cupti_api.h"
#include "decode.h"
#include "spool.h"

namespace tbdtrace {

namespace {

struct KindName {
  const char* name;
  CUpti_ActivityKind kind;
};
const KindName kKinds[] = {
    {"kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},
    {"memcpy2", CUPTI_ACTIVITY_KIND_MEMCPY2},
    {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
    {"memory", CUPTI_ACTIVITY_KIND_MEMORY2},
    {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
    {"driver", CUPTI_ACTIVITY_KIND_DRIVER},
    {"marker", CUPTI_ACTIVITY_KIND_MARKER},
    {"marker_data", CUPTI_ACTIVITY_KIND_MARKER_DATA},
    {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {"overhead", CUPTI_ACTIVITY_KIND_OVERHEAD},
    {"device", CUPTI_ACTIVITY_KIND_DEVICE},
    {"context", CUPTI_ACTIVITY_KIND_CONTEXT},
};

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      o += '\\';
      o += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      o += ' ';
    } else
      o += ch;
  }
  return o + "\"";
}

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

struct Session {
  CollectorConfig cfg;
  ApiSet api_set = ApiSet::kLite;
  std::mutex
      mu;  // guards free_, ready_, dropped_, storage, counters; never held across CUPTI calls
  std::condition_variable cv;
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> storage;
  std::unordered_set<uint8_t*> ours;
  std::vector<uint8_t*> free_;
  std::deque<std::pair<uint8_t*, size_t>> ready_;
  std::map<uint64_t, uint64_t> dropped_;  // context id -> CUPTI dropped records
  uint64_t denied_requests = 0;           // pool empty when CUPTI asked for a buffer
  uint64_t foreign_buffers = 0;           // completed buffers we did not hand out
  uint64_t buffers_completed = 0;
  uint64_t max_held = 0;   // most buffers CUPTI held at once (about one per producing thread)
  uint64_t peak_held = 0;  // most held since the flush thread last looked
  uint64_t denied_since_grow = 0;  // refused requests since the flush thread last looked
  std::vector<CUpti_ActivityKind> enabled;
  // Lite API set: the callback ids switched on (turned off again at stop).
  std::vector<uint32_t> runtime_cbids_on, driver_cbids_on;
  std::vector<std::string> warnings;  // attributes CUPTI refused (capture goes on)
  std::vector<std::string> failed;    // "kind: CUPTI result" for kinds that did not enable
  CUpti_SubscriberHandle subscriber = nullptr;
  bool registered = false;  // buffer callbacks registered: CUPTI may hold our buffers
  ChunkSet chunks;
  Strings strings;
  std::unique_ptr<Decoder> decoder;
  SpoolWriter spool;
  std::thread flusher;
  std::atomic<bool> stopping{false};
  int64_t start_host_ns = 0, start_cupti_ns = 0;
  CuptiApi* api = nullptr;
  // Hardware counters (cfg.counter_metrics): one range profiler per context, started in the
  // CONTEXT_CREATED callback, finished at context destruction or stop. UNVERIFIED on a GPU.
  std::mutex counters_mu;  // guards the three below; held across range profiler calls only
  std::map<CUcontext, std::unique_ptr<RangeProfiler>> profilers;
  std::vector<CounterData> counter_data;
  std::vector<std::string> counter_errors;
};

// The running session. CUPTI calls the buffer callbacks on its own threads at any time, so
// the pointer is atomic and each callback announces itself in g_in_callbacks *before*
// loading it: after a stop stores nullptr and sees the count at zero, no callback can still
// be using the old session (both sequentially consistent), and it may be freed.
std::atomic<Session*> g_session{nullptr};
std::atomic<int> g_in_callbacks{0};
std::mutex g_lifecycle;  // start/stop, pause/resume
std::atomic<int> g_pending_signal{0};
// Capture windows (collector_pause/resume): recording is paused; the flush thread spills
// at its next wake-up when g_spill_now is set.
std::atomic<bool> g_paused{false};
std::atomic<bool> g_spill_now{false};

// Held by each buffer callback for its whole run (see g_session).
struct CallbackScope {
  CallbackScope() { g_in_callbacks.fetch_add(1); }
  ~CallbackScope() { g_in_callbacks.fetch_sub(1); }
  Session* session() const { return g_session.load(); }
};

// Unpublishes the session and waits for callbacks that may still hold it.
void retire_session() {
  g_session.store(nullptr);
  while (g_in_callbacks.load() != 0) std::this_thread::yield();
}

// Frees the session when CUPTI holds none of its buffers; otherwise leaks it on purpose
// (the buffers CUPTI holds stay valid; a late completion finds no session and is ignored).
void release_session(Session* s) {
  bool all_back;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    all_back = s->free_.size() + s->ready_.size() == s->storage.size();
  }
  if (all_back) delete s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CallbackScope scope;
  Session* s = scope.session();
  *max_records = 0;
  *buffer = nullptr;
  *size = 0;
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->free_.empty()) {
    // CUPTI (API version >= 27, CUDA 12.9+) drops and counts records when refused.
    ++s->denied_requests;
    ++s->denied_since_grow;
    return;
  }
  *buffer = s->free_.back();
  s->free_.pop_back();
  // Buffers CUPTI holds now: the flush thread sizes the pool by the peak (a flush hands
  // them all back at once, so the count it sees itself is often zero).
  s->peak_held =
      std::max<uint64_t>(s->peak_held, s->storage.size() - s->free_.size() - s->ready_.size());
  *size = s->cfg.buffer_bytes;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  CallbackScope scope;
  Session* s = scope.session();
  if (s == nullptr || buffer == nullptr) return;
  size_t dropped = 0;
  // Outside our mutex: CUPTI holds its own lock here (ABBA deadlock otherwise).
  s->api->get_num_dropped_records(ctx, stream, &dropped);
  uint32_t ctx_id = 0;
  if (ctx != nullptr) s->api->get_context_id(ctx, &ctx_id);
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (dropped) s->dropped_[ctx_id] += dropped;
    if (s->ours.count(buffer) == 0) {
      ++s->foreign_buffers;
      return;
    }
    s->ready_.emplace_back(buffer, valid);
    ++s->buffers_completed;
  }
  s->cv.notify_one();
}

// A zeroed activity buffer whose pages are already faulted in: called on collector threads
// only, so no application thread pays for the first touch (CUPTI is told the buffers come
// zeroed: CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER).
std::unique_ptr<uint8_t, FreeDeleter> new_buffer(uint64_t bytes) {
  // Page-aligned (CUPTI needs 8); memset writes every page, which faults it in.
  void* p = std::aligned_alloc(4096, (bytes + 4095) & ~uint64_t{4095});
  if (p == nullptr) return nullptr;
  std::memset(p, 0, bytes);
  return std::unique_ptr<uint8_t, FreeDeleter>(static_cast<uint8_t*>(p));
}

// Adds `n` new buffers to the free list (collector threads only; allocation outside mu).
void add_buffers(Session* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    auto b = new_buffer(s->cfg.buffer_bytes);
    if (!b) return;
    std::lock_guard<std::mutex> lk(s->mu);
    s->ours.insert(b.get());
    s->free_.push_back(b.get());
    s->storage.push_back(std::move(b));
  }
}

// With per-thread buffers (CUDA 13 default, set explicitly at start) every producing thread
// holds one buffer, and after a flush each of them asks for a new one at once: keep a spare
// per held buffer (plus one), up to buffer_max. Runs on the flush thread.
void grow_pool(Session* s) {
  size_t want = 0;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    const size_t total = s->storage.size();
    const size_t now = total - s->free_.size() - s->ready_.size();
    const size_t held = std::max<size_t>(now, s->peak_held);
    s->max_held = std::max<uint64_t>(s->max_held, held);
    s->peak_held = now;
    // A refused request means one more thread than buffers: one more spare (a refused
    // thread asks again for every record, so the count itself says nothing of how many).
    const size_t target = held + 1 + (s->denied_since_grow ? 1 : 0);
    s->denied_since_grow = 0;
    if (s->free_.size() < target && total < s->cfg.buffer_max)
      want = std::min<size_t>(target - s->free_.size(), s->cfg.buffer_max - total);
  }
  if (want) add_buffers(s, want);
}

// Decodes every ready buffer and gives it back to the pool; spills when chunks are large.
void drain(Session* s, bool force_spill) {
  for (;;) {
    std::pair<uint8_t*, size_t> b;
    {
      std::lock_guard<std::mutex> lk(s->mu);
      if (s->ready_.empty()) break;
      b = s->ready_.front();
      s->ready_.pop_front();
    }
    CUpti_Activity* rec = nullptr;
    while (s->api->get_next_record(b.first, b.second, &rec) == CUPTI_SUCCESS)
      s->decoder->decode(rec);
    // Zeroed again here, on the collector's thread: CUPTI writes records only below the
    // valid size it reported, so the rest of the buffer is still zero.
    std::memset(b.first, 0, b.second);
    std::lock_guard<std::mutex> lk(s->mu);
    s->free_.push_back(b.first);
  }
  if (force_spill || s->chunks.rows() >= s->cfg.spill_rows) spill(s->spool, s->chunks, s->strings);
}

void flush_loop(Session* s) {
  auto next =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(s->cfg.flush_interval_ms);
  while (!s->stopping.load()) {
    {
      std::unique_lock<std::mutex> lk(s->mu);
      // Short waits so a pending SIGTERM is noticed quickly, and no longer than the next
      // periodic flush (intervals under 50 ms keep their period).
      auto wait = std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(50), next - std::chrono::steady_clock::now());
      if (wait > std::chrono::steady_clock::duration::zero()) s->cv.wait_for(lk, wait);
    }
    if (g_pending_signal.load()) break;
    if (std::chrono::steady_clock::now() >= next) {
      s->api->flush_all(0);
      next = std::chrono::steady_clock::now() + std::chrono::milliseconds(s->cfg.flush_interval_ms);
      drain(s, true);  // spill each period: a SIGKILL loses at most one period
    } else {
      drain(s, g_spill_now.exchange(false));  // a window's end: its records to the spool
    }
    grow_pool(s);
  }
  int sig = g_pending_signal.load();
  if (sig != 0) {
    // Stop from this thread (not the handler: nothing here is async-signal-safe), then
    // die of the same signal with its default action.
    std::thread([sig] {
      collector_stop();
      signal(sig, SIG_DFL);
      raise(sig);
    }).detach();
  }
}

// Plain string building, no iostreams: a profiled process may have loaded a libstdc++ whose
// iostream and locale state this module's headers do not expect. On an H200 machine
// (Python 3.12, GCC 13 build) std::ostringstream crashed on first use once pyarrow or
// torch had been imported; everything the collector writes is built with this instead.
struct Out {
  std::string s;
  Out& operator<<(const char* v) {
    s += v;
    return *this;
  }
  Out& operator<<(const std::string& v) {
    s += v;
    return *this;
  }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  Out& operator<<(T v) {
    s += std::to_string(v);
    return *this;
  }
};

std::string meta_json(Session* s, int cupti_ver) {
  std::lock_guard<std::mutex> ck(s->counters_mu);  // lock order: mu, then counters_mu
  Out o;
  o << "{\"pid\":" << getpid() << ",\"clock\":\"CLOCK_REALTIME\",\"clock_offset_ns\":0"
    << ",\"cupti_minus_host_ns_at_start\":" << (s->start_cupti_ns - s->start_host_ns)
    << ",\"start_time_ns\":" << s->start_host_ns << ",\"stop_time_ns\":" << realtime_ns()
    << ",\"cupti_version\":" << cupti_ver << ",\"buffer_bytes\":" << s->cfg.buffer_bytes
    << ",\"buffer_count\":" << s->cfg.buffer_count << ",\"buffer_max\":" << s->cfg.buffer_max
    << ",\"buffers_allocated\":" << s->storage.size() << ",\"max_buffers_held\":" << s->max_held
    << ",\"api\":\"" << api_set_name(s->api_set) << "\""
    << ",\"spool_crc\":\"" << crc32_implementation() << "\""
    << ",\"api_runtime_cbids\":" << s->runtime_cbids_on.size()
    << ",\"api_driver_cbids\":" << s->driver_cbids_on.size()
    << ",\"flush_interval_ms\":" << s->cfg.flush_interval_ms
    << ",\"denied_buffer_requests\":" << s->denied_requests
    << ",\"foreign_buffers\":" << s->foreign_buffers
    << ",\"buffers_completed\":" << s->buffers_completed
    << ",\"spool_errors\":" << s->spool.errors() << ",\"spool_lost_rows\":" << s->spool.lost_rows()
    << ",\"spool_error\":" << json_str(s->spool.first_error())
    << ",\"counter_contexts\":" << s->counter_data.size() << ",\"counter_errors\":[";
  for (size_t i = 0; i < s->counter_errors.size(); ++i)
    o << (i ? "," : "") << json_str(s->counter_errors[i]);
  o << "]";
  const auto& st = s->decoder->stats();
  o << ",\"records\":" << st.records << ",\"unknown_kind_records\":" << st.unknown_kind
    << ",\"marker_data_records\":" << st.marker_data
    << ",\"unmatched_marker_ends\":" << st.unmatched_marker_end << ",\"activities\":[";
  for (size_t i = 0; i < s->cfg.activities.size(); ++i)
    o << (i ? "," : "") << json_str(s->cfg.activities[i]);
  o << "],\"failed_activities\":[";
  for (size_t i = 0; i < s->failed.size(); ++i) o << (i ? "," : "") << json_str(s->failed[i]);
  o << "],\"warnings\":[";
  for (size_t i = 0; i < s->warnings.size(); ++i) o << (i ? "," : "") << json_str(s->warnings[i]);
  o << "],\"dropped_records\":{";
  bool first = true;
  for (const auto& [ctx, n] : s->dropped_) {
    o << (first ? "" : ",") << "\"" << ctx << "\":" << n;
    first = false;
  }
  o << "}}";
  return o.s;
}

// A start that went wrong after the session was published: undo it. Buffers CUPTI took
// between registering the callbacks and now come back through the forced flush; a pool
// CUPTI still holds after it is leaked (release_session), never freed under CUPTI.
void api_cbids_off(Session* s) {
  for (auto c : s->runtime_cbids_on) s->api->enable_runtime_api(c, 0);
  for (auto c : s->driver_cbids_on) s->api->enable_driver_api(c, 0);
}

StartResult fail(Session* s, const std::string& status, const std::string& msg) {
  for (auto k : s->enabled) s->api->disable(k);
  api_cbids_off(s);
  if (s->registered) s->api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (s->subscriber) s->api->unsubscribe(s->subscriber);
  retire_session();
  s->spool.close();
  std::remove(s->cfg.spool_path.c_str());
  release_session(s);
  return StartResult{false, status, msg};
}

void counters_context_created(Session* s, CUcontext ctx) {
  uint32_t ctx_id = 0, dev = 0;
  s->api->get_context_id(ctx, &ctx_id);
  std::string error;
  std::string chip;
  CUptiResult r = cuptiGetDeviceId(ctx, &dev);
  if (r != CUPTI_SUCCESS)
    error = "cuptiGetDeviceId: " + cupti_result_name(r);
  else
    chip = device_chip_name(dev, &error);
  auto prof = std::make_unique<RangeProfiler>();
  if (error.empty())
    error = prof->start(ctx, ctx_id, chip, s->cfg.counter_metrics, s->cfg.counter_max_ranges);
  std::lock_guard<std::mutex> lk(s->counters_mu);
  if (!error.empty()) {
    s->counter_errors.push_back("context " + std::to_string(ctx_id) + ": " + error);
    if (prof->running()) {
      CounterData ignored;
      prof->finish(&ignored);
    }
    return;
  }
  s->profilers[ctx] = std::move(prof);
}

// Finishes the range profiler of `ctx` (all contexts when nullptr) into counter_data.
void counters_finish(Session* s, CUcontext ctx) {
  std::lock_guard<std::mutex> lk(s->counters_mu);
  for (auto it = s->profilers.begin(); it != s->profilers.end();) {
    if (ctx != nullptr && it->first != ctx) {
      ++it;
      continue;
    }
    CounterData d;
    std::string error = it->second->finish(&d);
    if (!error.empty())
      s->counter_errors.push_back("context " + std::to_string(d.context_id) + ": " + error);
    if (!d.image.empty()) s->counter_data.push_back(std::move(d));
    it = s->profilers.erase(it);
  }
}

// The subscriber's callback: context creation and destruction, for hardware counters only.
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || data == nullptr) return;
  CallbackScope scope;
  Session* s = scope.session();
  if (s == nullptr || s->cfg.counter_metrics.empty()) return;
  auto* rd = static_cast<const CUpti_ResourceData*>(data);
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
    counters_context_created(s, rd->context);
  else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
    counters_finish(s, rd->context);
}

// Kinds a pause leaves on: the device and context records name what the windows saw.
bool window_kind(CUpti_ActivityKind k) {
  return k != CUPTI_ACTIVITY_KIND_DEVICE && k != CUPTI_ACTIVITY_KIND_CONTEXT;
}

void pause_session(Session* s) {
  for (auto k : s->enabled)
    if (window_kind(k)) s->api->disable(k);
  api_cbids_off(s);  // lite: the runtime/driver calls switched on one by one
  // Forced: also the buffers being filled; bufferCompleted runs here, synchronously.
  s->api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_spill_now.store(true);
  g_paused.store(true);
  s->cv.notify_one();
}

}  // namespace

const std::vector<std::string>& default_activities() {
  static const std::vector<std::string> v = {"kernel", "memcpy",   "memcpy2", "memset",
                                             "memory", "runtime",  "driver",  "marker",
                                             "sync",   "overhead", "device",  "context"};
  return v;
}

const std::vector<std::string>& activity_names() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> r;
    for (const auto& k : kKinds) r.emplace_back(k.name);
    return r;
  }();
  return v;
}

int cupti_version() {
  uint32_t v = 0;
  CUptiResult r = cuptiGetVersion(&v);
  return r == CUPTI_SUCCESS ? static_cast<int>(v) : -static_cast<int>(r);
}

std::string cupti_result_name(int code) {
  const char* s = nullptr;
  if (cuptiGetResultString(static_cast<CUptiResult>(code), &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error " + std::to_string(code);
}

std::string cupti_library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) && info.dli_fname)
    return info.dli_fname;
  return "";
}

StartResult collector_start(const CollectorConfig& cfg) {
  std::lock_guard<std::mutex> life(g_lifecycle);
  if (g_session.load() != nullptr)
    return {false, "error", "the CUPTI collector is already running"};
  std::vector<CUpti_ActivityKind> kinds;
  for (const auto& a : cfg.activities) {
    bool found = false;
    for (const auto& k : kKinds)
      if (a == k.name) {
        kinds.push_back(k.kind);
        found = true;
      }
    if (!found) return {false, "error", "unknown activity '" + a + "'"};
  }
  ApiSet api_set;
  if (!parse_api_set(cfg.api_set, &api_set))
    return {false, "error", "unknown API set '" + cfg.api_set + "' (lite or full)"};
  auto* s = new Session();
  s->cfg = cfg;
  s->cfg.buffer_max = std::max(cfg.buffer_max, cfg.buffer_count);
  s->api_set = api_set;
  s->api = cfg.api != nullptr ? cfg.api : &real_cupti();
  g_session.store(s);
  s->decoder = std::make_unique<Decoder>(s->chunks, s->strings);
  std::string err = s->spool.open(cfg.spool_path, static_cast<uint32_t>(getpid()));
  if (!err.empty()) return fail(s, "error", err);

  // The subscriber is an ownership token: CUDA 13.0 allows one per process, and a second
  // one fails with MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED naming the tool that holds it.
  char old_name[256] = {0};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "tbdtrace";
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof(old_name);
  CUptiResult r = s->api->subscribe(&s->subscriber, on_callback, nullptr, &params);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    s->subscriber = nullptr;
    std::string who = old_name[0] ? old_name : "another profiler (nsys, ncu, a framework profiler)";
    return fail(s, "other_tool",
                "CUPTI is already in use by " + who +
                    "; capture stopped, the other tool's run is untouched");
  }
  if (r != CUPTI_SUCCESS) {
    s->subscriber = nullptr;
    if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED ||
        r == CUPTI_ERROR_INVALID_DEVICE)
      return fail(s, "no_device", "no CUDA driver/device (CUPTI: " + cupti_result_name(r) + ")");
    return fail(s, "error", "cuptiSubscribe failed: " + cupti_result_name(r));
  }
  // The initial pool is zeroed and faulted in on a collector thread, not this one (which
  // may be the application's, in injection mode the thread that initializes CUDA).
  std::thread([s] { add_buffers(s, s->cfg.buffer_count); }).join();
  if (s->storage.size() < cfg.buffer_count)
    return fail(s, "error", "cannot allocate CUPTI buffers");
  if (!cfg.counter_metrics.empty()) {
    for (auto cbid :
         {CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING}) {
      r = s->api->enable_callback(1, s->subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid);
      if (r != CUPTI_SUCCESS)
        return fail(s, "error", "cuptiEnableCallback (hardware counters): " + cupti_result_name(r));
    }
  }
  // Both before the callbacks are registered and any kind is enabled (cupti_activity.h):
  // buffers come zeroed (else CUPTI zeroes each on the requesting application thread), and
  // one buffer per thread (CUDA 13's default, set explicitly; the pool follows the threads).
  for (auto attr : {CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                    CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER}) {
    uint8_t one = 1;
    size_t size = sizeof(one);
    r = s->api->set_attribute(attr, &size, &one);
    if (r != CUPTI_SUCCESS)
      s->warnings.push_back("cuptiActivitySetAttribute(" + std::to_string(attr) +
                            "): " + cupti_result_name(r));
  }
  r = s->api->register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS)
    return fail(s, "error", "cuptiActivityRegisterCallbacks: " + cupti_result_name(r));
  s->registered = true;
  bool lite_runtime = false, lite_driver = false;
  for (size_t i = 0; i < kinds.size(); ++i) {
    // Lite: the RUNTIME/DRIVER kinds stay off (enabling one would override the per-call
    // switches below); the calls of the lite set are switched on one by one instead.
    if (s->api_set == ApiSet::kLite && kinds[i] == CUPTI_ACTIVITY_KIND_RUNTIME) {
      lite_runtime = true;
      continue;
    }
    if (s->api_set == ApiSet::kLite && kinds[i] == CUPTI_ACTIVITY_KIND_DRIVER) {
      lite_driver = true;
      continue;
    }
    r = s->api->enable(kinds[i]);
    if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED)
      return fail(s, "no_device", "no CUDA driver/device (CUPTI: " + cupti_result_name(r) + ")");
    // A kind this device or driver does not support is left out (and named in meta)
    // rather than losing the whole capture.
    if (r != CUPTI_SUCCESS) {
      s->failed.push_back(cfg.activities[i] + ": " + cupti_result_name(r));
      continue;
    }
    s->enabled.push_back(kinds[i]);
  }
  // After every kind: a RUNTIME/DRIVER kind enabled later would override these.
  for (int driver = 0; driver < 2; ++driver) {
    if (!(driver ? lite_driver : lite_runtime)) continue;
    for (uint32_t cbid : driver ? lite_driver_cbids() : lite_runtime_cbids()) {
      r = driver ? s->api->enable_driver_api(cbid, 1) : s->api->enable_runtime_api(cbid, 1);
      if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED)
        return fail(s, "no_device", "no CUDA driver/device (CUPTI: " + cupti_result_name(r) + ")");
      if (r != CUPTI_SUCCESS) {
        s->failed.push_back(std::string(driver ? "driver" : "runtime") + " API " +
                            std::to_string(cbid) + ": " + cupti_result_name(r));
        continue;
      }
      (driver ? s->driver_cbids_on : s->runtime_cbids_on).push_back(cbid);
    }
  }
  if (s->enabled.empty() && s->runtime_cbids_on.empty() && s->driver_cbids_on.empty() &&
      !kinds.empty())
    return fail(s, "error", "no activity kind could be enabled (" + s->failed.front() + ")");
  uint64_t ts = 0;
  s->api->get_timestamp(&ts);
  s->start_host_ns = realtime_ns();
  s->start_cupti_ns = static_cast<int64_t>(ts);
  g_paused.store(false);
  g_spill_now.store(false);
  s->flusher = std::thread(flush_loop, s);
  // Enabled first, then paused: the kinds' one-time enable costs stay out of the windows.
  if (cfg.start_paused) pause_session(s);
  return {true, "ok", cfg.start_paused ? "paused" : "capturing"};
}

std::string collector_stop() {
  std::lock_guard<std::mutex> life(g_lifecycle);
  Session* s = g_session.load();
  if (s == nullptr) return "";
  // Forced flush first: it calls buffer_completed synchronously, so no lock is held here.
  s->api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto k : s->enabled) s->api->disable(k);
  api_cbids_off(s);
  // Records refused for want of a buffer since the last completion (the global queue).
  size_t dropped = 0;
  if (s->api->get_num_dropped_records(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped) {
    std::lock_guard<std::mutex> lk(s->mu);
    s->dropped_[0] += dropped;
  }
  s->stopping = true;
  s->cv.notify_all();
  if (s->flusher.joinable() && s->flusher.get_id() != std::this_thread::get_id())
    s->flusher.join();
  else if (s->flusher.joinable())
    s->flusher.detach();
  drain(s, false);
  s->decoder->close_open_ranges();
  spill(s->spool, s->chunks, s->strings);
  counters_finish(s, nullptr);
  for (const auto& d : s->counter_data) write_counters(s->spool, d);
  int ver = cupti_version();
  std::string meta;
  {
    std::lock_guard<std::mutex> lk(s->mu);  // counters a late callback may still bump
    meta = meta_json(s, ver);
  }
  s->spool.write_meta(meta);
  s->spool.close();
  if (s->subscriber) s->api->unsubscribe(s->subscriber);
  std::string path = s->cfg.spool_path;
  retire_session();
  release_session(s);
  return path;
}

bool collector_running() {
  return g_session.load() != nullptr;
}

bool collector_pause() {
  std::lock_guard<std::mutex> life(g_lifecycle);
  Session* s = g_session.load();
  if (s == nullptr || g_paused.load()) return false;
  pause_session(s);
  return true;
}

bool collector_resume() {
  std::lock_guard<std::mutex> life(g_lifecycle);
  Session* s = g_session.load();
  if (s == nullptr || !g_paused.load()) return false;
  for (auto k : s->enabled)
    if (window_kind(k)) s->api->enable(k);
  // After the kinds, as at start: a RUNTIME/DRIVER kind enabled later would override these.
  for (auto c : s->runtime_cbids_on) s->api->enable_runtime_api(c, 1);
  for (auto c : s->driver_cbids_on) s->api->enable_driver_api(c, 1);
  g_paused.store(false);
  return true;
}

bool collector_paused() {
  return g_session.load() != nullptr && g_paused.load();
}

namespace {
void on_signal(int sig) {
  g_pending_signal.store(sig);
}
}  // namespace

void collector_install_signal_handlers() {
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction old{};
    sigaction(sig, nullptr, &old);
    // Only replace the default action; a program's own handler (Python's SIGINT) stays,
    // and that program's normal exit then stops the collector through atexit.
    if (old.sa_handler != SIG_DFL) continue;
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace tbdtrace
