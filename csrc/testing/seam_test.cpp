// The collector lifecycle through the fake CUPTI, as a plain executable so that it runs
// under AddressSanitizer/UBSan and ThreadSanitizer (make sanitize). Each scenario is one
// invocation: tbdtrace_seam_test SCENARIO DIR. The spool is checked with its own small
// reader (chunk walk, zlib CRC, the kernels' correlation ids, the meta's counters).
// tests/native/test_collector_seam.py runs the same scenarios in Python on every test run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collector/collector.h"
#include "common/column_core.h"
#include "testing/fake_cupti.h"

using namespace tbdtrace;
using tbdtrace::testing::FakeConfig;
using tbdtrace::testing::FakeCupti;

namespace {

int g_failures = 0;
#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                                 \
    }                                                                               \
  } while (0)

struct SpoolView {
  bool ok = false;    // file header present
  size_t chunks = 0;  // whole chunks with a good CRC
  size_t kernel_chunks = 0;
  size_t tail_bytes = 0;     // bytes after the last good chunk
  std::vector<int64_t> ids;  // kernels.correlation_id, in file order
  std::string meta;          // meta JSON ("" if absent)
};

SpoolView read_spool(const std::string& path) {
  SpoolView v;
  std::ifstream f(path, std::ios::binary);
  std::string d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (d.size() < 16 || d.compare(0, 8, "TBDSPOOL") != 0) return v;
  v.ok = true;
  size_t off = 16;
  auto u32 = [&](size_t o) {
    uint32_t x;
    std::memcpy(&x, d.data() + o, 4);
    return x;
  };
  auto u64 = [&](size_t o) {
    uint64_t x;
    std::memcpy(&x, d.data() + o, 8);
    return x;
  };
  while (off + 32 <= d.size()) {
    uint32_t magic = u32(off), type = u32(off + 4), crc = u32(off + 24), ncols = u32(off + 28);
    uint64_t nbytes = u64(off + 8);
    size_t body = off + 32;
    if (magic != 0x4B484354 || body + nbytes > d.size()) break;
    auto* p = reinterpret_cast<const Bytef*>(d.data() + body);
    if (::crc32(0, p, static_cast<uInt>(nbytes)) != crc) break;
    if (type == 101) v.meta.assign(d.data() + body, nbytes);
    if (type == 1) {  // kernels
      ++v.kernel_chunks;
      size_t pos = body;
      const uint64_t rows = u64(off + 16);
      for (uint32_t c = 0; c < ncols; ++c) {
        uint16_t nlen;
        std::memcpy(&nlen, d.data() + pos, 2);
        const bool has_valid = d[pos + 3] & 1;  // spool v2: a validity bitmap follows
        uint64_t dbytes = u64(pos + 8);
        std::string name(d.data() + pos + 16, nlen);
        pos += 16 + ((nlen + 7) & ~size_t{7});
        if (name == "correlation_id")
          for (uint64_t i = 0; i < dbytes / 8; ++i)
            v.ids.push_back(static_cast<int64_t>(u64(pos + 8 * i)));
        pos += (dbytes + 7) & ~uint64_t{7};
        if (has_valid) pos += ((rows + 7) / 8 + 7) & ~uint64_t{7};
      }
    }
    ++v.chunks;
    off = body + nbytes;
  }
  v.tail_bytes = d.size() - off;
  return v;
}

// The integer after "key": in the meta JSON (-1 if absent).
long long meta_int(const std::string& meta, const std::string& key) {
  auto p = meta.find("\"" + key + "\":");
  if (p == std::string::npos) return -1;
  return std::atoll(meta.c_str() + p + key.size() + 3);
}

// Sum of the values of the "dropped_records" object.
long long meta_dropped(const std::string& meta) {
  auto p = meta.find("\"dropped_records\":{");
  if (p == std::string::npos) return -1;
  long long sum = 0;
  for (size_t q = p + 19; q < meta.size() && meta[q] != '}';) {
    q = meta.find(':', q);
    if (q == std::string::npos) break;
    sum += std::atoll(meta.c_str() + q + 1);
    q = meta.find_first_of(",}", q);
  }
  return sum;
}

CollectorConfig config(const std::string& dir, FakeCupti* fake, uint64_t buffer_bytes,
                       uint32_t count, uint32_t flush_ms) {
  CollectorConfig c;
  c.spool_path = dir + "/seam.tbds";
  c.activities = {"kernel"};
  c.buffer_bytes = buffer_bytes;
  c.buffer_count = count;
  c.buffer_max = count;  // a fixed pool unless a scenario lets it grow
  c.flush_interval_ms = flush_ms;
  c.api = fake;
  return c;
}

std::vector<int64_t> sorted(std::vector<uint32_t> v) {
  std::vector<int64_t> o(v.begin(), v.end());
  std::sort(o.begin(), o.end());
  return o;
}

// Every record written is in the spool exactly once; dropped ones are counted in meta.
void check_complete(FakeCupti& fake, const std::string& path) {
  SpoolView v = read_spool(path);
  auto st = fake.stats();
  CHECK(v.ok && !v.meta.empty() && v.tail_bytes == 0);
  auto ids = v.ids;
  std::sort(ids.begin(), ids.end());
  CHECK(ids == sorted(fake.written_ids()));
  CHECK(st.written + st.dropped == st.produced);
  CHECK(meta_int(v.meta, "records") == static_cast<long long>(st.written));
  CHECK(meta_dropped(v.meta) == static_cast<long long>(st.dropped));
  CHECK(meta_int(v.meta, "denied_buffer_requests") == static_cast<long long>(st.denied));
  CHECK(meta_int(v.meta, "spool_errors") == 0);
}

void periodic(const std::string& dir) {
  FakeConfig fc;
  fc.threads = 3;
  fc.records_per_thread = 400;
  fc.rate_per_s = 2000;  // 0.2 s of records
  FakeCupti fake(fc);
  auto r = collector_start(config(dir, &fake, 64 << 10, 8, 10));
  CHECK(r.ok);
  fake.start_producers();
  fake.join_producers();
  std::string path = collector_stop();
  CHECK(path == dir + "/seam.tbds");
  check_complete(fake, path);
  auto st = fake.stats();
  CHECK(st.flushes >= 8 && st.forced_flushes == 1);
  CHECK(read_spool(path).kernel_chunks >= 3);  // spilled each period, not only at stop
  CHECK(st.subscribes == 1 && st.unsubscribes == 1 && st.enables == st.disables);
}

void burst(const std::string& dir) {
  FakeConfig fc;
  fc.threads = 4;
  fc.records_per_thread = 20000;
  FakeCupti fake(fc);
  CHECK(collector_start(config(dir, &fake, 64 << 10, 16, 2)).ok);
  fake.start_producers();
  fake.join_producers();
  check_complete(fake, collector_stop());
}

void exhaustion(const std::string& dir) {
  FakeConfig fc;
  fc.threads = 4;  // each holds a buffer while it fills it: a pool of 2 must refuse some
  fc.records_per_thread = 3000;
  FakeCupti fake(fc);
  CHECK(collector_start(config(dir, &fake, 64 << 10, 2, 1000)).ok);
  fake.start_producers();
  fake.join_producers();
  std::string path = collector_stop();
  check_complete(fake, path);
  auto st = fake.stats();
  CHECK(st.denied > 0 && st.dropped > 0);
}

void stop_during_flush(const std::string& dir) {
  FakeConfig fc;
  fc.threads = 2;
  fc.records_per_thread = 100000;
  fc.rate_per_s = 20000;
  fc.flush_delay_us = 30000;
  FakeCupti fake(fc);
  CHECK(collector_start(config(dir, &fake, 64 << 10, 8, 5)).ok);
  fake.start_producers();
  CHECK(fake.wait_in_flush(5000));
  std::string path = collector_stop();  // while the flush thread is inside flush_all
  fake.join_producers();                // records after stop are dropped: no session
  SpoolView v = read_spool(path);
  CHECK(v.ok && !v.meta.empty() && v.tail_bytes == 0);
  std::set<int64_t> uniq(v.ids.begin(), v.ids.end());
  CHECK(uniq.size() == v.ids.size());
  auto written = sorted(fake.written_ids());
  for (auto id : v.ids) CHECK(std::binary_search(written.begin(), written.end(), id));
  CHECK(meta_int(v.meta, "records") == static_cast<long long>(v.ids.size()));
}

// Buffers come zeroed and faulted in, the attributes precede the callbacks, the pool grows
// to one spare per producing thread, and the lite API set switches calls on and off.
void buffers(const std::string& dir) {
  FakeConfig fc;
  fc.threads = 12;
  fc.records_per_thread = 3000;
  fc.rate_per_s = 20000;
  FakeCupti fake(fc);
  CollectorConfig c = config(dir, &fake, 64 << 10, 2, 5);
  c.buffer_max = 64;
  c.activities = {"kernel", "runtime", "driver"};
  CHECK(collector_start(c).ok);
  fake.start_producers();
  fake.join_producers();
  std::string path = collector_stop();
  check_complete(fake, path);
  auto st = fake.stats();
  CHECK(st.dirty_buffers == 0 && st.cold_buffers == 0);
  SpoolView v = read_spool(path);
  long long allocated = meta_int(v.meta, "buffers_allocated");
  CHECK(allocated > 2 && allocated <= 64);
  CHECK(meta_int(v.meta, "max_buffers_held") >= 1);
  int attrs = 0, reg = -1, i = 0, first_cbid = -1, last_enable = -1, on = 0, off = 0;
  for (const auto& call : fake.calls()) {
    if (call.what == "attr" && call.value == 1 && reg < 0) ++attrs;
    if (call.what == "register") reg = i;
    if (call.what == "enable") {
      last_enable = i;
      CHECK(call.id != CUPTI_ACTIVITY_KIND_RUNTIME && call.id != CUPTI_ACTIVITY_KIND_DRIVER);
    }
    if (call.what == "runtime_api" || call.what == "driver_api") {
      if (first_cbid < 0) first_cbid = i;
      (call.value ? on : off) += 1;
    }
    ++i;
  }
  CHECK(attrs == 2 && reg > 0 && first_cbid > last_enable && on > 0 && on == off);
}

void second_start(const std::string& dir) {
  FakeCupti fake(FakeConfig{});
  FakeCupti other(FakeConfig{});
  CHECK(collector_start(config(dir, &fake, 64 << 10, 2, 1000)).ok);
  CHECK(collector_running());
  auto again = collector_start(config(dir + "/x", &other, 64 << 10, 2, 1000));
  CHECK(!again.ok && again.message.find("already running") != std::string::npos);
  CHECK(other.stats().subscribes == 0);
  CHECK(!collector_stop().empty());
  CHECK(!collector_running() && collector_stop().empty());
  CHECK(collector_start(config(dir, &other, 64 << 10, 2, 1000)).ok);  // a new session
  CHECK(!collector_stop().empty());
}

void failed_start(const std::string& dir) {
  FakeConfig fc;
  fc.enable_result = 999;  // CUPTI_ERROR_UNKNOWN: no driver
  fc.enable_ok_count = 1;
  fc.hold_buffer = true;
  {
    FakeCupti fake(fc);
    CollectorConfig c = config(dir, &fake, 64 << 10, 2, 1000);
    c.activities = {"kernel", "memcpy"};
    auto r = collector_start(c);
    CHECK(!r.ok && r.status == "no_device");
    CHECK(!collector_running());
    CHECK(access(c.spool_path.c_str(), F_OK) != 0);  // our own spool file removed
    CHECK(fake.stats().forced_flushes == 1 && fake.stats().unsubscribes == 1);
  }  // the fake writes into the buffer it kept: a freed pool is a use after free
  FakeConfig busy;
  busy.subscribe_result = 39;  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
  busy.old_subscriber = "Nsight Systems";
  FakeCupti fake(busy);
  auto r = collector_start(config(dir, &fake, 64 << 10, 2, 1000));
  CHECK(!r.ok && r.status == "other_tool" && r.message.find("Nsight Systems") != std::string::npos);
}

void signal_stop(const std::string& dir, int sig) {
  std::string path = dir + "/seam.tbds";
  pid_t pid = fork();
  if (pid == 0) {
    FakeConfig fc;
    fc.threads = 2;
    fc.records_per_thread = 1000000;
    fc.rate_per_s = 5000;
    auto* fake = new FakeCupti(fc);  // dies with the process
    signal(sig, SIG_DFL);
    if (!collector_start(config(dir, fake, 64 << 10, 8, 20)).ok) _exit(3);
    collector_install_signal_handlers();
    fake->start_producers();
    for (;;) pause();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sig);  // re-raised after the stop
  SpoolView v = read_spool(path);
  CHECK(v.ok && !v.meta.empty() && v.tail_bytes == 0);  // stopped cleanly first
  CHECK(!v.ids.empty() && meta_int(v.meta, "records") == static_cast<long long>(v.ids.size()));
  std::set<int64_t> uniq(v.ids.begin(), v.ids.end());
  CHECK(uniq.size() == v.ids.size());
}

// Capture windows: records made while paused never reach a buffer (the kinds are off),
// the device kind stays on, and what was recorded before, during and after is all there.
void pause_resume(const std::string& dir) {
  FakeConfig fc;
  fc.threads = 2;
  fc.records_per_thread = 600;
  fc.rate_per_s = 2000;  // 0.3 s of records
  FakeCupti fake(fc);
  CollectorConfig c = config(dir, &fake, 64 << 10, 8, 10);
  c.activities = {"kernel", "device"};
  c.start_paused = true;
  CHECK(collector_start(c).ok && collector_paused());
  CHECK(fake.stats().enables == 2 && fake.stats().disables == 1);  // kernel off, device on
  fake.start_producers();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(fake.stats().produced == 0);  // paused from the start
  CHECK(collector_resume() && !collector_resume() && !collector_paused());
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  CHECK(collector_pause() && !collector_pause());
  auto at_pause = fake.stats();
  CHECK(at_pause.produced > 0 && at_pause.forced_flushes == 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(fake.stats().produced == at_pause.produced);  // nothing recorded while paused
  CHECK(collector_resume());
  fake.join_producers();
  std::string path = collector_stop();
  check_complete(fake, path);
  auto st = fake.stats();
  CHECK(st.produced > at_pause.produced && st.produced < 2u * 600u);  // the pauses left gaps
  // No session: nothing to pause or resume.
  CHECK(!collector_pause() && !collector_resume());
}

// The column core's mapped buffers and prefault thread (csrc/common/column_core.h) under
// the sanitizers: two threads (as the Kineto parser's two) each grow a table with
// prefaulting on far past kMapBytes, through clear-and-refill (the collector's cycle) and
// append, and check every value handed over; the prefault thread populates their pages
// meanwhile, and their mappings move and go under it.
// clang-format off
#define SEAM_COLS(X) X(v_i64, I64) X(v_i32, I32)
// clang-format on
namespace seamcol {
TBD_COLUMN_HANDLES(SEAM_COLS)
}

void seam_fill(ColumnTable& t, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i) {
    size_t r = t.begin_row();
    t.set(seamcol::v_i64, r, static_cast<int64_t>(i) * 3 + 1);
    t.set_i32(seamcol::v_i32, r, static_cast<int64_t>(i), i % 5 != 0);
  }
}

bool seam_check(std::vector<TakenColumn>& cols, const std::vector<size_t>& rows) {
  bool ok = cols.size() == 2 && cols[0].data.bytes == rows.size() * 8 &&
            cols[1].data.bytes == rows.size() * 4;
  for (size_t k = 0; ok && k < rows.size(); ++k) {
    size_t i = rows[k];
    bool valid = i % 5 != 0;
    ok =
        static_cast<const int64_t*>(cols[0].data.ptr)[k] == static_cast<int64_t>(i) * 3 + 1 &&
        static_cast<const int32_t*>(cols[1].data.ptr)[k] == (valid ? static_cast<int32_t>(i) : 0) &&
        (static_cast<const uint8_t*>(cols[1].valid.ptr)[k >> 3] >> (k & 7) & 1) == valid;
  }
  for (auto& c : cols) {
    free_owned(c.data);
    free_owned(c.valid);
  }
  return ok;
}

void column_blocks(const std::string&) {
  static const TableDef def{"seam", 0, {SEAM_COLS(TBD_COLUMN_DEF)}};
  auto work = [](size_t base, bool* ok) {
    *ok = true;
    for (int round = 0; round < 3; ++round) {
      ColumnTable t(def, 64);
      t.set_prefault(true);
      seam_fill(t, base, 300000);
      t.clear();
      seam_fill(t, base + 1000000, 700000);
      ColumnTable src(def, 64);
      seam_fill(src, base + 2000000, 200000);
      t.append(src, nullptr);
      auto cols = t.take();
      std::vector<size_t> rows;
      for (size_t i = 0; i < 700000; ++i) rows.push_back(base + 1000000 + i);
      for (size_t i = 0; i < 200000; ++i) rows.push_back(base + 2000000 + i);
      *ok = seam_check(cols, rows) && *ok;
    }
  };
  bool ok1 = false, ok2 = false;
  std::thread a(work, 0, &ok1), b(work, 10000000, &ok2);
  a.join();
  b.join();
  CHECK(ok1 && ok2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tbdtrace_seam_test SCENARIO DIR\n");
    return 2;
  }
  std::string s = argv[1], dir = argv[2];
  if (s == "periodic")
    periodic(dir);
  else if (s == "burst")
    burst(dir);
  else if (s == "exhaustion")
    exhaustion(dir);
  else if (s == "stop_during_flush")
    stop_during_flush(dir);
  else if (s == "buffers")
    buffers(dir);
  else if (s == "second_start")
    second_start(dir);
  else if (s == "failed_start")
    failed_start(dir);
  else if (s == "pause_resume")
    pause_resume(dir);
  else if (s == "sigterm")
    signal_stop(dir, SIGTERM);
  else if (s == "sigint")
    signal_stop(dir, SIGINT);
  else if (s == "column_blocks")
    column_blocks(dir);
  else {
    std::fprintf(stderr, "tbdtrace_seam_test: unknown scenario %s\n", s.c_str());
    return 2;
  }
  std::printf("%s: %s\n", s.c_str(), g_failures ? "FAILED" : "ok");
  return g_failures ? 1 : 0;
}
