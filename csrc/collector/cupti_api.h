// The seam between the collector and CUPTI's activity API: every activity call the collector
// makes goes through one CuptiApi, so tests can drive the real collector
// (csrc/collector/collector.cpp) through a fake that hands out buffers of records built from the
// real CUPTI 13.0 structs (csrc/testing/fake_cupti.h), the way kineto's CuptiActivityApi has a
// mock.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

namespace tbdtrace {

class CuptiApi {
 public:
  virtual ~CuptiApi() = default;
  virtual CUptiResult subscribe(CUpti_SubscriberHandle* sub, CUpti_CallbackFunc cb, void* user,
                                CUpti_SubscriberParams* params) = 0;
  virtual CUptiResult unsubscribe(CUpti_SubscriberHandle sub) = 0;
  virtual CUptiResult enable_callback(uint32_t enable, CUpti_SubscriberHandle sub,
                                      CUpti_CallbackDomain domain, CUpti_CallbackId cbid) = 0;
  virtual CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                         CUpti_BuffersCallbackCompleteFunc completed) = 0;
  virtual CUptiResult set_attribute(CUpti_ActivityAttribute attr, size_t* size, void* value) = 0;
  virtual CUptiResult enable(CUpti_ActivityKind kind) = 0;
  // Per-call switches (cuptiActivityEnableRuntimeApi / cuptiActivityEnableDriverApi); a
  // RUNTIME or DRIVER kind enabled after them overrides them.
  virtual CUptiResult enable_runtime_api(uint32_t cbid, uint8_t on) = 0;
  virtual CUptiResult enable_driver_api(uint32_t cbid, uint8_t on) = 0;
  virtual CUptiResult disable(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult flush_all(uint32_t flag) = 0;
  virtual CUptiResult get_next_record(uint8_t* buffer, size_t valid, CUpti_Activity** rec) = 0;
  virtual CUptiResult get_num_dropped_records(CUcontext ctx, uint32_t stream, size_t* dropped) = 0;
  virtual CUptiResult get_context_id(CUcontext ctx, uint32_t* id) = 0;
  virtual CUptiResult get_timestamp(uint64_t* ts) = 0;
};

// The process's libcupti (a stateless forwarder; lives for the whole process).
CuptiApi& real_cupti();

}  // namespace tbdtrace
