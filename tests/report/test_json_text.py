"""The JSON every document writes is ``json.dumps(value, indent=2)`` plus a newline, byte
for byte, whatever the value (the report's lists of rows take a faster path)."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
]


@pytest.mark.parametrize("value", CASES)
def test_json_text_is_json_dumps_indented(value: Any) -> None:
    assert json_text(value) == json.dumps(value, indent=2) + "\n"


def test_a_real_report_document() -> None:
    from tbdtrace.commands._open import begin_open
    from tbdtrace.report import ReportOptions, build
    from tests.conftest import fixture

    src = fixture("kineto/hta/nccl_data.json.gz")
    doc = build(begin_open(str(src), False).trace(), ReportOptions())
    assert json_text(doc) == json.dumps(doc, indent=2) + "\n"
