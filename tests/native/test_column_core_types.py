"""The column core's typed setters (csrc/common/column_core.h): a store of the wrong type, or an
implicitly narrowed value, does not compile; the right one does."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "csrc"
CXX = shutil.which("c++") or shutil.which("g++")

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on PATH")

PRELUDE = """
#include "common/column_core.h"
// clang-format off
#define T_COLS(X) X(start_ns, I64) X(device_id, I32) X(name, STR) X(address, U64)
// clang-format on
namespace t { TBD_COLUMN_HANDLES(T_COLS) }
void f(tbdtrace::ColumnTable& tab, size_t row, long long big, unsigned u) {
  (void)big; (void)u;
"""


def compiles(body: str, tmp_path: Path) -> tuple[bool, str]:
    src = tmp_path / "snippet.cpp"
    src.write_text(PRELUDE + body + "\n}\n")
    assert CXX is not None
    r = subprocess.run(
        [CXX, "-std=c++17", "-fsyntax-only", f"-I{CSRC}", str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return r.returncode == 0, r.stderr


def test_stores_of_the_columns_own_types_compile(tmp_path: Path) -> None:
    ok, err = compiles(
        """
  tab.set(t::start_ns, row, int64_t{1});
  tab.set(t::device_id, row, int32_t{2});
  tab.set(t::name, row, int32_t{3});
  tab.set(t::address, row, uint64_t{4});
  tab.set_null(t::device_id, row);
  tab.set_i32(t::device_id, row, int64_t{5}, true);
  tab.set_str(t::name, row, 0, false);
""",
        tmp_path,
    )
    assert ok, err


BAD_STORES = [
    "tab.set(t::device_id, row, int64_t{1});",  # int64 into an int32 column
    "tab.set(t::start_ns, row, u);",  # unsigned 32-bit: not the column's type
    "tab.set(t::address, row, int64_t{1});",  # signed into the uint64 column
    "tab.set_i64(t::device_id, row, 1, true);",  # int64 setter on an int32 column
    "tab.set_str(t::start_ns, row, 0, true);",  # string code into an int64 column
]


def test_each_store_of_another_type_is_a_compile_error(tmp_path: Path) -> None:
    # One compile for all: the compiler reports each bad line (and only those).
    ok, err = compiles("\n".join(BAD_STORES), tmp_path)
    first = PRELUDE.count("\n") + 1  # line number of the first store in snippet.cpp
    lines = {int(m) for m in re.findall(r"snippet\.cpp:(\d+):\d+: error", err) if int(m) >= first}
    assert not ok and lines == set(range(first, first + len(BAD_STORES))), err
