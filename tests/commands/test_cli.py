"""The CLI surface: help on every command, usage errors, the console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tbdtrace.cli import build_parser


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(sub.choices)


def test_core_commands_exist():
    assert {"import", "info", "report"} <= set(_commands())


@pytest.mark.parametrize("cmd", _commands())
def test_help_on_every_command(cmd):
    r = subprocess.run(
        [sys.executable, "-m", "tbdtrace", cmd, "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "usage: tbdtrace" in r.stdout


def test_no_command_prints_help_exit_2():
    r = subprocess.run([sys.executable, "-m", "tbdtrace"], capture_output=True, text=True)
    assert r.returncode == 2 and "COMMAND" in r.stdout


def test_report_on_missing_trace_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", str(tmp_path / "x")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "not a trace directory" in r.stderr


def test_console_script_matches_module(tmp_path):
    exe = Path(sys.executable).parent / "tbdtrace"
    if not exe.exists():
        pytest.skip("tbdtrace is not installed as a console script in this environment")
    a = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    b = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "--version"], capture_output=True, text=True
    )
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout


def test_main_in_process_leaves_no_process_wide_settings(tmp_path):
    # `main()` called from Python (tests, notebooks) must not keep pandas out of the caller's
    # process afterwards; only the program's own process (`run`) refuses it. Run in a fresh
    # interpreter so that pandas is not already loaded.
    code = (
        "import sys\n"
        "from tbdtrace.cli import main\n"
        f"main(['report', {str(tmp_path / 'missing')!r}])\n"
        "import pandas\n"
        "print('pandas', pandas.__version__)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("pandas ")


@pytest.mark.parametrize("numpy_first", [False, True])
def test_big_analysis_turns_numpys_huge_pages_off(numpy_first: bool) -> None:
    """For a big input the CLI stops numpy from asking for transparent huge pages,
    whether numpy is loaded before the settings or after (a process of its own: the
    settings are process-wide)."""
    code = (
        "import os, sys\n"
        + ("import numpy\n" if numpy_first else "")
        + "from tbdtrace import cli\n"
        "cli.keep_freed_memory(big=True)\n"
        "from numpy._core import multiarray\n"
        "was = multiarray._set_madvise_hugepage(True)\n"
        "print(was, os.environ.get('NUMPY_MADVISE_HUGEPAGE', '-'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["False", "0"]
    # small inputs, and a library user's process, keep numpy's default
    code = code.replace("big=True", "big=False")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split()[0] == "True"


def test_export_counts_a_smaller_trace_as_big(tmp_path) -> None:
    """`export` writes ~10x its input: a 3 MiB trace directory gets the big-input heap
    settings for it (from 2 MiB) but not for `report` (from 16 MiB); 1 MiB for neither."""
    from tbdtrace import cli

    for mib, export_big in ((3, True), (1, False)):
        d = tmp_path / f"t{mib}"
        d.mkdir()
        (d / "kernels.parquet").write_bytes(b"\0" * (mib << 20))
        assert cli.input_is_big([str(d)]) is False
        assert cli.input_is_big([str(d)], cli.EXPORT_SCALE) is export_big


@pytest.mark.parametrize("command", ["report", "import", "capture"])
def test_analysis_commands_load_numpy_without_a_blas_thread_pool(command: str) -> None:
    """An analysis command's process loads numpy with one BLAS thread (no pool spinning
    on the cores); ``capture`` leaves the setting to the program it captures, and an
    explicit choice in the environment stays."""
    code = (
        "import os, sys\n"
        "from tbdtrace import cli\n"
        f"cli._tune_process({command!r}, [])\n"
        "import numpy\n"
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS', '-'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    threads, setting = out.stdout.split()
    if command == "capture":
        assert setting == "-"
    else:
        assert (threads, setting) == ("1", "1")
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split()[1] == "2"
