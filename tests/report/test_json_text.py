"""The JSON every document writes is ``json.dumps(value, indent=2)`` plus a newline, byte
for byte, whatever the value: through the extension's encoder where it is built, through
the Python fast path (the report's lists of rows encoded by json's C encoder) where it is
not, and through ``json.dumps`` itself for a value either declines."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest

from tbdtrace.report import emit
from tbdtrace.report.emit import json_text

CASES: list[Any] = [
    {},
    [],
    [{}],
    [{"a": 1}, {}],
    # strings holding what the fast path looks for: newlines, braces, separators, NUL
    [
        {
            "a": "x},\n  {y",
            "b": None,
            "c": True,
            "d": 1.5,
            "e": float("nan"),
            "f": -0.0,
            "g": 10**30,
            "h": '\u00e9\x00\n\t"',
            "i": float("-inf"),
        }
    ]
    * 3,
    {"x": [{"a": [1]}], "y": [{"a": 1}], 1: 2, "z": {"q": [{"k": "v"}], "e": []}},
    ["\x000", [{"a": 1}]],  # a string like the placeholder of a list of rows
    {"\x000": [{"a": 1}]},
    [[{"a": 1}, {"b": "c"}]],
    ({"a": 1},),
    [{"a": 1, 2: 3}],  # a key json converts
    {"rows": [{"a": 1, "b": {"nested": [1, 2]}}, {"a": 2}], "n": 2},
    # every escape json writes: the short ones, control characters, DEL, non-ASCII in and
    # above the BMP (a surrogate pair), a lone surrogate, backslash and quote, in keys too
    {"k\u00e9\n": '\b\f\r\t\x01\x1f\x7f\u0100\uffff\U0001f600\ud800\\"/~ '},
    # integers at and past 64 bits, floats json writes by repr, and the non-finite ones
    [2**63 - 1, -(2**63), 2**63, -(2**64) - 1, 10**40, 0, -1],
    [1e16, 1e-5, 1e-4, 0.1, 1.0, -0.0, 123456789.123, 5e-324, 1.7976931348623157e308],
    [float("inf"), float("nan"), True, False, None, "", ()],
    "a lone string",
    12,
    None,
    {"a": {"b": {"c": {"d": [[[]], [{}], [1, [2, [3]]]]}}}},
]


def _native() -> Any:
    native = emit._native_json()
    if native is None:
        pytest.skip("tbdtrace._native is not built (make native)")
    return native


@pytest.mark.parametrize("value", CASES)
def test_json_text_is_json_dumps_indented(value: Any) -> None:
    assert json_text(value) == json.dumps(value, indent=2) + "\n"


@pytest.mark.parametrize("value", CASES)
def test_the_python_path_is_json_dumps_indented(value: Any) -> None:
    """The path of a build without the extension, on its own."""
    assert emit._indented(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize("value", CASES)
def test_the_extension_writes_json_dumps_indented(value: Any) -> None:
    native = _native()
    expected = json.dumps(value, indent=2)
    got = native(value)
    if got is None:  # declined: only for a value with a key json converts
        assert any(type(k) is not str for k in _keys(value))
    else:
        assert got == expected


def _keys(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value, *(k for v in value.values() for k in _keys(v))]
    if isinstance(value, list | tuple):
        return [k for v in value for k in _keys(v)]
    return []


class _Str(str):
    pass


class _Int(int):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1: 2},
        [_Str("x")],
        {"a": _Int(3)},
        [np.int64(3)],
        OrderedDict(a=1),
        [1, object()],
    ],
    ids=["int-key", "str-subclass", "int-subclass", "numpy-scalar", "dict-subclass", "object"],
)
def test_the_extension_declines_other_types(value: Any) -> None:
    """A subclass, a numpy scalar or a non-str key is json's to encode (or refuse)."""
    assert _native()(value) is None


def test_a_cycle_and_deep_nesting_are_declined_and_json_decides() -> None:
    native = _native()
    cycle: list[Any] = []
    cycle.append(cycle)
    assert native(cycle) is None  # ends at the depth limit, not in a crash
    deep: list[Any] = []
    cur = deep
    for _ in range(300):
        nxt: list[Any] = [1]
        cur.append(nxt)
        cur = nxt
    assert native(deep) is None
    assert json_text(deep) == json.dumps(deep, indent=2) + "\n"


def test_values_json_refuses_still_raise() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_text({"a": [object()]})


def test_a_real_report_document() -> None:
    from tbdtrace.commands._open import begin_open
    from tbdtrace.report import ReportOptions, build
    from tests.conftest import fixture

    src = fixture("kineto/hta/nccl_data.json.gz")
    doc = build(begin_open(str(src), False).trace(), ReportOptions())
    expected = json.dumps(doc, indent=2)
    assert json_text(doc) == expected + "\n"
    assert emit._indented(doc) == expected
    assert _native()(doc) == expected
