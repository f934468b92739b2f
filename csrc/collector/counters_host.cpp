#include "counters_host.h"

#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>

#include <stdexcept>

#include "collector.h"

namespace tbdtrace {

namespace {

void check(CUptiResult r, const std::string& what) {
  if (r != CUPTI_SUCCESS) throw std::runtime_error(what + ": " + cupti_result_name(r));
}

// A profiler host object for one chip, deinitialized on every path.
class HostObject {
 public:
  explicit HostObject(const std::string& chip) {
    auto p = PARAMS(CUpti_Profiler_Host_Initialize_Params);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip.c_str();
    CUptiResult r = cuptiProfilerHostInitialize(&p);
    if (r != CUPTI_SUCCESS)
      throw std::runtime_error("chip '" + chip + "' is not known to this CUPTI (" +
                               cupti_result_name(r) + "); known chips: " + chip_list());
    obj_ = p.pHostObject;
  }
  ~HostObject() {
    auto p = PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
    p.pHostObject = obj_;
    cuptiProfilerHostDeinitialize(&p);
  }
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;
  CUpti_Profiler_Host_Object* get() const { return obj_; }

  static std::string chip_list() {
    std::string s;
    for (const auto& c : profiler_chips()) s += (s.empty() ? "" : " ") + c;
    return s;
  }

 private:
  CUpti_Profiler_Host_Object* obj_ = nullptr;
};

std::vector<const char*> c_names(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  for (const auto& s : v) out.push_back(s.c_str());
  return out;
}

std::string str(const char* s) {
  return s ? s : "";
}

}  // namespace

std::vector<std::string> profiler_chips() {
  auto p = PARAMS(CUpti_Profiler_Host_GetSupportedChips_Params);
  check(cuptiProfilerHostGetSupportedChips(&p), "cuptiProfilerHostGetSupportedChips");
  std::vector<std::string> out;
  for (size_t i = 0; i < p.numChips; ++i) out.push_back(p.ppChipNames[i]);
  return out;
}

std::vector<MetricProperties> metric_properties(const std::string& chip,
                                                const std::vector<std::string>& metrics) {
  HostObject host(chip);
  std::vector<MetricProperties> out;
  for (const auto& m : metrics) {
    auto p = PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
    p.pHostObject = host.get();
    p.pMetricName = m.c_str();
    check(cuptiProfilerHostGetMetricProperties(&p), "metric '" + m + "' on " + chip);
    out.push_back(
        {m, str(p.pDescription), str(p.pHwUnit), str(p.pDimUnit), static_cast<int>(p.metricType)});
  }
  return out;
}

CounterConfig counter_config(const std::string& chip, const std::vector<std::string>& metrics) {
  HostObject host(chip);
  auto names = c_names(metrics);
  auto add = PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
  add.pHostObject = host.get();
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  check(cuptiProfilerHostConfigAddMetrics(&add), "cannot configure the metrics on " + chip);
  auto size = PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
  size.pHostObject = host.get();
  check(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
  CounterConfig cfg;
  cfg.image.resize(size.configImageSize);
  auto img = PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
  img.pHostObject = host.get();
  img.configImageSize = cfg.image.size();
  img.pConfigImage = cfg.image.data();
  check(cuptiProfilerHostGetConfigImage(&img), "cuptiProfilerHostGetConfigImage");
  auto passes = PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
  passes.configImageSize = cfg.image.size();
  passes.pConfigImage = cfg.image.data();
  check(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses");
  cfg.passes = passes.numOfPasses;
  return cfg;
}

std::vector<CounterRange> evaluate_counter_data(const std::string& chip,
                                                const std::vector<uint8_t>& counter_data,
                                                const std::vector<std::string>& metrics) {
  if (counter_data.empty()) throw std::runtime_error("the counter data image is empty");
  auto info = PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  check(cuptiRangeProfilerGetCounterDataInfo(&info), "not a counter data image");
  HostObject host(chip);
  auto names = c_names(metrics);
  std::vector<CounterRange> out(info.numTotalRanges);
  for (size_t i = 0; i < info.numTotalRanges; ++i) {
    auto rn = PARAMS(CUpti_Profiler_Host_GetRangeName_Params);
    rn.pCounterDataImage = counter_data.data();
    rn.counterDataImageSize = counter_data.size();
    rn.rangeIndex = i;
    rn.delimiter = "/";
    check(cuptiProfilerHostGetRangeName(&rn), "range " + std::to_string(i) + " name");
    out[i].name = str(rn.pRangeName);
    out[i].values.assign(metrics.size(), 0.0);
    auto ev = PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    ev.pHostObject = host.get();
    ev.pCounterDataImage = counter_data.data();
    ev.counterDataImageSize = counter_data.size();
    ev.rangeIndex = i;
    ev.ppMetricNames = names.data();
    ev.numMetrics = names.size();
    ev.pMetricValues = out[i].values.data();
    check(cuptiProfilerHostEvaluateToGpuValues(&ev), "range " + std::to_string(i) + " values");
  }
  return out;
}

}  // namespace tbdtrace
