"""Opening a set of per-rank profiler files (a folder, a glob, several files) as one
multi-rank trace in memory, reporting each missing or unreadable file in one line while
the other ranks are still analysed."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    import pyarrow as pa

    from tbdtrace.trace import Trace

# Files a folder of per-rank traces is read for (Kineto writes *.pt.trace.json[.gz]).
PATTERNS = ("*.json", "*.json.gz")
_GLOB = re.compile(r"[*?\[]")


def _natural(p: Path) -> list[object]:
    """rank-2 before rank-10."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)]


@dataclass
class RankSet:
    files: list[Path] = field(default_factory=list)  # rank files and rank trace directories
    problems: list[str] = field(default_factory=list)  # one line each, for stderr

    @property
    def has_traces(self) -> bool:
        """True when some ranks are trace directories (``import --jobs/--workers``
        writes one per rank): those are read rank by rank."""
        return any(f.is_dir() for f in self.files)


def is_rank_set(args: list[str]) -> bool:
    """True when ``args`` name per-rank files rather than one trace or one file: several
    arguments, a glob, or a folder that is not a trace directory."""
    if len(args) > 1:
        return True
    p = Path(args[0])
    if p.is_dir():
        return not _is_trace_dir(p)
    return not p.exists() and bool(_GLOB.search(args[0]))


def _is_trace_dir(p: Path) -> bool:
    """A trace directory: its meta.json, or its marker (a trace being replaced, or whose
    replacement was interrupted, is still a trace, never a folder of rank files)."""
    from tbdtrace.outdir import MARKER

    return (p / "meta.json").is_file() or os.path.lexists(p / MARKER)


def expand(args: list[str]) -> RankSet:
    """The files named by ``args`` (folders read for PATTERNS, globs expanded), in
    natural order; each argument that names nothing becomes a problem line."""
    out = RankSet()
    for a in args:
        p = Path(a)
        if p.is_dir():
            if _is_trace_dir(p):
                raise TraceError(
                    f"{p}: a trace directory cannot be combined with other ranks; import "
                    "the profiler files together instead (tbdtrace import A B --out T)"
                )
            found = sorted(
                {
                    f
                    for pat in PATTERNS
                    for f in p.glob(pat)
                    if f.is_file() and not f.name.startswith(".")
                }
                | {d for d in p.iterdir() if d.is_dir() and _is_trace_dir(d)},
                key=_natural,
            )
            if not found:
                out.problems.append(
                    f"{p}: no profiler files (*.json, *.json.gz) or trace directories in "
                    "this folder"
                )
            out.files += found
        elif p.is_file():
            out.files.append(p)
        elif _GLOB.search(a):
            found = sorted((Path(x) for x in glob.glob(a) if Path(x).is_file()), key=_natural)
            if not found:
                out.problems.append(f"{a}: no file matches this pattern")
            out.files += found
        else:
            out.problems.append(f"{p}: no such rank file; it is left out of the report")
    return out


def _named(message: str, files: list[Path]) -> Path | None:
    """The file an importer's error line starts with (``PATH: what is wrong``)."""
    for f in files:
        if message.startswith(f"{f}:"):
            return f
    return None


def open_ranks(rs: RankSet) -> tuple[Trace, list[str]]:
    """Import ``rs.files`` in memory as one trace; a file whose import fails is left out
    and named in a problem line, and the others are imported again without it (one
    extra parse per broken file). Raises TraceError when no file can be read."""
    from tbdtrace import importers
    from tbdtrace import trace as trace_io

    files = list(rs.files)
    problems = list(rs.problems)
    while files:
        try:
            tables, meta = importers.import_files(files)
        except TraceError as e:
            bad = _named(str(e), files)
            if bad is None:
                raise
            problems.append(f"{e} (rank file left out; the other ranks are reported)")
            files.remove(bad)
            continue
        again = repeated_ranks(meta)
        if again:  # the policy of the rank-by-rank path (scaleout.rankwork.problems_of)
            problems += [line for _, line in again]
            files = [f for f in files if str(f) not in {src for src, _ in again}]
            continue
        problems += _missing_ranks(meta)
        base = files[0].parent if len({f.parent for f in files}) == 1 else Path(".")
        return trace_io.from_tables(tables, meta, base), problems
    raise TraceError(
        "no rank file could be read: " + "; ".join(problems) if problems else "no rank files"
    )


def repeated_ranks(meta: dict[str, object]) -> list[tuple[str, str]]:
    """(file, line) for each file whose rank an earlier file already holds: the import
    leaves it out, as the rank-by-rank path does, so no rank is counted twice."""
    extra = meta.get("extra")
    files = extra.get("files", []) if isinstance(extra, dict) else []
    seen: dict[int, str] = {}
    out = []
    for f in files:
        if not isinstance(f, dict) or not isinstance(f.get("rank"), int):
            continue
        r, src = f["rank"], str(f.get("file"))
        if r in seen:
            out.append(
                (
                    src,
                    f"{src}: rank {r} again (already read from {seen[r]}); left out: pass "
                    "each rank's file once",
                )
            )
        else:
            seen[r] = src
    return out


def _missing_ranks(meta: dict[str, object]) -> list[str]:
    """A line when the files' world size says ranks are absent."""
    extra = meta.get("extra")
    files = extra.get("files", []) if isinstance(extra, dict) else []
    sizes = {f.get("world_size") for f in files if isinstance(f, dict) and f.get("world_size")}
    ranks = meta.get("ranks") or []
    if len(sizes) != 1 or not isinstance(ranks, list):
        return []
    world = int(next(iter(sizes)))  # type: ignore[arg-type]
    absent = sorted(set(range(world)) - {int(r) for r in ranks})
    if not absent:
        return []
    shown = ", ".join(map(str, absent[:10])) + (", ..." if len(absent) > 10 else "")
    return [
        f"{len(ranks)} of {world} ranks present (world_size in the files); no file for "
        f"rank {shown}; the report covers the ranks present"
    ]


def one_rank(tr: Trace, rank: int) -> Trace:
    """The rows of ``rank`` of a multi-rank trace, as a trace in memory (tables without a
    rank column, such as ``devices``, kept whole). Raises TraceError when no row has it."""
    import pyarrow.compute as pc

    from tbdtrace import schema
    from tbdtrace import trace as trace_io

    tables = {}
    found: set[int] = set()
    for t in schema.TABLES:
        if not tr.has(t.name):
            continue
        tbl = tr.table(t.name)
        if "rank" in tbl.column_names:
            found.update(r for r in pc.unique(tbl.column("rank")).to_pylist() if r is not None)
            tbl = _compact(tbl.filter(pc.equal(tbl.column("rank"), rank)))
        tables[t.name] = tbl
    if rank not in found:
        have = ", ".join(map(str, sorted(found))) or "none"
        raise TraceError(f"{tr.path}: no rank {rank} in this trace (ranks: {have}); pick one")
    meta = {**tr.meta, "ranks": [rank]}
    return trace_io.from_tables(tables, meta, f"{tr.path} [rank {rank}]")


def _compact(tbl: pa.Table) -> pa.Table:
    """``tbl`` with each dictionary column's dictionary cut to the values its rows use:
    passes read a dictionary as the names present (another rank's kernel names would
    count as this rank's, with no rows)."""
    import pyarrow as pa

    for i, f in enumerate(tbl.schema):
        if pa.types.is_dictionary(f.type):
            col = tbl.column(i).cast(f.type.value_type).dictionary_encode()
            tbl = tbl.set_column(i, f.name, col.cast(f.type))
    return tbl
