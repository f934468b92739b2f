#include "testing/fake_cupti.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace tbdtrace::testing {

namespace {

// Kernel names live for the whole process, as CUPTI's do (the decoder caches by pointer).
const char* const kNames[] = {
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_T1_",
    "_Z10sgemm_128x64PfS_S_iii",
    "ampere_sgemm_64x32_sliced1x4_tn",
    "_ZN2at6native13reduce_kernelILi512ELi1EEEvT1_",
};
constexpr size_t kStride = sizeof(CUpti_ActivityKernel10);
constexpr uint64_t kBaseNs = 1700000000000000000ull;

}  // namespace

FakeCupti::FakeCupti(FakeConfig cfg) : cfg_(std::move(cfg)) {
  // The real walker when this libcupti walks hand-built buffers without a driver (13.0.x);
  // else a walker with the 13.0 stride of the one kind the fake writes.
  uint32_t v = 0;
  use_libcupti_walker_ = cuptiGetVersion(&v) == CUPTI_SUCCESS && v / 100 == 1300;
  for (uint32_t i = 0; i < cfg_.threads; ++i) producers_.emplace_back(new Producer());
}

FakeCupti::~FakeCupti() {
  join_producers();
  if (held_ != nullptr) {
    // The collector must not have freed this (see FakeConfig::hold_buffer).
    std::memset(held_, 0xAB, held_size_);
    complete(held_, 0);
  }
}

CUptiResult FakeCupti::subscribe(CUpti_SubscriberHandle* sub, CUpti_CallbackFunc, void*,
                                 CUpti_SubscriberParams* params) {
  if (cfg_.subscribe_result != CUPTI_SUCCESS) {
    if (params && params->oldSubscriberName && params->oldSubscriberSize > 0)
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s",
                    cfg_.old_subscriber.c_str());
    return static_cast<CUptiResult>(cfg_.subscribe_result);
  }
  if (subscribed_.exchange(true)) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *sub = reinterpret_cast<CUpti_SubscriberHandle>(this);
  std::lock_guard<std::mutex> lk(stats_mu_);
  ++stats_.subscribes;
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::unsubscribe(CUpti_SubscriberHandle sub) {
  if (sub != reinterpret_cast<CUpti_SubscriberHandle>(this) || !subscribed_.exchange(false))
    return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lk(stats_mu_);
  ++stats_.unsubscribes;
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                          CUpti_BuffersCallbackCompleteFunc completed) {
  requested_.store(requested);
  completed_.store(completed);
  log("register", 0, 0);
  return CUPTI_SUCCESS;
}

void FakeCupti::log(const char* what, uint32_t id, uint64_t value) {
  std::lock_guard<std::mutex> lk(stats_mu_);
  calls_.push_back({what, id, value});
}

std::vector<FakeCall> FakeCupti::calls() const {
  std::lock_guard<std::mutex> lk(stats_mu_);
  return calls_;
}

CUptiResult FakeCupti::set_attribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  if (size == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  uint64_t v = 0;
  std::memcpy(&v, value, std::min(*size, sizeof(v)));
  if (attr == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) zeroed_out_ = v != 0;
  log("attr", static_cast<uint32_t>(attr), v);
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::enable_runtime_api(uint32_t cbid, uint8_t on) {
  log("runtime_api", cbid, on);
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::enable_driver_api(uint32_t cbid, uint8_t on) {
  log("driver_api", cbid, on);
  return CUPTI_SUCCESS;
}

// What CUPTI would rely on when told buffers come zeroed: every byte zero, and (our goal,
// not CUPTI's) every page already faulted in, so the requesting thread pays no first touch.
void FakeCupti::check_handed_out(const uint8_t* buf, size_t size) {
  if (buf == nullptr || !zeroed_out_) return;
  bool dirty = false;
  for (size_t i = 0; i < size && !dirty; i += 64)
    for (size_t j = i; j < std::min(size, i + 64); ++j) dirty |= buf[j] != 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto start = reinterpret_cast<uintptr_t>(buf) & ~(page - 1);
  size_t len = reinterpret_cast<uintptr_t>(buf) + size - start;
  std::vector<unsigned char> vec((len + page - 1) / page);
  bool cold = false;
  if (mincore(reinterpret_cast<void*>(start), len, vec.data()) == 0)
    for (unsigned char v : vec) cold |= (v & 1) == 0;
  std::lock_guard<std::mutex> lk(stats_mu_);
  if (dirty) ++stats_.dirty_buffers;
  if (cold) ++stats_.cold_buffers;
}

CUptiResult FakeCupti::enable(CUpti_ActivityKind kind) {
  if (enables_ok_.fetch_add(1) >= cfg_.enable_ok_count && cfg_.enable_result != CUPTI_SUCCESS)
    return static_cast<CUptiResult>(cfg_.enable_result);
  if (cfg_.hold_buffer && held_ == nullptr) {
    size_t max_records = 0;
    auto req = requested_.load();
    if (req) req(&held_, &held_size_, &max_records);
  }
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernels_on_.store(true);
  log("enable", static_cast<uint32_t>(kind), 1);
  std::lock_guard<std::mutex> lk(stats_mu_);
  ++stats_.enables;
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::disable(CUpti_ActivityKind kind) {
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernels_on_.store(false);
  log("disable", static_cast<uint32_t>(kind), 0);
  std::lock_guard<std::mutex> lk(stats_mu_);
  ++stats_.disables;
  return CUPTI_SUCCESS;
}

void FakeCupti::complete(uint8_t* buf, size_t used) {
  auto done = completed_.load();
  if (done) done(nullptr, 0, buf, 0, used);  // CUDA 12+: global buffers, no context
  std::lock_guard<std::mutex> lk(stats_mu_);
  ++stats_.completed;
}

CUptiResult FakeCupti::flush_all(uint32_t flag) {
  bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
  {
    std::lock_guard<std::mutex> lk(flush_mu_);
    in_flush_.fetch_add(1);
  }
  flush_cv_.notify_all();
  if (cfg_.flush_delay_us)
    std::this_thread::sleep_for(std::chrono::microseconds(cfg_.flush_delay_us));
  // Like CUPTI, bufferCompleted runs synchronously on the flushing thread.
  for (auto& p : producers_) {
    std::lock_guard<std::mutex> lk(p->mu);
    if (p->buf == nullptr || (p->used == 0 && !forced)) continue;
    complete(p->buf, p->used);
    p->buf = nullptr;
    p->used = 0;
  }
  in_flush_.fetch_sub(1);
  std::lock_guard<std::mutex> lk(stats_mu_);
  ++stats_.flushes;
  if (forced) ++stats_.forced_flushes;
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::get_next_record(uint8_t* buffer, size_t valid, CUpti_Activity** rec) {
  if (use_libcupti_walker_) return cuptiActivityGetNextRecord(buffer, valid, rec);
  size_t off = *rec == nullptr ? 0 : reinterpret_cast<uint8_t*>(*rec) - buffer + kStride;
  if (off + kStride > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + off);
  if (next->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) return CUPTI_ERROR_INVALID_KIND;
  *rec = next;
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::get_num_dropped_records(CUcontext, uint32_t, size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *dropped = dropped_unread_.exchange(0);  // read and reset, as CUPTI does
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::get_context_id(CUcontext, uint32_t* id) {
  *id = 1;
  return CUPTI_SUCCESS;
}

CUptiResult FakeCupti::get_timestamp(uint64_t* ts) {
  *ts = kBaseNs;
  return CUPTI_SUCCESS;
}

void FakeCupti::write_record(Producer& p, uint32_t index, uint32_t id) {
  CUpti_ActivityKernel10 r{};
  r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  r.start = kBaseNs + uint64_t{id} * 1000;
  r.end = r.start + 500;
  r.correlationId = id;
  r.deviceId = index % 2;
  r.contextId = 1;
  r.streamId = 7 + index;
  r.gridX = 128, r.gridY = 1, r.gridZ = 1;
  r.blockX = 256, r.blockY = 1, r.blockZ = 1;
  r.registersPerThread = 32;
  r.name = kNames[id % (sizeof(kNames) / sizeof(kNames[0]))];
  std::lock_guard<std::mutex> lk(p.mu);
  if (p.buf != nullptr && p.used + kStride > p.size) {
    complete(p.buf, p.used);  // a full buffer goes back, as CUPTI does
    p.buf = nullptr;
    p.used = 0;
  }
  if (p.buf == nullptr) {
    size_t max_records = 0;
    auto req = requested_.load();
    if (req) req(&p.buf, &p.size, &max_records);
    check_handed_out(p.buf, p.size);
    if (p.buf == nullptr || p.size < kStride) {
      p.buf = nullptr;
      p.dropped.push_back(id);
      dropped_unread_.fetch_add(1);
      std::lock_guard<std::mutex> s(stats_mu_);
      ++stats_.denied;
      ++stats_.dropped;
      return;
    }
  }
  std::memcpy(p.buf + p.used, &r, kStride);
  p.used += kStride;
  p.written.push_back(id);
}

void FakeCupti::produce(uint32_t index) {
  Producer& p = *producers_[index];
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t j = 0; j < cfg_.records_per_thread; ++j) {
    if (cfg_.rate_per_s > 0)
      std::this_thread::sleep_until(t0 + std::chrono::duration<double>(j / cfg_.rate_per_s));
    if (!kernels_on_.load()) continue;
    {
      std::lock_guard<std::mutex> s(stats_mu_);
      ++stats_.produced;
    }
    write_record(p, index, static_cast<uint32_t>(index * cfg_.records_per_thread + j + 1));
  }
}

void FakeCupti::start_producers() {
  for (uint32_t i = 0; i < cfg_.threads; ++i) threads_.emplace_back(&FakeCupti::produce, this, i);
}

void FakeCupti::join_producers() {
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

bool FakeCupti::wait_in_flush(uint32_t timeout_ms) {
  std::unique_lock<std::mutex> lk(flush_mu_);
  return flush_cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
                            [this] { return in_flush_.load() > 0; });
}

FakeStats FakeCupti::stats() const {
  FakeStats s;
  {
    // Never with a producer's lock: producers take stats_mu_ while holding theirs.
    std::lock_guard<std::mutex> lk(stats_mu_);
    s = stats_;
  }
  uint64_t w = 0;
  for (auto& p : producers_) {
    std::lock_guard<std::mutex> l(p->mu);
    w += p->written.size();
  }
  s.written = w;
  return s;
}

std::vector<uint32_t> FakeCupti::written_ids() const {
  std::vector<uint32_t> out;
  for (auto& p : producers_) {
    std::lock_guard<std::mutex> l(p->mu);
    out.insert(out.end(), p->written.begin(), p->written.end());
  }
  return out;
}

std::vector<uint32_t> FakeCupti::dropped_ids() const {
  std::vector<uint32_t> out;
  for (auto& p : producers_) {
    std::lock_guard<std::mutex> l(p->mu);
    out.insert(out.end(), p->dropped.begin(), p->dropped.end());
  }
  return out;
}

}  // namespace tbdtrace::testing
