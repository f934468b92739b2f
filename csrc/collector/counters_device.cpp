// UNVERIFIED on a GPU: see counters_device.h.
#include "counters_device.h"

#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <mutex>

#include "chunk_sink.h"
#include "collector.h"
#include "counters_host.h"

namespace tbdtrace {

namespace {

std::string err(const char* what, CUptiResult r) {
  return std::string(what) + ": " + cupti_result_name(r);
}

// cuptiProfilerInitialize once per process, before the first range profiler.
CUptiResult profiler_initialize() {
  static std::once_flag once;
  static CUptiResult result = CUPTI_SUCCESS;
  std::call_once(once, [] {
    auto p = PARAMS(CUpti_Profiler_Initialize_Params);
    result = cuptiProfilerInitialize(&p);
  });
  return result;
}

}  // namespace

std::string device_chip_name(uint32_t device, std::string* error) {
  auto p = PARAMS(CUpti_Device_GetChipName_Params);
  p.deviceIndex = device;
  CUptiResult r = cuptiDeviceGetChipName(&p);
  if (r != CUPTI_SUCCESS || p.pChipName == nullptr) {
    *error = err("cuptiDeviceGetChipName", r);
    return "";
  }
  return p.pChipName;
}

std::string RangeProfiler::start(CUcontext ctx, uint64_t context_id, const std::string& chip,
                                 const std::vector<std::string>& metrics, size_t max_ranges) {
  CUptiResult r = profiler_initialize();
  if (r != CUPTI_SUCCESS) return err("cuptiProfilerInitialize", r);
  CounterConfig cfg;
  try {
    cfg = counter_config(chip, metrics);
  } catch (const std::exception& e) {
    return e.what();
  }
  auto en = PARAMS(CUpti_RangeProfiler_Enable_Params);
  en.ctx = ctx;
  r = cuptiRangeProfilerEnable(&en);
  if (r != CUPTI_SUCCESS) return err("cuptiRangeProfilerEnable", r);
  obj_ = en.pRangeProfilerObject;
  data_ = CounterData{chip, metrics, context_id, 0, {}};

  std::vector<const char*> names;
  for (const auto& m : metrics) names.push_back(m.c_str());
  auto size = PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
  size.pRangeProfilerObject = obj_;
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxNumOfRanges = max_ranges;
  size.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges);
  r = cuptiRangeProfilerGetCounterDataSize(&size);
  if (r != CUPTI_SUCCESS) return err("cuptiRangeProfilerGetCounterDataSize", r);
  data_.image.assign(size.counterDataSize, 0);
  auto init = PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
  init.pRangeProfilerObject = obj_;
  init.counterDataSize = data_.image.size();
  init.pCounterData = data_.image.data();
  r = cuptiRangeProfilerCounterDataImageInitialize(&init);
  if (r != CUPTI_SUCCESS) return err("cuptiRangeProfilerCounterDataImageInitialize", r);

  // Auto range: one range per kernel. Kernel replay: all passes inside each launch, so the
  // program runs once; it serializes kernels (the perturbation the CLI warns about).
  auto set = PARAMS(CUpti_RangeProfiler_SetConfig_Params);
  set.pRangeProfilerObject = obj_;
  set.configSize = cfg.image.size();
  set.pConfig = cfg.image.data();
  set.counterDataImageSize = data_.image.size();
  set.pCounterDataImage = data_.image.data();
  set.range = CUPTI_AutoRange;
  set.replayMode = CUPTI_KernelReplay;
  set.maxRangesPerPass = max_ranges;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  r = cuptiRangeProfilerSetConfig(&set);
  if (r != CUPTI_SUCCESS) return err("cuptiRangeProfilerSetConfig", r);
  auto st = PARAMS(CUpti_RangeProfiler_Start_Params);
  st.pRangeProfilerObject = obj_;
  r = cuptiRangeProfilerStart(&st);
  if (r != CUPTI_SUCCESS) return err("cuptiRangeProfilerStart", r);
  return "";
}

std::string RangeProfiler::finish(CounterData* out) {
  if (obj_ == nullptr) return "range profiler not running";
  std::string error;
  auto stop = PARAMS(CUpti_RangeProfiler_Stop_Params);
  stop.pRangeProfilerObject = obj_;
  CUptiResult r = cuptiRangeProfilerStop(&stop);
  if (r != CUPTI_SUCCESS) error = err("cuptiRangeProfilerStop", r);
  auto dec = PARAMS(CUpti_RangeProfiler_DecodeData_Params);
  dec.pRangeProfilerObject = obj_;
  r = cuptiRangeProfilerDecodeData(&dec);
  if (r != CUPTI_SUCCESS && error.empty()) error = err("cuptiRangeProfilerDecodeData", r);
  data_.dropped_ranges = dec.numOfRangeDropped;
  auto dis = PARAMS(CUpti_RangeProfiler_Disable_Params);
  dis.pRangeProfilerObject = obj_;
  cuptiRangeProfilerDisable(&dis);
  obj_ = nullptr;
  *out = std::move(data_);
  data_ = CounterData{};
  return error;
}

namespace {
template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
}  // namespace

bool write_counters(ChunkSink& sink, const CounterData& d) {
  std::string p;
  put(p, static_cast<uint32_t>(d.chip.size()));
  p += d.chip;
  put(p, static_cast<uint32_t>(d.metrics.size()));
  for (const auto& m : d.metrics) {
    put(p, static_cast<uint32_t>(m.size()));
    p += m;
  }
  put(p, d.context_id);
  put(p, d.dropped_ranges);
  put(p, static_cast<uint64_t>(d.image.size()));
  ChunkSink::Part parts[2] = {{p.data(), p.size()}, {d.image.data(), d.image.size()}};
  return sink.write_record(kCountersChunk, parts, 2);
}

}  // namespace tbdtrace
