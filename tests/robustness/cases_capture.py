"""Robustness cases for outputs, capture stopping, OS errors, concurrency, full disks and
noise: the table ``tests/robustness/test_capture_cases.py`` runs.

Each case: ``id``, ``cls`` (its class), ``what`` (what is done, in words), ``argv`` (the
tbdtrace command line; placeholders below), ``rc`` (expected exit code), ``line`` (a
regular expression one stderr line must match; "" when nothing must be said), ``survive``
(files and directories, relative to the case's work directory, that exist before and
must hold the same bytes after), ``setup`` (what is made first) and ``check`` (further
facts about the result), ``run`` (how the command runs: ``inproc`` calls
``tbdtrace.cli.main``, ``proc`` a ``python -m tbdtrace`` process, ``full`` with stdout on
/dev/full, ``head`` piped into ``head -1``), ``cwd`` (relative to the work directory).

Placeholders in ``argv``: ``{w}`` the work directory, ``{profile}`` a small PyTorch
profiler file made by the session, ``{long}`` a 300-byte name.

Setup steps (``kind:argument``): ``trace:R`` a copy of the session's real capture at R;
``legacy:R`` the same without its marker (a trace from an older tbdtrace); ``file:R=TEXT``;
``dir:R``; ``steps-trace:R`` a trace holding only a steps table; ``corrupt:R`` R cut to
half its size; ``link:R=TARGET`` a symbolic link; ``spool:R`` a copy of the spool a killed
capture left; ``ro:R`` a read-only file system (or directory) at R; ``full:R`` a full
tmpfs at R; ``tight:R`` a tmpfs at R with 64 KiB free; ``lock:R`` the writer lock of R
held by another process; ``holder:R`` a process whose environment names the spool R;
``umask:OCTAL``; ``min-free:BYTES`` (the free-space threshold, for writes that must
reach the disk's end).

Checks: ``trace:R`` R opens as a trace; ``source:R=S`` its meta.source; ``absent:R``;
``mode:R=OCTAL`` directory permissions; ``no-lock:R`` no lock file left;
``no-staging:R`` no staging directory left; ``marker-lists:R=NAME``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    cls: str
    what: str
    argv: tuple[str, ...]
    rc: int
    line: str
    survive: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    check: tuple[str, ...] = ()
    run: str = "inproc"
    cwd: str = ""


def C(  # noqa: N802 - short, for a readable table
    cid: str,
    cls: str,
    what: str,
    argv: str,
    rc: int,
    line: str,
    survive: tuple[str, ...] = (),
    setup: tuple[str, ...] = (),
    check: tuple[str, ...] = (),
    run: str = "inproc",
    cwd: str = "",
) -> Case:
    return Case(cid, cls, what, tuple(argv.split()), rc, line, survive, setup, check, run, cwd)


IMP = "import {profile} --out"
FULL_STDOUT = r"cannot write the standard output \(No space left on device\)"

# fmt: off
CASES: tuple[Case, ...] = (
    # --- outputs: what --out may write into -------------------------------------------
    C("out-absent", "outputs", "import into a directory that does not exist",
      f"{IMP} {{w}}/t", 0, r"^wrote .*/t \(", check=("trace:t", "source:t=kineto",
                                                     "no-lock:t", "no-staging:t")),
    C("out-absent-nested", "outputs", "import into a path whose parents do not exist",
      f"{IMP} {{w}}/a/b/c/t", 0, r"^wrote ", check=("trace:a/b/c/t",)),
    C("out-empty-dir", "outputs", "import into an existing empty directory",
      f"{IMP} {{w}}/e", 0, r"^wrote ", setup=("dir:e",), check=("trace:e",)),
    C("out-user-dir", "outputs", "import into a directory of the user's files",
      f"{IMP} {{w}}/u", 1, r"u: exists, is not empty and is not a tbdtrace trace",
      survive=("u/notes.txt", "u/data.csv"),
      setup=("file:u/notes.txt=mine", "file:u/data.csv=1,2")),
    C("out-user-meta", "outputs", "import into a directory holding the user's meta.json",
      f"{IMP} {{w}}/u", 1, r"is not a tbdtrace trace", survive=("u/meta.json", "u/x.txt"),
      setup=("file:u/meta.json={}", "file:u/x.txt=x")),
    C("out-user-meta-force", "outputs", "--force into a directory with the user's meta.json",
      f"{IMP} {{w}}/u --force", 1, r"is not a tbdtrace trace",
      survive=("u/meta.json", "u/x.txt"), setup=("file:u/meta.json={}", "file:u/x.txt=x")),
    C("out-only-meta", "outputs", "--force into a directory with only a meta.json not ours",
      f"{IMP} {{w}}/u --force", 1, r"is not a tbdtrace trace", survive=("u/meta.json",),
      setup=("file:u/meta.json=not json",)),
    C("out-trace-no-force", "outputs", "import over an existing trace without --force",
      f"{IMP} {{w}}/t", 1, r"t: holds a trace already; pass --force",
      survive=("t/meta.json", "t/ops.parquet"), setup=("trace:t",)),
    C("out-trace-force", "outputs", "import --force over a trace the user added a file to",
      f"{IMP} {{w}}/t --force", 0, r"^wrote ", survive=("t/notes.txt",),
      setup=("trace:t", "file:t/notes.txt=my notes"),
      check=("source:t=kineto", "absent:t/host_samples.parquet")),
    C("out-trace-force-subdir", "outputs", "--force over a trace holding the user's folder",
      f"{IMP} {{w}}/t --force", 0, r"^wrote ", survive=("t/plots/a.png",),
      setup=("trace:t", "file:t/plots/a.png=png"), check=("source:t=kineto",)),
    C("out-force-name-clash", "outputs",
      "--force where the user put a file named like a table the old trace lacked",
      f"{IMP} {{w}}/t --force", 1, r"t/ops\.parquet: is not a file tbdtrace wrote",
      survive=("t/ops.parquet", "t/meta.json"), setup=("steps-trace:t", "file:t/ops.parquet=mine")),
    C("out-legacy-no-force", "outputs", "import over a marker-less trace of an older tbdtrace",
      f"{IMP} {{w}}/t", 1, r"holds a trace already", survive=("t/meta.json",),
      setup=("legacy:t",)),
    C("out-legacy-force", "outputs", "--force over a marker-less trace of an older tbdtrace",
      f"{IMP} {{w}}/t --force", 0, r"^wrote ", setup=("legacy:t",),
      check=("source:t=kineto", "marker-lists:t=meta.json")),
    C("out-legacy-plus-user", "outputs", "--force over meta.json + tables + a user file, no marker",
      f"{IMP} {{w}}/t --force", 1, r"is not a tbdtrace trace",
      survive=("t/meta.json", "t/notes.txt"), setup=("legacy:t", "file:t/notes.txt=x")),
    C("out-is-file", "outputs", "--out names an existing file",
      f"{IMP} {{w}}/f", 1, r"f: exists and is a file", survive=("f",), setup=("file:f=data",)),
    C("out-under-file", "outputs", "--out names a path under a file",
      f"{IMP} {{w}}/f/t", 1, r"f is a file, not a directory", survive=("f",),
      setup=("file:f=data",)),
    C("out-under-file-deep", "outputs", "--out names a path two levels under a file",
      f"{IMP} {{w}}/f/a/t", 1, r"f is a file, not a directory", survive=("f",),
      setup=("file:f=data",)),
    C("out-dot-empty", "outputs", "--out . in an empty working directory",
      f"{IMP} .", 0, r"^wrote ", setup=("dir:here",), cwd="here", check=("trace:here",)),
    C("out-dot-user", "outputs", "--out . in a working directory of the user's files",
      f"{IMP} .", 1, r"is not a tbdtrace trace", survive=("here/a.py",),
      setup=("file:here/a.py=print(1)",), cwd="here"),
    C("out-dot-trace", "outputs", "--out . in a trace directory, without --force",
      f"{IMP} .", 1, r"holds a trace already", survive=("t/meta.json",),
      setup=("trace:t",), cwd="t"),
    C("out-dot-trace-force", "outputs", "--out . --force in a trace directory with a user file",
      f"{IMP} . --force", 0, r"^wrote ", survive=("t/keep.txt",),
      setup=("trace:t", "file:t/keep.txt=k"), cwd="t", check=("source:t=kineto",)),
    C("out-relative", "outputs", "a relative --out from a sub-directory",
      f"{IMP} rel/t", 0, r"^wrote .*/sub/rel/t", setup=("dir:sub",), cwd="sub",
      check=("trace:sub/rel/t",)),
    C("out-trailing-slash", "outputs", "--out with a trailing slash",
      f"{IMP} {{w}}/t/", 0, r"^wrote ", check=("trace:t",)),
    C("out-dotdot", "outputs", "--out with .. in it",
      f"{IMP} {{w}}/a/../t", 0, r"^wrote ", setup=("dir:a",), check=("trace:t",)),
    C("out-link-to-empty", "outputs", "--out is a symbolic link to an empty directory",
      f"{IMP} {{w}}/l", 0, r"^wrote ", setup=("dir:real", "link:l=real"), check=("trace:real",)),
    C("out-dangling-link", "outputs", "--out is a dangling symbolic link",
      f"{IMP} {{w}}/l", 1, r"l: exists and is a file", setup=("link:l=nowhere",)),
    C("out-hidden-leftovers", "outputs", "an empty directory with a stale lock and staging dir",
      f"{IMP} {{w}}/e", 0, r"^wrote ",
      setup=("file:e/.tbdtrace.lock=99999", "dir:e/.tbdtrace-staging-old"), check=("trace:e",)),
    C("out-umask-027", "outputs", "a new trace directory under umask 027",
      f"{IMP} {{w}}/t", 0, r"^wrote ", setup=("umask:027",), check=("mode:t=750",)),
    C("out-umask-077", "outputs", "a new trace directory under umask 077",
      f"{IMP} {{w}}/t", 0, r"^wrote ", setup=("umask:077",), check=("mode:t=700",)),
    C("out-umask-002", "outputs", "a new trace directory under umask 002",
      f"{IMP} {{w}}/t", 0, r"^wrote ", setup=("umask:002",), check=("mode:t=775",)),
    C("out-long-name", "outputs", "--out whose name is over 255 bytes",
      f"{IMP} {{w}}/{{long}}", 1, r"is 300 bytes, over the 255 bytes"),
    C("out-long-middle", "outputs", "--out with a 300-byte directory in the middle",
      f"{IMP} {{w}}/{{long}}/t", 1, r"is 300 bytes, over the 255 bytes"),
    C("out-proc", "outputs", "--out under /proc (cannot be created)",
      f"{IMP} /proc/tbdtrace-no/t", 1, r"cannot create its parent directory"),
    C("capture-out-user-dir", "outputs", "capture into a user directory: refused before the run",
      "capture --out {w}/u -- {python} {w}/touch.py", 1, r"is not a tbdtrace trace",
      survive=("u/notes.txt",), setup=("file:u/notes.txt=n",), check=("absent:ran",)),
    C("capture-out-trace", "outputs",
      "capture over a trace without --force: refused before the run",
      "capture --out {w}/t -- {python} {w}/touch.py", 1, r"holds a trace already",
      survive=("t/meta.json", "t/ops.parquet"), setup=("trace:t",), check=("absent:ran",)),
    C("capture-out-under-file", "outputs", "capture under a file: refused before the run",
      "capture --out {w}/f/t -- {python} {w}/touch.py", 1, r"is a file, not a directory",
      survive=("f",), setup=("file:f=x",), check=("absent:ran",)),
    C("capture-out-long", "outputs", "capture with a 300-byte --out: refused before the run",
      "capture --out {w}/{long} -- {python} {w}/touch.py", 1, r"over the 255 bytes",
      check=("absent:ran",)),
    C("capture-missing-command", "os-errors", "capture of a command that does not exist",
      "capture --out {w}/t -- {w}/no-such-program", 1, r"no-such-program: cannot start",
      check=("absent:t",)),
    C("capture-not-executable", "os-errors", "capture of a file that is not executable",
      "capture --out {w}/t -- {w}/f", 1, r"f: cannot start \(Permission denied\)",
      survive=("f",), setup=("file:f=data",), check=("absent:t",)),
    C("capture-no-command", "outputs", "capture without a command (usage)",
      "capture --out {w}/t", 2, r"no command given", check=("absent:t",)),
    C("capture-bad-hz", "outputs", "capture --sample-hz 0 (usage)",
      "capture --sample-hz 0 --out {w}/t -- true", 2, r"argument --sample-hz: 0 is not above 0",
      check=("absent:t",)),
    C("import-no-args", "outputs", "import without --out (usage)", "import {profile}", 2,
      r"the following arguments are required: --out/-o"),
    C("unknown-option", "outputs", "an unknown option (usage)", "info --bogus x", 2,
      r"unrecognized arguments: --bogus"),
    C("recover-absent", "outputs", "recover a killed capture's spool into a new directory",
      "recover {w}/sp --out {w}/r", 0, r"^wrote .*/r from .*\(partial; [1-9]\d* steps\)",
      survive=("sp/steps.jsonl", "sp/capture.json"), setup=("spool:sp",),
      check=("trace:r",)),
    C("recover-over-trace", "outputs", "recover over a trace without --force",
      "recover {w}/sp --out {w}/t", 1, r"holds a trace already",
      survive=("t/meta.json", "sp/steps.jsonl"), setup=("spool:sp", "trace:t")),
    C("recover-force", "outputs", "recover --force over a trace with a user file",
      "recover {w}/sp --out {w}/t --force", 0, r"^wrote ",
      survive=("t/mine.txt", "sp/steps.jsonl"), setup=("spool:sp", "trace:t", "file:t/mine.txt=m"),
      check=("trace:t",)),
    C("recover-not-spool", "outputs", "recover of a directory that is not a spool",
      "recover {w}/d --out {w}/r", 1, r"d: not a capture spool", survive=("d/x.txt",),
      setup=("file:d/x.txt=x",), check=("absent:r",)),
    C("recover-missing", "os-errors", "recover of a path that does not exist",
      "recover {w}/nope --out {w}/r", 1, r"nope: not a directory", check=("absent:r",)),
    C("recover-busy-spool", "concurrency", "recover of a spool a running process still names",
      "recover {w}/sp --out {w}/r", 1, r"may still write this spool",
      survive=("sp/steps.jsonl",), setup=("spool:sp", "holder:sp"), check=("absent:r",)),
    # --- errors: one line -------------------------------------------------------------
    C("info-missing", "os-errors", "info on a path that does not exist", "info {w}/nope", 1,
      r"nope: not a trace directory"),
    C("info-plain-dir", "os-errors", "info on a directory without a trace",
      "info {w}/d", 1, r"d: no meta.json", setup=("file:d/x=1",)),
    C("info-profile", "os-errors", "info on a profiler file (read like report does)",
      "info {profile}", 0, ""),
    C("sql-profile", "os-errors", "sql on a profiler file", "sql {profile} "
      "SELECT~count(*)~FROM~ops", 0, ""),
    C("diff-profile", "os-errors", "diff of a trace and a profiler file",
      "diff {w}/t {profile}", 0, "", setup=("trace:t",)),
    C("report-corrupt-table", "os-errors",
      "report on a trace whose ops.parquet is cut in half: named, left out",
      "report {w}/t", 0, r"warning: .*ops\.parquet: [\d,]+ bytes, the trace's marker says",
      setup=("trace:t", "corrupt:t/ops.parquet")),
    C("report-corrupt-table-strict", "os-errors",
      "report --strict on a trace whose ops.parquet is cut in half: refused",
      "report {w}/t --strict", 1, r"ops\.parquet: [\d,]+ bytes.*--strict: the trace is refused",
      setup=("trace:t", "corrupt:t/ops.parquet")),
    C("sql-corrupt-table", "os-errors", "sql on a trace whose ops.parquet is cut in half",
      "sql {w}/t SELECT~count(*)~FROM~ops", 0, r"warning: .*ops\.parquet",
      setup=("trace:t", "corrupt:t/ops.parquet")),
    C("info-corrupt-meta", "os-errors", "info on a trace whose meta.json is cut",
      "info {w}/t", 1, r"meta\.json: invalid JSON", setup=("trace:t", "corrupt:t/meta.json")),
    C("diff-missing", "os-errors", "diff with a missing second trace",
      "diff {w}/t {w}/nope", 1, r"nope: not a trace directory", setup=("trace:t",)),
    C("import-missing-file", "os-errors", "import of a file that does not exist",
      "import {w}/nope.json --out {w}/t", 1, r"nope\.json", check=("absent:t",)),
    C("import-dir-as-file", "os-errors", "import of a directory given as FILE",
      "import {w}/d --out {w}/t", 1, r"d", setup=("dir:d",), check=("absent:t",)),
    C("info-dev-full", "os-errors", "info with stdout on /dev/full", "info {w}/t", 1,
      FULL_STDOUT, setup=("trace:t",), run="full"),
    C("report-dev-full", "os-errors", "report with stdout on /dev/full", "report {w}/t", 1,
      FULL_STDOUT, setup=("trace:t",), run="full"),
    C("sql-dev-full", "os-errors", "sql with stdout on /dev/full",
      "sql {w}/t SELECT~*~FROM~host_samples", 1, FULL_STDOUT, setup=("trace:t",), run="full"),
    C("info-json-dev-full", "os-errors", "info --format json with stdout on /dev/full",
      "info {w}/t --format json", 1, FULL_STDOUT, setup=("trace:t",), run="full"),
    C("sql-csv-pipe-head", "os-errors", "sql --format csv, 100k rows, into `head -1`",
      "sql {w}/t SELECT~*~FROM~range(100000) --format csv", 0, "", setup=("trace:t",),
      run="head"),
    C("sql-text-pipe-head", "os-errors", "sql (text table), 20k rows, into `head -1`",
      "sql {w}/t SELECT~*~FROM~range(20000)", 0, "", setup=("trace:t",), run="head"),
    C("sql-json-pipe-head", "os-errors", "sql --format json, 100k rows, into `head -1`",
      "sql {w}/t SELECT~*~FROM~range(100000) --format json", 0, "", setup=("trace:t",),
      run="head"),
    C("import-ro", "os-errors", "import into a read-only file system",
      f"{IMP} {{w}}/ro/t", 1, r"ro/t: (cannot create it|cannot write there) \(Read-only file "
      r"system|Permission denied\)", setup=("ro:ro",)),
    C("import-ro-existing", "os-errors", "import into an existing empty directory on a "
      "read-only file system", f"{IMP} {{w}}/ro", 1, r"ro: cannot write there",
      setup=("ro:ro",)),
    C("capture-ro", "os-errors", "capture into a read-only file system: refused before the run",
      "capture --out {w}/ro/t -- {python} {w}/touch.py", 1, r"ro/t: cannot",
      setup=("ro:ro",), check=("absent:ran",)),
    C("proc-import-ok", "outputs", "import in a process of its own (the real CLI path)",
      f"{IMP} {{w}}/t", 0, r"^wrote ", run="proc", check=("trace:t", "no-lock:t")),
    C("proc-import-user-dir", "outputs", "import into a user directory, own process",
      f"{IMP} {{w}}/u", 1, r"is not a tbdtrace trace", survive=("u/a",),
      setup=("file:u/a=1",), run="proc"),
    # --- full disk ----------------------------------------------------------------------
    C("full-import", "full-disk", "import onto a full file system: refused before writing",
      f"{IMP} {{w}}/full/t", 1, r"full/t: only 0\.0 MiB free", setup=("full:full",),
      check=("absent:full/t",)),
    C("full-capture", "full-disk", "capture onto a full file system: refused before the run",
      "capture --out {w}/full/t -- {python} {w}/touch.py", 1, r"only 0\.0 MiB free",
      setup=("full:full",), check=("absent:ran",)),
    C("tight-import", "full-disk", "import onto 64 KiB of free space, past the space check",
      f"{IMP} {{w}}/tight/t", 1,
      r"tight/t: cannot write the trace \(.*No space left on device; free some space",
      setup=("tight:tight", "min-free:0"), check=("absent:tight/t",)),
    C("tight-force-keeps-old", "full-disk",
      "import --force over a trace on a nearly full disk: the old trace and user files stay",
      f"{IMP} {{w}}/tight/t --force", 1, r"No space left on device",
      survive=("tight/t/meta.json", "tight/t/steps.parquet", "tight/t/notes.txt"),
      setup=("tight:tight", "steps-trace:tight/t", "file:tight/t/notes.txt=n", "min-free:0"),
      check=("trace:tight/t", "no-staging:tight/t")),
    # --- concurrency --------------------------------------------------------------------
    C("locked-import", "concurrency", "import while another process writes the same --out",
      f"{IMP} {{w}}/t", 1, r"t: another tbdtrace process \(pid \d+\) is writing this output",
      setup=("lock:t",)),
    C("locked-import-force", "concurrency", "import --force while another process writes it",
      f"{IMP} {{w}}/t --force", 1, r"another tbdtrace process", survive=("t/meta.json",),
      setup=("trace:t", "lock:t")),
    C("locked-capture", "concurrency", "capture while another process writes the same --out",
      "capture --out {w}/t -- {python} {w}/touch.py", 1, r"another tbdtrace process",
      setup=("lock:t",), check=("absent:ran",)),
    C("locked-recover", "concurrency", "recover while another process writes the same --out",
      "recover {w}/sp --out {w}/t", 1, r"another tbdtrace process", setup=("spool:sp", "lock:t")),
    C("lock-freed-after-failure", "concurrency",
      "a failed import (bad input) leaves the output free: no lock, no directory",
      "import {w}/nope.json --out {w}/t", 1, r"nope", check=("absent:t",)),
)
# fmt: on


@dataclass(frozen=True)
class Scenario:
    """A real capture (``tbdtrace capture --backend torch``) of a small PyTorch program
    (``WORKLOAD`` in the test: ``steps delay exit_code chdir fill``), stopped as ``action``
    says once ``trigger`` holds. ``rc`` None: tbdtrace itself is killed. Checks: ``steps>=N``,
    ``steps=N``, ``ops>0``, ``ops=0``, ``partial``, ``complete``, ``report`` (report reads
    it), ``host-samples``, ``no-spool``, ``spool-left``, ``child-gone``, ``quiet`` (no
    Kineto noise on stderr), ``log-has:TEXT`` (in the trace's capture.log),
    ``recovers`` (tbdtrace recover of the spool left gives the steps),
    ``foreign-spool-kept`` (another capture's spool in --out is left as it was),
    ``user-file-kept`` (the user's notes.txt in --out is as it was)."""

    id: str
    cls: str
    what: str
    workload: tuple[str, ...]
    trigger: str  # none | profiler (the profiler started) | steps:N (N steps recorded)
    action: str  # none | int | term | int-int | kill-child | term-child | kill-tbdtrace
    rc: int | None
    line: str
    check: tuple[str, ...] = ()
    out: str = "t"  # --out, relative to the scenario's directory (cwd: "run")
    mount: str = ""  # a tmpfs size for the output's file system ("" none)
    module: str = ""  # run this module (python -m) with ``workload`` as its arguments
    pre: str = ""  # foreign-spool: --out holds the spool another capture left;
    # old-trace: --out holds a trace (steps only) and the user's notes.txt;
    # sigint-ignored: tbdtrace starts with SIGINT ignored, as a shell's background job
    flags: tuple[str, ...] = ()  # more capture options
    # The id of an earlier scenario with the same command: its run is this one's too (one
    # capture for both; this scenario's expectations are further facts about that run).
    run: str = ""


LONG = ("1000", "0.2")
# fmt: off
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("base-hydra-chdir", "outputs",
             "a program that changes directory (as Hydra does) with a relative --out",
             ("3", "0", "0", "elsewhere"), "none", "none", 0, r"^wrote /.*/run/rel/t ",
             ("steps=3", "ops>0", "complete", "report", "no-spool", "host-samples"),
             out="rel/t"),
    Scenario("noise-quiet", "noise", "Kineto's USDT and gpuGetDeviceCount lines not shown",
             ("3", "0", "0", "elsewhere"), "none", "none", 0, r"^wrote ",
             ("quiet", "log-has:profiler_start"), out="rel/t", run="base-hydra-chdir"),
    Scenario("foreign-spool", "outputs",
             "capture into a directory holding another capture's leftover spool",
             ("2", "0"), "none", "none", 0, r"^wrote ",
             ("steps=2", "complete", "foreign-spool-kept"), pre="foreign-spool"),
    Scenario("capture-force", "outputs",
             "capture --force over a trace holding the user's notes: notes kept, trace new",
             ("2", "0"), "none", "none", 0, r"^wrote ",
             ("steps=2", "ops>0", "complete", "user-file-kept", "no-spool"),
             pre="old-trace", flags=("--force",)),
    Scenario("exit-code", "signals", "the command exits with 3: tbdtrace exits with 3",
             ("2", "0", "3"), "none", "none", 3, r"command exit code 3\)",
             ("steps=2", "complete", "ops>0")),
    Scenario("sigint", "signals", "SIGINT to tbdtrace after the first steps",
             LONG, "steps:3", "int", 130,
             r"^tbdtrace: partial trace: tbdtrace received SIGINT \(forwarded",
             ("steps>=3", "ops>0", "partial", "report", "no-spool", "host-samples")),
    Scenario("sigint-ignored-parent", "signals",
             "SIGINT to a tbdtrace started with SIGINT ignored (a script's background job)",
             LONG, "steps:3", "int", 130, r"partial trace: tbdtrace received SIGINT",
             ("steps>=3", "ops>0", "partial", "no-spool"), pre="sigint-ignored"),
    Scenario("sigterm", "signals", "SIGTERM to tbdtrace after the first steps",
             LONG, "steps:3", "term", 143, r"partial trace: tbdtrace received SIGTERM",
             ("steps>=3", "ops>0", "partial", "report", "no-spool", "host-samples")),
    Scenario("sigint-early", "signals", "SIGINT to tbdtrace as soon as the profiler started",
             LONG, "profiler", "int", 130, r"partial trace: tbdtrace received SIGINT",
             ("partial", "report", "no-spool", "host-samples")),
    Scenario("sigint-twice", "signals",
             "two SIGINTs to a program slow to stop: the second kills the command",
             ("1000", "0.2", "0", "-", "-", "slow-stop"), "steps:3", "int-int", 137,
             r"the second one killed it with SIGKILL",
             ("steps>=3", "partial", "report", "no-spool", "host-samples")),
    Scenario("kill-child", "signals", "the command is SIGKILLed (as by the OOM killer)",
             LONG, "steps:3", "kill-child", 137,
             r"partial trace: the command was killed by SIGKILL",
             ("steps>=3", "ops=0", "partial", "report", "no-spool", "host-samples")),
    Scenario("term-child", "signals", "the command gets SIGTERM from elsewhere",
             LONG, "steps:3", "term-child", 143, r"the command was killed by SIGTERM",
             ("steps>=3", "ops>0", "partial", "report", "no-spool")),
    Scenario("kill-tbdtrace", "signals",
             "tbdtrace is SIGKILLed: the command stops too and its spool stays for recover",
             LONG, "steps:3", "kill-tbdtrace", None, "",
             ("spool-left", "child-gone", "recovers")),
    Scenario("resnet50-ctrl-c", "signals",
             "Ctrl-C (SIGINT) during capture of workloads.pytorch.resnet50 --size tiny, "
             "after its first steps: a trace that report reads",
             ("--size", "tiny", "--steps", "100", "--warmup", "1", "--device", "cpu"),
             "steps:2", "int", 130, r"partial trace: tbdtrace received SIGINT",
             ("steps>=2", "ops>0", "partial", "report", "no-spool", "host-samples"),
             module="workloads.pytorch.resnet50"),
    Scenario("disk-fills", "full-disk",
             "the disk fills during the run: one line, the spool is kept and recovers",
             ("3", "0", "0", "-", "fill"), "none", "none", 1,
             r"No space left on device.*spool is kept at .*tbdtrace recover",
             ("spool-left", "recovers"), mount="20m"),
)
# fmt: on
