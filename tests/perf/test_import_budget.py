"""The import budget: which modules ``report``, ``hotspots``, ``info`` and ``diff`` load.

A command's time on one file is mostly what it imports before its work starts (numpy and
pyarrow alone are a third of ``report FILE`` on the largest fixture). Each command runs
here in its own process under ``python -X importtime``, and what it loaded is checked
against the lists below:

* third-party packages: only those in :data:`THIRD_PARTY` (numpy, pyarrow and what
  pyarrow itself loads; isal for gzip). Never Dask, matplotlib, pandas (refused by
  tbdtrace/_pandas_gate.py: the refused attempt is listed, nothing under it), rich,
  DuckDB, torch or TensorFlow;
* standard-library packages of a process pool or a server: none (:data:`STDLIB_DENIED`);
* tbdtrace's own modules: only those on the command's list. The scale-out code
  (``tbdtrace.scaleout``) never loads for one trace or one file; nor do capture,
  export, the SQL layer or the HTML writer.

A module a change adds fails the test with its name: if the command truly needs it at
start-up, add it to the list here (and mind bench/perf_gate.py's time budgets);
otherwise import it where it is used.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import fixture

ROOT = Path(__file__).resolve().parents[2]

THIRD_PARTY = {
    "numpy",
    "pyarrow",
    "isal",  # gzip, on the importer's read thread
    "cloudpickle",  # pyarrow's own import (its serialization)
    "dateutil",  # pyarrow's, on the first array built from a Python list
    "pandas",  # the refused attempt only (checked below: no pandas.* module)
}
# Names -X importtime lists that are not packages a command chose: site's hooks.
SITE = {"_distutils_hack", "sitecustomize", "usercustomize", "org"}
STDLIB_DENIED = {"multiprocessing", "asyncio", "sqlite3", "http", "xml", "email", "tkinter"}
# Denied tbdtrace packages, whatever the lists below say.
TBDTRACE_DENIED = (
    "tbdtrace.scaleout",
    "tbdtrace.collector",
    "tbdtrace.export",
    "tbdtrace.suite",
    "tbdtrace.report.html",
    "tbdtrace.report.plots",
    "tbdtrace.report.xlsx",
    "tbdtrace.commands.sql",
    "tbdtrace.analysis.sql",
)

# The modules every command here loads (a trace directory given to info).
CORE = {
    "tbdtrace",
    "tbdtrace._pandas_gate",
    "tbdtrace.analysis",
    "tbdtrace.analysis.engine",
    "tbdtrace.analysis.engine.cache",
    "tbdtrace.analysis.engine.context",
    "tbdtrace.analysis.engine.grouping",
    "tbdtrace.analysis.engine.intervals",
    "tbdtrace.analysis.engine.joins",
    "tbdtrace.analysis.engine.shared_arrays",
    "tbdtrace.analysis.engine.window",
    "tbdtrace.arrow_ints",
    "tbdtrace.cli",
    "tbdtrace.cli_errors",
    "tbdtrace.commands._args",  # the options' validators and the output floor's targets
    "tbdtrace.commands._open",
    "tbdtrace.errors",
    "tbdtrace.heap",
    "tbdtrace.meta",  # a trace directory's meta.json through its typed loader
    "tbdtrace.outdir",
    "tbdtrace.output_policy",
    "tbdtrace.progress",
    "tbdtrace.report",
    "tbdtrace.report.build",
    "tbdtrace.report.csvout",  # the output floor (report/emit.py) renders every format
    "tbdtrace.report.documents",
    "tbdtrace.report.emit",
    "tbdtrace.report.fmt",
    "tbdtrace.report.section_api",
    "tbdtrace.report.tabular",
    "tbdtrace.report.textui",
    "tbdtrace.safe_text",
    "tbdtrace.schema",
    "tbdtrace.tablefile",
    "tbdtrace.trace",
    "tbdtrace.trace_check",  # each table file checked against the trace's marker
}
# The Kineto importer, for a profiler file given in place of a trace directory.
KINETO = {
    "tbdtrace._native",
    "tbdtrace.importers",
    "tbdtrace.importers.collectives",
    "tbdtrace.importers.columns",
    "tbdtrace.importers.kineto",
    "tbdtrace.importers.kineto.feed",
    "tbdtrace.importers.kineto.header",
    "tbdtrace.importers.kineto.repair",
    "tbdtrace.importers.kineto.tables",
    "tbdtrace.importers.kineto.vocab",
    "tbdtrace.importers.sniff",
    "tbdtrace.importers.validate",
}
REPORT = CORE | {
    "tbdtrace._native",  # the attribution's innermost-range search, compiled
    "tbdtrace.analysis.engine.across_ranks",
    "tbdtrace.analysis.engine.attribution",
    "tbdtrace.analysis.engine.byte_formulas",
    "tbdtrace.analysis.engine.data_wait",
    "tbdtrace.analysis.engine.flop_formulas",
    "tbdtrace.analysis.engine.kernel_names",
    "tbdtrace.analysis.engine.source_lines",  # hotspots' source column
    "tbdtrace.analysis.engine.memory_blocks",
    "tbdtrace.analysis.engine.memory_devices",
    "tbdtrace.analysis.engine.op_flops",
    "tbdtrace.analysis.engine.categories",
    "tbdtrace.analysis.engine.memory_replay",
    "tbdtrace.analysis.engine.memory_advice",  # the memory section's advice
    "tbdtrace.analysis.engine.step_events",
    "tbdtrace.analysis.engine.summaries",
    "tbdtrace.analysis.engine.outputs",
    "tbdtrace.analysis.engine.peaks",
    "tbdtrace.analysis.passes",
    "tbdtrace.analysis.passes.categories",
    "tbdtrace.analysis.passes.collective_skew",
    "tbdtrace.analysis.passes.cpu_activity",
    "tbdtrace.analysis.passes.flops",
    "tbdtrace.analysis.passes.fp32",
    "tbdtrace.analysis.passes.hotspots",
    "tbdtrace.analysis.passes.idle",
    "tbdtrace.analysis.passes.kernel_flops",
    "tbdtrace.analysis.passes.kernels",
    "tbdtrace.analysis.passes.memcpy",
    "tbdtrace.analysis.passes.memory",
    "tbdtrace.analysis.passes.memory_series",
    "tbdtrace.analysis.passes.phases",
    "tbdtrace.analysis.passes.ranks",
    "tbdtrace.analysis.passes.roofline",
    "tbdtrace.analysis.passes.step_timeline",
    "tbdtrace.analysis.passes.steps",
    "tbdtrace.analysis.passes.summary",
    "tbdtrace.analysis.passes.utilization",
    "tbdtrace.commands._output",
    "tbdtrace.commands._perrank",
    "tbdtrace.commands._rankset",
    "tbdtrace.commands._window",
    "tbdtrace.report.contents",
    "tbdtrace.report.cpu_section",
    "tbdtrace.report.critical_path_section",  # the pass loads when --critical-path asks
    "tbdtrace.report.flops_section",
    "tbdtrace.report.memory_section",
    "tbdtrace.report.passes_sections",
    "tbdtrace.report.ranks_section",
    "tbdtrace.report.roofline_section",
    "tbdtrace.report.sections",
    "tbdtrace.report.series_sections",
    "tbdtrace.report.text",
    "tbdtrace.report.window_section",
}
HOTSPOTS = CORE | {
    "tbdtrace.analysis.engine.attribution",
    "tbdtrace.analysis.engine.kernel_names",
    "tbdtrace.analysis.engine.source_lines",  # hotspots' source column
    "tbdtrace.analysis.engine.categories",
    "tbdtrace.analysis.engine.outputs",
    "tbdtrace.analysis.passes",
    "tbdtrace.analysis.passes.categories",
    "tbdtrace.analysis.passes.hotspots",
    "tbdtrace.analysis.passes.kernels",
    "tbdtrace.commands._window",
    "tbdtrace.report.hotspots_view",
}
INFO = CORE | {"tbdtrace.report.info_view"}
DIFF = CORE | {
    "tbdtrace.analysis.compare",
    "tbdtrace.analysis.engine.attribution",
    "tbdtrace.analysis.engine.data_wait",
    "tbdtrace.analysis.engine.kernel_names",
    "tbdtrace.analysis.engine.source_lines",  # hotspots' source column
    "tbdtrace.analysis.engine.memory_blocks",
    "tbdtrace.analysis.engine.memory_devices",
    "tbdtrace.analysis.engine.categories",
    "tbdtrace.analysis.engine.memory_replay",
    "tbdtrace.analysis.engine.summaries",
    "tbdtrace.analysis.engine.outputs",
    "tbdtrace.analysis.gate",
    "tbdtrace.analysis.passes",
    "tbdtrace.analysis.passes.categories",
    "tbdtrace.analysis.passes.hotspots",
    "tbdtrace.analysis.passes.kernels",
    "tbdtrace.analysis.passes.memory",
    "tbdtrace.analysis.passes.steps",
    "tbdtrace.analysis.passes.summary",
    "tbdtrace.analysis.passes.utilization",
    "tbdtrace.commands._output",
    "tbdtrace.commands._rankset",
    "tbdtrace.commands._window",
    "tbdtrace.report.diff_view",
}

FIXTURE = "kineto/hta/df_index_resolver.json.gz"
OTHER = "kineto/hta/nccl_data.json.gz"


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("budget") / "trace"
    r = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "import", str(fixture(FIXTURE)), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def loaded(args: list[str]) -> set[str]:
    """Every module the command imported (``-X importtime``'s list)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tbdtrace", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip(), "the command printed nothing"
    return {
        ln.rsplit("|", 1)[-1].strip()
        for ln in r.stderr.splitlines()
        if ln.startswith("import time:") and "|" in ln and "imported package" not in ln
    }


def over_budget(mods: set[str], allowed: set[str]) -> list[str]:
    """What ``mods`` holds beyond the budget, one line each."""
    out = []
    tops = {m.split(".")[0] for m in mods}
    for top in sorted(tops - set(sys.stdlib_module_names) - THIRD_PARTY - SITE - {"tbdtrace"}):
        if not top.startswith(("__editable__", "_sysconfigdata")):
            out.append(f"third-party package {top}")
    out += [f"standard-library package {t}" for t in sorted(tops & STDLIB_DENIED)]
    out += [f"pandas module {m} (pandas must stay refused)" for m in mods if "pandas." in m]
    ours = {m for m in mods if m == "tbdtrace" or m.startswith("tbdtrace.")}
    out += [f"{m} (denied)" for m in sorted(ours) if m.startswith(TBDTRACE_DENIED)]
    out += [f"{m}" for m in sorted(ours - allowed) if not m.startswith(TBDTRACE_DENIED)]
    return out


def check(command: str, args: list[str], allowed: set[str]) -> None:
    extra = over_budget(loaded([command, *args]), allowed)
    assert not extra, (
        f"`tbdtrace {command}` loads modules beyond its import budget "
        f"(tests/perf/test_import_budget.py): {', '.join(extra)}. Import them where they "
        "are used, or, if the command needs them at start-up, add them to its list"
    )


def test_report_file() -> None:
    check("report", [str(fixture(FIXTURE))], REPORT | KINETO)


def test_report_file_json() -> None:
    check("report", [str(fixture(FIXTURE)), "--format", "json"], REPORT | KINETO)


def test_report_trace_dir(trace_dir: Path) -> None:
    check("report", [str(trace_dir)], REPORT)


def test_hotspots_file() -> None:
    check("hotspots", [str(fixture(FIXTURE))], HOTSPOTS | KINETO)


def test_info_file_and_trace_dir(trace_dir: Path) -> None:
    check("info", [str(fixture(FIXTURE))], INFO | KINETO)
    check("info", [str(trace_dir)], INFO)


def test_diff_files(trace_dir: Path) -> None:
    check("diff", [str(trace_dir), str(fixture(OTHER))], DIFF | KINETO)


def test_the_budget_catches_what_it_guards() -> None:
    """The check itself: each kind of excess is named (a test that cannot fail is none)."""
    mods = set(REPORT) | {
        "dask",
        "dask.array",
        "matplotlib.pyplot",
        "pandas.core",
        "multiprocessing.pool",
        "tbdtrace.scaleout",
        "tbdtrace.scaleout.rankwork",
        "tbdtrace.analysis.passes.new_costly_pass",
    }
    got = over_budget(mods, REPORT)
    assert got == [
        "third-party package dask",
        "third-party package matplotlib",
        "standard-library package multiprocessing",
        "pandas module pandas.core (pandas must stay refused)",
        "tbdtrace.scaleout (denied)",
        "tbdtrace.scaleout.rankwork (denied)",
        "tbdtrace.analysis.passes.new_costly_pass",
    ]
    assert over_budget(set(REPORT), REPORT) == []
