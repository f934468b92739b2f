"""The Kineto parser on two threads (``KinetoParser.set_threads(2)``): the same rows,
strings, counts and errors as on one.

Each piece is cut in two at a guessed event start and the second part parsed by a parser
of its own, taken over only when the first parser then stands exactly there. The traces
here put that guess inside strings (braces, quotes, escapes, "},{" in a name), inside
events (an event spread over lines, objects on lines of their own), at items that are not
events, at errors and at the end of the input; the cut is forced into every piece (a
2-byte threshold) and pieces are cut anywhere. Expected values come from the one-thread
parse and from the tests' oracle (tests/rawkineto.py, json.loads).
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tbdtrace import _native
from tbdtrace.errors import TraceError
from tbdtrace.importers import kineto
from tbdtrace.importers.kineto import feed
from tbdtrace.importers.kineto.vocab import ROUTES
from tests.conftest import fixture
from tests.importers.test_kineto_parser import EVENTS, assert_matches_oracle, doc_text

# Flow events (dropped by the importer) and others whose text looks like event bounds.
TRICKY = [
    '{"ph": "s", "id": 1, "cat": "ac2g", "name": "a}, {\\"ph\\": \\"X\\"}, {", "ts": 1}',
    '{"ph": "f", "id": 1, "cat": "ac2g", "name": "\\n{\\"ph\\":\\"X\\"\\\\", "ts": 2, "bp": "e"}',
    '{"ph": "X", "cat": "kernel", "name": "},{\\"ph\\": \\"X\\", \\"cat\\": \\"kernel\\"}",'
    ' "ts": 40, "dur": 1}',
    '{"ph": "X", "cat": "kernel", "name": "over\\nlines", "ts": 41,\n"dur": 2, "args": {'
    '"other": [\n{"a": "}"},\n  {"b": [\n{}]}], "device": 1,\n"stream": 3}}',
    '{"ph": "s", "cat": "kernel", "name": "ph twice", "ts": 42, "dur": 1, "ph": "X"}',
    '{"ph": "X", "cat": "kernel", "name": "ph twice, flow last", "ts": 43, "ph": "f"}',
    '{"ph": "X", "cat": "kernel", "name": "text times", "ts": "44.5", "dur": "1",'
    ' "args": {"device": "\\u0661"}}',
    '{"ph": "t", "id": "x", "cat": "ac2g", "name": "\\u00e9\\ud83d\\ude00 \\"}\\"", "ts": 45}',
]


def tricky_doc(copies: int = 3) -> str:
    events = (EVENTS + TRICKY) * copies
    return doc_text(events)


def flat(parser: Any) -> dict[str, Any]:
    """Everything a parser holds after finish(): its tables, strings, counts, header."""
    out = parser.take()
    got = {
        "header": parser.header(),
        "events": parser.events,
        "skipped": parser.skipped(),
        "strings": tuple(a.tobytes() for a in out["strings"]),
    }
    for t, cols in out["tables"].items():
        for c, (values, valid, nulls) in cols.items():
            got[f"{t}.{c}"] = (values.tobytes(), None if valid is None else valid.tobytes(), nulls)
    return got


def parse(data: bytes, sizes: Iterator[int], threads: int, split: int = 2) -> tuple[Any, int]:
    """(flat result, or the error's text) and the parts the second thread gave."""
    parser = _native.KinetoParser(ROUTES)
    parser.set_hook(feed.python_value)
    parser.set_threads(threads, split, take_back=False)  # the second thread's parts used
    parser.begin_file()
    try:
        i = 0
        for n in sizes:
            if i >= len(data):
                break
            parser.feed(data[i : i + n])
            i += n
        parser.finish()
    except _native.KinetoError as e:
        return f"error: {e}", parser.parts_taken
    return flat(parser), parser.parts_taken


def cuts(seed: int, most: int) -> Iterator[int]:
    rng = random.Random(seed)
    while True:
        yield rng.randint(1, most)


def whole(data: bytes) -> Iterator[int]:
    yield len(data)


def test_two_threads_give_what_one_gives_wherever_pieces_end() -> None:
    data = tricky_doc().encode()
    one, _ = parse(data, whole(data), 1)
    assert isinstance(one, dict) and one["events"] == len(json.loads(data)["traceEvents"])
    taken = 0
    for sizes in (whole(data), cuts(1, 300), cuts(2, 5000), iter(lambda: 97, None)):
        two, parts = parse(data, sizes, 2)
        assert two == one
        taken += parts
    assert taken > 0  # the second thread's parts were used, not only parsed again


def test_split_inside_an_event_or_a_string_is_parsed_again() -> None:
    # One big event per line with objects on lines of their own, and names holding
    # "},{": most guessed starts are not events; the result is still the same.
    objs = (json.dumps({"k": "},{", "n": [{"x": i}]}) for i in range(50))
    inner = ",\n".join(o.replace("[", "[\n") for o in objs)
    events = [
        json.dumps({"ph": "X", "cat": "kernel", "name": f"}},{{{i}", "ts": i, "dur": 1})[:-1]
        + ', "args": {"o": [\n'
        + inner
        + "]}}"
        for i in range(20)
    ]
    data = doc_text(events).encode()
    one, _ = parse(data, whole(data), 1)
    names = [e["name"] for e in json.loads(data)["traceEvents"]]
    assert names == [f"}},{{{i}" for i in range(20)]
    for sizes in (whole(data), cuts(3, 4000)):
        assert parse(data, sizes, 2)[0] == one


def test_compact_file_without_line_breaks() -> None:
    data = doc_text(EVENTS + TRICKY[:3]).replace("\n", "").encode()
    one, _ = parse(data, whole(data), 1)
    two, parts = parse(data, iter(lambda: 500, None), 2)
    assert two == one
    assert parts > 0


@pytest.mark.parametrize(
    "bad, message",
    [
        ('{"ph": "f", "name": "bad \\x escape", "ts": 1}', "invalid escape"),
        ('{"ph": "X", "cat": "kernel", "name": "\\ud800", "ts": 1}', "unpaired UTF-16 surrogate"),
        ('{"ph": "s", "name": "raw \t tab"}', "control character"),
        ('{"ph": "X", "cat": "kernel", "ts": 1 "dur": 2}', "expected ','"),
    ],
)
def test_errors_and_their_places_are_those_of_one_thread(bad: str, message: str) -> None:
    # The bad event late in the document: in the second thread's part of its piece.
    events = (EVENTS + TRICKY) * 2
    data = doc_text(events[:-3] + [bad] + events[-3:]).encode()
    one, _ = parse(data, whole(data), 1)
    assert isinstance(one, str) and message in one
    for sizes in (whole(data), cuts(4, 700), iter(lambda: 61, None)):
        assert parse(data, sizes, 2)[0] == one


@pytest.mark.parametrize("cut", [-1, -2, -40, -300, -1000])
def test_input_ending_inside_an_event_is_an_error(cut: int) -> None:
    data = tricky_doc().encode()[:cut]
    one, _ = parse(data, whole(data), 1)
    assert one == parse(data, iter(lambda: 333, None), 2)[0]
    assert isinstance(one, str) and "end of input" in one


def test_parts_the_second_thread_has_not_begun_are_parsed_by_the_first() -> None:
    # With take-back on (the importer's setting) some parts may be parsed by either
    # thread: the result is the same whichever does.
    data = tricky_doc().encode()
    one, _ = parse(data, whole(data), 1)
    parser = _native.KinetoParser(ROUTES)
    parser.set_hook(feed.python_value)
    parser.set_threads(2, 2)
    parser.begin_file()
    for i in range(0, len(data), 151):
        parser.feed(data[i : i + 151])
    parser.finish()
    assert flat(parser) == one


def test_real_trace_in_pieces_as_the_importer_feeds_it() -> None:
    data = gzip.decompress(fixture("kineto/hta/nccl_data.json.gz").read_bytes())
    sizes = iter(lambda: feed.PIECE_BYTES, None)
    one, _ = parse(data, sizes, 1)
    two, parts = parse(data, iter(lambda: feed.PIECE_BYTES, None), 2, feed.SPLIT_BYTES)
    assert two == one
    assert parts >= len(data) // feed.PIECE_BYTES  # one part per whole piece


def test_import_with_every_piece_cut_matches_the_oracle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    path.write_text(tricky_doc())
    monkeypatch.setattr(feed, "PIECE_BYTES", 211)
    monkeypatch.setattr(feed, "SPLIT_BYTES", 2)
    monkeypatch.setattr(feed, "parse_threads", lambda *files: 2)
    assert_matches_oracle(kineto.import_files([path]), [path])


def test_threads_must_be_one_or_two() -> None:
    parser = _native.KinetoParser(ROUTES)
    with pytest.raises(ValueError, match="1 or 2"):
        parser.set_threads(3)


def test_bad_file_is_one_line_with_two_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = (EVENTS + TRICKY) * 2
    path = tmp_path / "bad.json"
    path.write_text(doc_text(events + ['{"ph": "f", "name": "bad \\q"}'] + events))
    monkeypatch.setattr(feed, "PIECE_BYTES", 509)
    monkeypatch.setattr(feed, "SPLIT_BYTES", 2)
    monkeypatch.setattr(feed, "parse_threads", lambda *files: 2)
    with pytest.raises(TraceError) as two:
        kineto.import_files([path])
    monkeypatch.setattr(feed, "parse_threads", lambda *files: 1)
    with pytest.raises(TraceError) as one:
        kineto.import_files([path])
    assert str(two.value) == str(one.value)
    assert "\n" not in str(one.value)


def test_two_parse_threads_unless_a_gzipped_file_takes_the_second_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "t.json"
    plain.write_bytes(b'{"traceEvents": []}')
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for cpus, files, want in [
        (1, [plain], 1),
        (2, [plain], 2),
        (2, [plain, packed], 1),
        (4, [packed], 2),
        (2, [tmp_path / "absent.json"], 2),
    ]:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)))
        assert feed.parse_threads(files) == want, (cpus, files)
