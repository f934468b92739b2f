// Hardware counters, device side: CUPTI's Range Profiling API (cupti_range_profiler.h) on
// one CUDA context, auto range (one range per kernel) with kernel replay (CUPTI replays
// each kernel once per pass, saving and restoring memory; kernels are serialized).
//
// UNVERIFIED: written against the CUDA 13.0 headers and compiled, but never run on a GPU
// (no GPU was available where it was written). `capture --counters flops` says so.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

struct CUpti_RangeProfiler_Object;

namespace tbdtrace {

class ChunkSink;

// One finished range profile: what the spool's counters chunk carries.
struct CounterData {
  std::string chip;
  std::vector<std::string> metrics;
  uint64_t context_id = 0;
  uint64_t dropped_ranges = 0;
  std::vector<uint8_t> image;  // counter data image, ranges in launch order
};

// Writes `data` to `sink` as one counters record (kCountersChunk; layout in spool.h): u32 chip
// length, chip, u32 metric count, per metric u32 length + name, u64 context id, u64 dropped
// ranges, u64 image bytes, the image.
bool write_counters(ChunkSink& sink, const CounterData& data);

// cuptiDeviceGetChipName for a device index, or "" (the error in *err).
std::string device_chip_name(uint32_t device, std::string* err);

class RangeProfiler {
 public:
  // Enables the range profiler on `ctx` and starts collecting; returns an error text or "".
  std::string start(CUcontext ctx, uint64_t context_id, const std::string& chip,
                    const std::vector<std::string>& metrics, size_t max_ranges);
  // Stops, decodes and disables; the result is in *out. Returns an error text or "".
  std::string finish(CounterData* out);
  bool running() const { return obj_ != nullptr; }

 private:
  CUpti_RangeProfiler_Object* obj_ = nullptr;
  CounterData data_;
};

}  // namespace tbdtrace
