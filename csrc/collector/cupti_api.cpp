#include "cupti_api.h"

namespace tbdtrace {

namespace {

class RealCupti final : public CuptiApi {
 public:
  CUptiResult subscribe(CUpti_SubscriberHandle* sub, CUpti_CallbackFunc cb, void* user,
                        CUpti_SubscriberParams* params) override {
    return cuptiSubscribe_v2(sub, cb, user, params);
  }
  CUptiResult unsubscribe(CUpti_SubscriberHandle sub) override { return cuptiUnsubscribe(sub); }
  CUptiResult enable_callback(uint32_t enable, CUpti_SubscriberHandle sub,
                              CUpti_CallbackDomain domain, CUpti_CallbackId cbid) override {
    return cuptiEnableCallback(enable, sub, domain, cbid);
  }
  CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                 CUpti_BuffersCallbackCompleteFunc completed) override {
    return cuptiActivityRegisterCallbacks(requested, completed);
  }
  CUptiResult set_attribute(CUpti_ActivityAttribute attr, size_t* size, void* value) override {
    return cuptiActivitySetAttribute(attr, size, value);
  }
  CUptiResult enable(CUpti_ActivityKind kind) override { return cuptiActivityEnable(kind); }
  CUptiResult enable_runtime_api(uint32_t cbid, uint8_t on) override {
    return cuptiActivityEnableRuntimeApi(cbid, on);
  }
  CUptiResult enable_driver_api(uint32_t cbid, uint8_t on) override {
    return cuptiActivityEnableDriverApi(cbid, on);
  }
  CUptiResult disable(CUpti_ActivityKind kind) override { return cuptiActivityDisable(kind); }
  CUptiResult flush_all(uint32_t flag) override { return cuptiActivityFlushAll(flag); }
  CUptiResult get_next_record(uint8_t* buffer, size_t valid, CUpti_Activity** rec) override {
    return cuptiActivityGetNextRecord(buffer, valid, rec);
  }
  CUptiResult get_num_dropped_records(CUcontext ctx, uint32_t stream, size_t* dropped) override {
    return cuptiActivityGetNumDroppedRecords(ctx, stream, dropped);
  }
  CUptiResult get_context_id(CUcontext ctx, uint32_t* id) override {
    return cuptiGetContextId(ctx, id);
  }
  CUptiResult get_timestamp(uint64_t* ts) override { return cuptiGetTimestamp(ts); }
};

}  // namespace

CuptiApi& real_cupti() {
  // Never destroyed: CUPTI may call back into the collector during process exit.
  static RealCupti* api = new RealCupti();
  return *api;
}

}  // namespace tbdtrace
