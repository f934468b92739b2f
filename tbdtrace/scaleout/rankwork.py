"""Per-rank tasks and the cross-rank reduce.

A task takes one rank's input (a profiler file, or a trace directory that
``tbdtrace import --jobs/--workers`` wrote) and writes that rank's parts to its own
folder of the work directory: ``per_rank.parquet`` (:func:`ranks.per_rank`),
``steps.parquet`` (:func:`ranks.step_rows`), ``collectives.parquet`` (the columns of
:data:`ranks.COLLECTIVE_COLUMNS`) and, when asked, the rank's whole trace directory
(``trace/``, for ``sql`` and ``import``). It returns only a small :class:`RankPart`.

The reduce reads the parts, never a rank's raw tables: per rank one row, one row per step
and its collectives (about 1% of its kernels in training traces), so the driver's memory
does not grow with the kernels of the ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.errors import TraceError

PARTS = ("per_rank", "steps", "collectives")
TRACE_DIR = "trace"


@dataclass(frozen=True)
class RankPart:
    """What a task returns: where its parts are, or why it has none."""

    index: int  # position of the input in the set (the rank of a file without one)
    source: str  # the rank file or trace directory read
    folder: str | None  # its parts in the work directory; None when it failed
    ranks: tuple[int, ...] = ()  # ranks in the input (distributedInfo, else ``index``)
    world_size: int | None = None  # from the file's distributedInfo
    problem: str | None = None  # one line, when the input could not be used
    skipped_events: dict[str, int] = field(default_factory=dict)
    trace_dir: str | None = None  # the rank's trace directory (its input, or written)


def part_folder(work_dir: Path, index: int) -> Path:
    return work_dir / f"input-{index:05d}"


def analyse_rank(
    index: int, source: str, work_dir: str, keep_trace: bool = False, window: Any = None
) -> RankPart:
    """The task: read ``source`` and write its parts under ``work_dir``; ``window`` (a
    :class:`tbdtrace.analysis.engine.window.WindowSpec`, default the measured steps) is resolved
    on the rank's own steps, as the report does per rank. An input that cannot be read
    gives a RankPart with ``problem`` (its one-line error), not an exception, so one bad
    rank file never stops the others."""
    from tbdtrace.analysis.engine import context
    from tbdtrace.analysis.engine import window as window_pass

    out = part_folder(Path(work_dir), index)
    try:
        tr, meta, kept = _open(index, Path(source), out / TRACE_DIR if keep_trace else None)
        out.mkdir(parents=True, exist_ok=True)
        for name in PARTS:  # an earlier run's parts in a kept --work-dir
            (out / f"{name}.parquet").unlink(missing_ok=True)
        whole = context.of(tr)
        view = whole.windowed(window_pass.resolve(whole, window))
        ranks = _write_parts(view, out)
    except TraceError as e:
        return RankPart(index, source, None, problem=str(e))
    except OSError as e:
        from tbdtrace import outdir

        return RankPart(index, source, None, problem=f"{source}: {outdir.describe_os_error(e)}")
    files = (meta.get("extra") or {}).get("files") or [{}]
    world = files[0].get("world_size") if isinstance(files[0], dict) else None
    return RankPart(
        index,
        source,
        str(out),
        tuple(ranks),
        int(world) if world else None,
        skipped_events=dict(meta.get("skipped_events") or {}),
        trace_dir=None if kept is None else str(kept),
    )


def _open(index: int, source: Path, keep: Path | None) -> tuple[Any, dict[str, Any], Path | None]:
    """The rank's trace, its meta, and with ``keep`` its trace directory: ``source``
    when it is one, else the import written to ``keep``."""
    from tbdtrace import importers, schema
    from tbdtrace import trace as trace_io

    if (source / trace_io.META_FILE).is_file():
        tr = trace_io.open(source)
        version = tr.meta.get("schema_version")
        if keep is not None and version != schema.SCHEMA_VERSION:
            raise TraceError(
                f"{source}: schema version {version}, stored in files the rank set's SQL "
                f"does not read; run tbdtrace upgrade {source} first"
            )
        return tr, dict(tr.meta), source if keep is not None else None
    tables, meta = importers.import_files([source])
    _fill_rank(tables, index)
    if keep is not None:
        return trace_io.open(trace_io.write(keep, tables, meta)), meta, keep
    return trace_io.from_tables(tables, meta, source.parent), meta, None


def _fill_rank(tables: dict[str, Any], rank: int) -> None:
    """A file without distributedInfo is the rank of its position in the set (as when
    the files are imported together)."""
    from tbdtrace import schema

    for name, cols in tables.items():
        decl = schema.TABLES_BY_NAME.get(name)
        if decl is None or "rank" not in decl.column_names or isinstance(cols, pa.Table):
            continue
        n = max((len(v) for v in cols.values()), default=0)
        have = cols.get("rank")
        if have is None or have.null_count == len(have):
            cols["rank"] = pa.array(np.full(n, rank, np.int32), pa.int32())


def _write_parts(tr: Any, out: Path) -> list[int]:
    import pyarrow.parquet as pq

    from tbdtrace.analysis.passes import ranks

    rows = ranks.per_rank(tr)
    pq.write_table(pa.Table.from_pylist(rows), out / "per_rank.parquet")
    pq.write_table(ranks.step_rows(tr), out / "steps.parquet")
    if tr.has("collectives") and tr.num_rows("collectives"):
        coll = tr.table("collectives", list(ranks.COLLECTIVE_COLUMNS))
        pq.write_table(coll, out / "collectives.parquet")
    return [int(r["rank"]) for r in rows]


def map_ranks(
    ex: Any,
    sources: list[str],
    work_dir: Path,
    keep_trace: bool = False,
    window: Any = None,
    on_done: Any = None,
) -> list[RankPart]:
    """Run :func:`analyse_rank` on every source through the executor ``ex`` (any
    ``concurrent.futures.Executor``); results in input order; ``on_done()`` is called as
    each task ends (from the executor's thread: a progress display). Raises TraceError
    when the driver cannot see what the workers wrote."""
    futures = [
        ex.submit(analyse_rank, i, s, str(work_dir), keep_trace, window)
        for i, s in enumerate(sources)
    ]
    if on_done is not None:
        for f in futures:
            f.add_done_callback(lambda _f: on_done())
    parts = [f.result() for f in futures]
    for p in parts:
        if p.folder is not None and not Path(p.folder).is_dir():
            raise TraceError(
                f"{p.folder}: written by a worker but not found here; pass --work-dir on "
                "storage shared by the workers and this machine"
            )
    return parts


def problems_of(parts: list[RankPart]) -> tuple[list[RankPart], list[str]]:
    """The usable parts (a rank read twice is kept once, from its first input) and one
    line per input left out or rank absent."""
    lines: list[str] = []
    ok: list[RankPart] = []
    seen: dict[int, str] = {}
    for p in parts:
        if p.problem is not None:
            lines.append(f"{p.problem} (rank file left out; the other ranks are reported)")
            continue
        dup = [r for r in p.ranks if r in seen]
        if dup:
            lines.append(
                f"{p.source}: rank {dup[0]} again (already read from {seen[dup[0]]}); "
                "left out: pass each rank's file once"
            )
            continue
        seen.update(dict.fromkeys(p.ranks, p.source))
        ok.append(p)
    sizes = {p.world_size for p in ok if p.world_size}
    if len(sizes) == 1:
        world = sizes.pop()
        absent = sorted(set(range(world)) - set(seen))
        if absent:
            shown = ", ".join(map(str, absent[:10])) + (", ..." if len(absent) > 10 else "")
            lines.append(
                f"{len(seen)} of {world} ranks present (world_size in the files); no file "
                f"for rank {shown}; the report covers the ranks present"
            )
    return ok, lines


def ranks_report(parts: list[RankPart]) -> dict[str, Any] | None:
    """The ``ranks`` report section reduced from the parts (None below two ranks): the
    same document as the section of the ranks imported as one trace."""
    import pyarrow.parquet as pq

    from tbdtrace.analysis.passes import ranks
    from tbdtrace.report import ranks_section

    rows: list[dict[str, Any]] = []
    steps, coll = [], []
    for p in parts:
        assert p.folder is not None
        d = Path(p.folder)
        rows += pq.read_table(d / "per_rank.parquet").to_pylist()
        steps.append(pq.read_table(d / "steps.parquet"))
        if (d / "collectives.parquet").is_file():
            coll.append(pq.read_table(d / "collectives.parquet"))
    if len(rows) < 2:
        return None
    rows.sort(key=lambda r: r["rank"])
    step_rows = pa.concat_tables(steps) if steps else ranks.STEP_ROWS.empty_table()
    matched = (
        ranks.match_collective_rows(pa.concat_tables(coll, promote_options="permissive"))
        if coll
        else None
    )
    return ranks_section.from_parts(rows, step_rows, matched)


def rank_datasets(parts: list[RankPart]) -> dict[str, Any]:
    """Per schema table, one ``pyarrow.dataset`` over the ranks' Parquet files (each
    rank's trace directory), which DuckDB scans file by file; an empty table where no
    rank has the table."""
    import pyarrow.dataset as ds

    from tbdtrace import schema

    out: dict[str, Any] = {}
    for t in schema.TABLES:
        files = [
            f
            for p in parts
            if p.trace_dir is not None
            for f in [Path(p.trace_dir) / f"{t.name}.parquet"]
            if f.is_file()
        ]
        want = t.arrow_schema()
        out[t.name] = (
            ds.dataset([str(f) for f in files], schema=want, format="parquet")
            if files
            else want.empty_table()
        )
    return out
