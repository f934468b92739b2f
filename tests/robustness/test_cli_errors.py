"""tbdtrace/cli_errors.py: which errors are the user's (one line) and which are bugs."""

from __future__ import annotations

import errno
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tbdtrace import cli_errors


def test_a_bug_prints_its_traceback_and_asks_for_a_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        {}["missing"]  # a real KeyError, raised and caught as the CLI would see it
    except KeyError as e:
        rc = cli_errors.handle(e, ["report", "x"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("Traceback (most recent call last):")
    last = err.strip().splitlines()[-1]
    assert last.startswith("tbdtrace: internal error (KeyError); this is a bug in tbdtrace")
    assert "report it" in last


def test_arrow_and_duckdb_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"ARROW1\0\0not an arrow file")
    try:
        pa.ipc.open_file(str(bad))
    except pa.ArrowInvalid as e:
        rc = cli_errors.handle(e, ["info", str(bad)])
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"tbdtrace: {bad}: ArrowInvalid: ")
    try:
        duckdb.sql("SELEC 1")
    except duckdb.Error as e:
        rc = cli_errors.handle(e, ["sql", "T", "SELEC 1"])
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "ParserException" in err


def test_os_errors_name_the_path_and_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        open("/proc/no-such-dir/x", "w")  # noqa: SIM115 - the real error is what is tested
    except OSError as e:
        assert e.errno == errno.ENOENT
        rc = cli_errors.handle(e, ["import"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err == "tbdtrace: /proc/no-such-dir/x: No such file or directory; check the path\n"
