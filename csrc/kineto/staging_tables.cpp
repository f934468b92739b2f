#include "kineto/staging_tables.h"

namespace tbdtrace::kineto {

const std::vector<TableDef>& staging_defs() {
#define KT_DEF(lname, uname, cols) {#lname, uname, {cols(TBD_COLUMN_DEF)}},
  static const std::vector<TableDef> defs = {KT_TABLES(KT_DEF)};
#undef KT_DEF
  return defs;
}

}  // namespace tbdtrace::kineto
