// Hardware counters, host side (CUPTI Profiler Host API, cupti_profiler_host.h): metric
// properties, config images and pass counts for a chip name, and evaluation of a counter
// data image recorded by the Range Profiling API. Needs no GPU and no driver (libcupti
// 13.0); the device side that records counter data is separate (it needs a GPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tbdtrace {

// A CUPTI params struct zeroed, with its structSize set (every profiler call needs it).
template <class T>
T make_params(size_t size) {
  T p{};
  p.structSize = size;
  return p;
}
#define PARAMS(T) make_params<T>(T##_STRUCT_SIZE)

struct MetricProperties {
  std::string name, description, hw_unit, dim_unit;
  int type = 0;  // CUpti_MetricType: 0 counter, 1 ratio, 2 throughput
};

struct CounterConfig {
  std::vector<uint8_t> image;  // config image for cuptiRangeProfilerSetConfig
  size_t passes = 0;           // replay passes the metrics need on this chip
};

struct CounterRange {
  std::string name;            // range name (auto range: the kernel's name)
  std::vector<double> values;  // one per metric, in the order asked
};

// Every call throws std::runtime_error with one line (the chip, the metric, CUPTI's error).
std::vector<std::string> profiler_chips();
std::vector<MetricProperties> metric_properties(const std::string& chip,
                                                const std::vector<std::string>& metrics);
CounterConfig counter_config(const std::string& chip, const std::vector<std::string>& metrics);
std::vector<CounterRange> evaluate_counter_data(const std::string& chip,
                                                const std::vector<uint8_t>& counter_data,
                                                const std::vector<std::string>& metrics);

}  // namespace tbdtrace
