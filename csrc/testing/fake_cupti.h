// A fake of CUPTI's activity API (csrc/collector/cupti_api.h) for driving the real collector
// without a GPU: producer threads write CUpti_ActivityKernel10 records (the real CUDA 13.0 struct)
// into buffers obtained through the collector's bufferRequested callback, complete full
// buffers through bufferCompleted, and flush partial ones when the collector flushes, as
// CUPTI does with per-thread buffers. Refused requests drop the record and count it
// (cuptiActivityGetNumDroppedRecords semantics: read and reset). Test-only: built into
// tbdtrace._native_testing and the sanitizer driver, never into tbdtrace._native.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collector/cupti_api.h"

namespace tbdtrace::testing {

struct FakeConfig {
  uint32_t threads = 4;                 // producer threads
  uint64_t records_per_thread = 1000;   // kernel records each produces
  double rate_per_s = 0;                // per thread; 0 = as fast as possible
  uint32_t flush_delay_us = 0;          // time each flush_all takes before it completes buffers
  int subscribe_result = 0;             // CUptiResult cuptiSubscribe returns (39: other tool)
  std::string old_subscriber;           // name reported with result 39
  int enable_result = 0;                // CUptiResult for enable once enable_ok_count are used
  uint32_t enable_ok_count = 1u << 30;  // enables that succeed before enable_result is returned
  // At the first successful enable, take one buffer and never give it back (a buffer CUPTI
  // still holds when the collector gives up), then write into it when destroyed: a pool
  // freed under CUPTI shows up as a use after free under AddressSanitizer.
  bool hold_buffer = false;
};

struct FakeStats {
  uint64_t produced = 0;        // records the producers tried to write while kernels were on
  uint64_t written = 0;         // records written into a buffer
  uint64_t dropped = 0;         // records refused for want of a buffer
  uint64_t denied = 0;          // bufferRequested calls that returned no buffer
  uint64_t completed = 0;       // bufferCompleted calls
  uint64_t flushes = 0;         // flush_all calls (all flags)
  uint64_t forced_flushes = 0;  // flush_all(FORCED) calls
  uint64_t enables = 0, disables = 0, subscribes = 0, unsubscribes = 0;
  // Buffers handed out by bufferRequested that were not all zero, or had a page not yet
  // faulted in (mincore): with ZEROED_OUT set, both must stay 0.
  uint64_t dirty_buffers = 0, cold_buffers = 0;
};

// One call of the activity API's configuration functions, in call order.
struct FakeCall {
  std::string what;    // "attr", "register", "enable", "disable", "runtime_api", "driver_api"
  uint32_t id = 0;     // attribute, kind or callback id
  uint64_t value = 0;  // attribute value or on/off
};

class FakeCupti final : public CuptiApi {
 public:
  explicit FakeCupti(FakeConfig cfg);
  ~FakeCupti() override;
  FakeCupti(const FakeCupti&) = delete;
  FakeCupti& operator=(const FakeCupti&) = delete;

  CUptiResult subscribe(CUpti_SubscriberHandle* sub, CUpti_CallbackFunc cb, void* user,
                        CUpti_SubscriberParams* params) override;
  CUptiResult unsubscribe(CUpti_SubscriberHandle sub) override;
  CUptiResult enable_callback(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                              CUpti_CallbackId) override {
    return CUPTI_SUCCESS;  // the fake creates no contexts: nothing to call back for
  }
  CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                 CUpti_BuffersCallbackCompleteFunc completed) override;
  CUptiResult set_attribute(CUpti_ActivityAttribute attr, size_t* size, void* value) override;
  CUptiResult enable(CUpti_ActivityKind kind) override;
  CUptiResult enable_runtime_api(uint32_t cbid, uint8_t on) override;
  CUptiResult enable_driver_api(uint32_t cbid, uint8_t on) override;
  CUptiResult disable(CUpti_ActivityKind kind) override;
  CUptiResult flush_all(uint32_t flag) override;
  CUptiResult get_next_record(uint8_t* buffer, size_t valid, CUpti_Activity** rec) override;
  CUptiResult get_num_dropped_records(CUcontext ctx, uint32_t stream, size_t* dropped) override;
  CUptiResult get_context_id(CUcontext ctx, uint32_t* id) override;
  CUptiResult get_timestamp(uint64_t* ts) override;

  void start_producers();
  void join_producers();
  // Waits until a flush_all is in progress (flush_delay_us > 0 makes that window wide).
  bool wait_in_flush(uint32_t timeout_ms);
  FakeStats stats() const;
  std::vector<FakeCall> calls() const;
  // Correlation ids written into buffers / dropped, in no particular order.
  std::vector<uint32_t> written_ids() const;
  std::vector<uint32_t> dropped_ids() const;

 private:
  struct Producer {
    std::mutex mu;
    uint8_t* buf = nullptr;
    size_t size = 0, used = 0;
    std::vector<uint32_t> written, dropped;
  };
  void produce(uint32_t index);
  void write_record(Producer& p, uint32_t index, uint32_t id);
  void complete(uint8_t* buf, size_t used);
  void log(const char* what, uint32_t id, uint64_t value);
  void check_handed_out(const uint8_t* buf, size_t size);

  FakeConfig cfg_;
  std::atomic<CUpti_BuffersCallbackRequestFunc> requested_{nullptr};
  std::atomic<CUpti_BuffersCallbackCompleteFunc> completed_{nullptr};
  std::atomic<bool> kernels_on_{false};
  std::atomic<bool> subscribed_{false};
  std::atomic<uint32_t> enables_ok_{0};
  std::atomic<uint64_t> dropped_unread_{0};
  std::atomic<int> in_flush_{0};
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  std::vector<std::unique_ptr<Producer>> producers_;
  std::vector<std::thread> threads_;
  uint8_t* held_ = nullptr;
  size_t held_size_ = 0;
  bool use_libcupti_walker_ = false;
  mutable std::mutex stats_mu_;
  FakeStats stats_;
  std::vector<FakeCall> calls_;          // under stats_mu_
  std::atomic<bool> zeroed_out_{false};  // CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER set
};

}  // namespace tbdtrace::testing
