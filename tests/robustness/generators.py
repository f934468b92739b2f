"""Generators of the robustness cases, one per class (docs/RELIABILITY.md, "Threat model"):
a class grows by its generator, not by hand-written cases, so a new command or option is
covered as soon as it declares itself.

* ``outputs``: every output option of every command (found in the parsers: options
  marked with tbdtrace.commands._args.OUTPUT_KIND) through every kind of target
  (:data:`TARGETS`), with and without ``--force``; the expected outcome comes from the
  policy's rules written here (:func:`expect`), not from the code under test.
* ``tampering``: every table file of a trace damaged in each way (:data:`TAMPERS`), and
  every declared meta.json field (tbdtrace.meta.FIELDS) given a value of the wrong type.
* ``names``: every payload of :data:`PAYLOADS` in kernel, op and thread names and in
  meta fields, through every command that prints or writes names (:data:`NAME_OUTPUTS`).
* ``arguments``: every option of every command whose type is one of the validating
  types, given each bad value of its type (:func:`argument_cases`).

The kill-point class is in test_kill_points.py (slow: ``make robustness``); hostile sizes
belong to the importer's streaming work and its tests.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass

from tbdtrace import cli
from tbdtrace.commands import _args

# ---- outputs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Writer:
    """How to run one output option of one command. ``argv`` placeholders: ``{o}`` the
    target, ``{trace}``/``{trace2}`` traces, ``{profile}`` a Kineto file, ``{spool}`` a
    capture's spool, ``{part0}``/``{part1}`` the per-node traces of a job. ``inputs``
    names the placeholders that are the command's inputs (never a target)."""

    id: str
    command: str  # the command (cli.COMMANDS, without the trailing _)
    option: str  # the marked option: its first flag, or the positional's name
    kind: str  # file | folder | trace | append (a file added to, never replaced)
    argv: tuple[str, ...]
    inputs: tuple[str, ...]
    name: str = "out"  # the target's file name (sql picks its format by the extension)
    runs: str = "all"  # all: every target; refusals: only targets refused (a costly run)
    ok_rc: int = 0  # exit code of a run past the output check
    ok_line: str = ""  # a regular expression a run past the check prints (ok_rc != 0)


SQL = "SELECT * FROM range(5000)"  # over 4 KiB of output: a full disk fails it
WRITERS: tuple[Writer, ...] = (
    Writer("report-text", "report", "-o", "file", ("report", "{trace}", "-o", "{o}"), ("trace",)),
    Writer(
        "report-csv",
        "report",
        "-o",
        "folder",
        ("report", "{trace}", "--format", "csv", "-o", "{o}"),
        ("trace",),
    ),
    Writer(
        "report-xlsx",
        "report",
        "-o",
        "file",
        ("report", "{trace}", "--format", "xlsx", "-o", "{o}"),
        ("trace",),
    ),
    Writer("hotspots", "hotspots", "-o", "file", ("hotspots", "{trace}", "-o", "{o}"), ("trace",)),
    Writer(
        "diff-json",
        "diff",
        "-o",
        "file",
        ("diff", "{trace}", "{trace2}", "--format", "json", "-o", "{o}"),
        ("trace", "trace2"),
    ),
    Writer(
        "diff-summary",
        "diff",
        "--summary",
        "append",
        ("diff", "{trace}", "{trace2}", "--summary", "{o}"),
        ("trace", "trace2"),
    ),
    Writer(
        "diff-csv",
        "diff",
        "-o",
        "folder",
        ("diff", "{trace}", "{trace2}", "--format", "csv", "-o", "{o}"),
        ("trace", "trace2"),
    ),
    Writer(
        "sql",
        "sql",
        "--output",
        "file",
        ("sql", "{trace}", SQL, "--output", "{o}"),
        ("trace",),
        name="out.csv",
    ),
    Writer(
        "export",
        "export",
        "-o",
        "file",
        ("export", "{trace}", "--format", "chrome", "-o", "{o}"),
        ("trace",),
    ),
    Writer(
        "import", "import", "--out", "trace", ("import", "{profile}", "--out", "{o}"), ("profile",)
    ),
    Writer(
        "recover", "recover", "--out", "trace", ("recover", "{spool}", "--out", "{o}"), ("spool",)
    ),
    Writer(
        "merge", "merge", "out", "trace", ("merge", "{o}", "{part0}", "{part1}"), ("part0", "part1")
    ),
    Writer(
        "capture",
        "capture",
        "--out",
        "trace",
        ("capture", "--backend", "torch", "--out", "{o}", "--", "{python}", "-c", "0"),
        (),
        runs="refusals",
    ),
    Writer(
        "bench",
        "bench",
        "--out",
        "folder",
        ("bench", "--models", "nosuch", "--out", "{o}"),
        (),
        ok_rc=1,
        ok_line=r"unknown model 'nosuch'",
    ),
)


def declared_outputs() -> set[tuple[str, str, str]]:
    """(command, option, kind) of every output option the parsers mark."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = set()
    for name, p in sub.choices.items():
        for a in p._actions:
            kind = getattr(a, _args.OUTPUT_KIND, None)
            if kind is not None:
                opt = a.option_strings[0] if a.option_strings else a.dest
                out.add((name, opt, kind))
    return out


@dataclass(frozen=True)
class Target:
    """A kind of path an output may name. ``kinds`` the output kinds it applies to."""

    id: str
    what: str
    forced: bool  # worth a --force variant (something exists there)
    kinds: tuple[str, ...] = ("file", "folder", "trace")


TARGETS: tuple[Target, ...] = (
    Target("absent", "a path where nothing is", False),
    Target("missing-parent", "a path whose folder does not exist", False),
    Target("user-file", "the user's file", True),
    Target("empty-dir", "an empty folder", True),
    Target("user-dir", "a folder holding the user's files", True),
    Target("other-trace", "another trace directory", True),
    Target("trace-meta", "another trace's meta.json", True),
    Target("trace-table", "another trace's kernels.parquet", True),
    Target("trace-marker", "another trace's marker", True),
    Target("input", "the command's own input", True),
    Target("inside-input", "a new name inside the command's input trace", True),
    Target("input-symlink", "a symbolic link to the command's input", True),
    Target("input-hardlink", "a hard link to the command's input file", True),
    Target("char-device", "a character device (a /dev/null node)", True),
    Target("fifo", "a FIFO with a reader", True),
    Target("socket", "a UNIX socket", True),
    Target("link-to-user-file", "a symbolic link to the user's file", True),
    Target("dangling-link", "a symbolic link to nothing", True),
    Target("link-loop", "a loop of symbolic links", True),
    Target("under-file", "a path under the user's file", False),
    Target("long-name", "a 300-byte name", False),
    Target("full-disk", "the user's file on a full file system", True),
)


def expect(w: Writer, t: Target, force: bool, input_is_dir: bool) -> str:
    """``ok`` (written), ``refused`` (one line, exit 1, nothing changed) or ``skip``
    (the target does not apply), by the output policy's rules (tbdtrace/output_policy.py,
    docs/RELIABILITY.md), stated here independently of its code."""
    k = w.kind
    if k == "append":  # a file output that adds to an existing file: no --force needed
        if t.id in ("user-file", "link-to-user-file"):
            return "ok"
        if t.id == "full-disk":
            return "failed"
        k = "file"
    if t.id in ("input", "input-symlink", "input-hardlink", "inside-input"):
        if not w.inputs or (t.id == "input-hardlink" and input_is_dir):
            return "skip"
        if t.id == "inside-input" and not input_is_dir:
            return "skip"
        return "refused"  # with or without --force
    if t.id in (
        "trace-meta",
        "trace-table",
        "trace-marker",
        "socket",
        "link-loop",
        "under-file",
        "long-name",
    ):
        return "refused"
    if t.id == "absent":
        return "ok"
    if t.id == "missing-parent":
        return "refused" if k == "file" else "ok"
    if t.id in ("user-file", "link-to-user-file"):
        return "ok" if k == "file" and force else "refused"
    if t.id == "empty-dir":
        return "refused" if k == "file" else "ok"
    if t.id == "user-dir":
        return "ok" if k == "folder" and force else "refused"
    if t.id == "other-trace":
        return "ok" if k == "trace" and force else "refused"
    if t.id in ("char-device", "fifo"):
        return "ok" if k == "file" else "refused"
    if t.id == "dangling-link":
        return "refused" if k == "trace" else "ok"
    if t.id == "full-disk":
        return "refused" if not (k == "file" and force) else "failed"
    raise AssertionError(t.id)


def output_cases() -> list[tuple[Writer, Target, bool]]:
    """Every writer through every target, with --force where something exists there."""
    out = []
    for w, t in itertools.product(WRITERS, TARGETS):
        for force in (False, True) if t.forced else (False,):
            out.append((w, t, force))
    return out


# ---- table tampering ----------------------------------------------------------------------

# What is done to one table file of a trace (kernels.parquet unless said), and whether
# the table then is left out with a warning (default) / refused with --strict.
TAMPERS: tuple[tuple[str, str], ...] = (
    ("deleted", "the file removed"),
    ("truncated", "cut to half its size"),
    ("swapped", "replaced by the trace's ops table file"),
    ("foreign", "replaced by a Parquet file of other columns"),
    ("garbage", "replaced by bytes that are not Parquet"),
    ("fifo", "replaced by a FIFO (no writer: reading it would hang)"),
    ("char-device", "replaced by a link to /dev/zero (endless)"),
    ("directory", "replaced by a folder"),
    ("link-loop", "replaced by a loop of symbolic links"),
    ("other-write", "replaced by the same table of another trace of equal rows"),
    ("rows", "the marker's row count changed"),
)
# Tampering that leaves the table in place and adds a file: a warning, never a refusal.
EXTRAS: tuple[tuple[str, str], ...] = (
    ("unknown-parquet", "an unknown extra.parquet beside the tables"),
    ("unlisted-table", "a table file the marker does not list (memset.parquet)"),
)


def wrong_values(kind: str) -> list[object]:
    """Values of the wrong type for a meta field declared as ``kind``."""
    pool: list[object] = ["text", 7, 1.5, True, [1], {"a": 1}]
    if kind.startswith("list<"):
        inner = kind[5:-1]
        return [{"a": 1}, "text", [wrong_values(inner)[0]]]
    bad = {
        "str": [7, [1], {"a": 1}],
        "int": ["text", 1.5, [1], True],
        "number": ["text", [1], True],
        "bool": ["text", 1],
        "object": [[1], "text", 7],
        "list": [{"a": 1}, "text"],
    }[kind]
    assert all(v in pool for v in bad)
    return bad


# ---- names --------------------------------------------------------------------------------

PAYLOADS: tuple[tuple[str, str], ...] = (
    ("osc8-link", "\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07"),
    ("clear-screen", "\x1b[2J\x1b[H"),
    ("title", "\x1b]0;pwned\x07"),
    ("bare-cr", "good\rEVIL"),
    ("c1-csi", "\x9b31mred"),
    ("del", "a\x7fb"),
    ("nul", "a\x00b"),
    ("bidi", "\u202eevil\u202c"),
    ("formula-eq", '=HYPERLINK("http://evil.example","x")'),
    ("formula-plus", "+cmd|' /C calc'!A0"),
    ("formula-minus", "-2+3"),
    ("formula-at", "@SUM(A1:A9)"),
    ("formula-tab", "\t=1+1"),
    ("formula-cr", "\r=1+1"),
    ("negative-number", "-12.5"),
    ("plain", "sgemm_128x64"),
)
CONTROL = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"

# How each output shows names: text (escaped), csv (escaped and formula-guarded),
# csv-raw (exact), exact (JSON, Parquet, Chrome, Perfetto: exact names), xlsx (exact text
# cells, never a formula).
NAME_OUTPUTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("report-text", ("report", "{trace}"), "text"),
    ("report-text-file", ("report", "{trace}", "-o", "{o}"), "text-file"),
    ("report-csv", ("report", "{trace}", "--format", "csv", "-o", "{o}"), "csv-dir"),
    ("report-csv-section", ("report", "{trace}", "--format", "csv", "--section", "kernels"), "csv"),
    (
        "report-csv-raw",
        ("report", "{trace}", "--format", "csv", "--section", "kernels", "--raw-csv"),
        "csv-raw",
    ),
    ("report-json", ("report", "{trace}", "--format", "json"), "json"),
    ("report-xlsx", ("report", "{trace}", "--format", "xlsx", "-o", "{o}"), "xlsx"),
    ("hotspots-text", ("hotspots", "{trace}"), "text"),
    ("hotspots-op-text", ("hotspots", "{trace}", "--by", "op"), "text"),
    ("hotspots-csv", ("hotspots", "{trace}", "--format", "csv"), "csv"),
    ("hotspots-json", ("hotspots", "{trace}", "--format", "json"), "json"),
    ("diff-text", ("diff", "{trace}", "{trace2}"), "text"),
    ("diff-csv", ("diff", "{trace}", "{trace2}", "--format", "csv", "--section", "kernels"), "csv"),
    ("diff-json", ("diff", "{trace}", "{trace2}", "--format", "json"), "json"),
    ("sql-text", ("sql", "{trace}", "SELECT name FROM kernels"), "text"),
    ("sql-csv", ("sql", "{trace}", "SELECT name FROM kernels", "--format", "csv"), "csv"),
    (
        "sql-csv-raw",
        ("sql", "{trace}", "SELECT name FROM kernels", "--format", "csv", "--raw-csv"),
        "csv-raw",
    ),
    ("sql-json", ("sql", "{trace}", "SELECT name FROM kernels", "--format", "json"), "json"),
    (
        "sql-parquet",
        ("sql", "{trace}", "SELECT name FROM kernels", "--output", "{o}.parquet"),
        "parquet",
    ),
    ("info-text", ("info", "{trace}"), "text"),
    ("export-chrome", ("export", "{trace}", "--format", "chrome", "-o", "{o}"), "exact-file"),
    ("export-perfetto", ("export", "{trace}", "--format", "perfetto", "-o", "{o}"), "exact-file"),
)


# ---- arguments ----------------------------------------------------------------------------

BAD_VALUES = {
    "integer >= 1": ("0", "-1", "nan", "1.5", "abc", "", "99999999999999999999x"),
    "integer >= 0": ("-1", "nan", "1.5", "abc", ""),
    "finite number > 0": ("nan", "inf", "-inf", "0", "-1", "abc", "", "1e400"),
    "scheduler address": (
        "tcp://host:notaport",
        "foo://host:1",
        "tcp://:8786",
        "tcp://host:0",
        "tcp://host:70000",
        "http://host:80",
    ),
}
GOOD_VALUES = {
    "integer >= 1": "3",
    "integer >= 0": "0",
    "finite number > 0": "2.5",
    "scheduler address": "tcp://127.0.0.1:8786",
}


def argument_cases() -> list[tuple[str, str, str, str]]:
    """(command, option, type name, bad value) for every option of every command whose
    type is a validating type of tbdtrace.commands._args."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, p in sub.choices.items():
        for a in p._actions:
            tname = getattr(a.type, "__name__", None)
            if tname in BAD_VALUES and a.option_strings:
                out += [(name, a.option_strings[0], tname, v) for v in BAD_VALUES[tname]]
    return out


def untyped_numbers() -> list[str]:
    """Options parsed with a bare int or float (not validated: NaN, 0 and -1 get in)."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [
        f"{name} {a.option_strings[0] if a.option_strings else a.dest}"
        for name, p in sub.choices.items()
        for a in p._actions
        if a.type in (int, float)
    ]
