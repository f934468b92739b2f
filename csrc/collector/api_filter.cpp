#include "api_filter.h"

namespace tbdtrace {

bool parse_api_set(const std::string& name, ApiSet* out) {
  if (name == "lite") {
    *out = ApiSet::kLite;
    return true;
  }
  if (name == "full") {
    *out = ApiSet::kFull;
    return true;
  }
  return false;
}

const char* api_set_name(ApiSet set) {
  return set == ApiSet::kLite ? "lite" : "full";
}

#define TBD_CBID_VALUE(c) static_cast<uint32_t>(c),

const std::vector<uint32_t>& lite_runtime_cbids() {
  static const std::vector<uint32_t> v = {TBD_LITE_RUNTIME_CBIDS(TBD_CBID_VALUE)};
  return v;
}

const std::vector<uint32_t>& lite_driver_cbids() {
  static const std::vector<uint32_t> v = {TBD_LITE_DRIVER_CBIDS(TBD_CBID_VALUE)};
  return v;
}

#undef TBD_CBID_VALUE

}  // namespace tbdtrace
