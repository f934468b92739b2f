"""``tbdtrace merge OUT PART...``: one trace from the per-node parts of a distributed job.

On a cluster each node runs ``tbdtrace capture`` around its own ranks and writes its own
trace directory (a *part*). Each captured rank measured its clock's offset to rank 0's at
start (:mod:`.clock`) and recorded it in its part's ``meta.extra.parts[].clock``. The merge:

* checks the parts: trace directories of captures with ranks, one world size, no rank in
  two parts, every part with a known clock offset (bad input: one line naming the part);
* takes each part's *node offset*: 0 for the part holding rank 0, else the offset of the
  part's rank whose measurement has the smallest error bound (the ranks of a part share
  the node's clock);
* subtracts it from every time column of the part's tables (rank 0's clock becomes the
  trace clock) and concatenates the parts' tables;
* records what it did in ``meta.extra.nodes`` (per part: path, host, ranks, offset,
  error bound, the rank that measured it) and ``meta.extra.clock_alignment``.

Ranks missing from every part (a node whose part was not given) are reported as a note;
the merge still writes what it has.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import output_policy, schema, trace
from tbdtrace.collector import clock
from tbdtrace.errors import TraceError


@dataclass(frozen=True)
class Node:
    """One part and how its clock is put on rank 0's."""

    path: Path
    tr: trace.Trace
    ranks: tuple[int, ...]  # the ranks in this part
    world_size: int | None
    offset_ns: int  # this node's clock minus rank 0's (subtracted from its times)
    error_bound_ns: int  # half the round trip of the measurement used
    measured_by: int | None  # the rank whose measurement is used (None: holds rank 0)

    def describe(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "host": self.tr.meta.get("host"),
            "ranks": list(self.ranks),
            "world_size": self.world_size,
            "offset_ns": self.offset_ns,
            "error_bound_ns": self.error_bound_ns,
            "measured_by_rank": self.measured_by,
        }


def _ranked_parts(path: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    extra = meta.get("extra") or {}
    parts = [p for p in extra.get("parts") or [] if p.get("rank") is not None]
    if not parts or not meta.get("ranks"):
        raise TraceError(
            f"{path}: has no ranks; merge joins the per-node traces of one distributed job "
            "(each captured with `tbdtrace capture --backend torch` around its node's ranks)"
        )
    return parts


def read_node(path: str | os.PathLike[str]) -> Node:
    """Open one part and find its node offset. Raises TraceError (one line) for bad input."""
    p = Path(os.path.abspath(os.fspath(path)))
    if not p.is_dir():
        raise TraceError(f"{p}: no such trace directory; give the per-node capture directories")
    tr = trace.open(p)  # raises a one-line TraceError for a broken trace
    parts = _ranked_parts(p, tr.meta)
    ranks = tuple(sorted({int(x["rank"]) for x in parts}))
    worlds = {int(x["world_size"]) for x in parts if x.get("world_size") is not None}
    if len(worlds) > 1:
        raise TraceError(f"{p}: its ranks disagree on the world size ({sorted(worlds)})")
    world = worlds.pop() if worlds else None
    if 0 in ranks:
        return Node(p, tr, ranks, world, 0, 0, None)
    known = [
        x
        for x in parts
        if isinstance(x.get("clock"), dict) and x["clock"].get("offset_ns") is not None
    ]
    if not known:
        why = next(
            (x["clock"]["error"] for x in parts if (x.get("clock") or {}).get("error")),
            "no rank of it recorded one",
        )
        raise TraceError(
            f"{p}: no clock offset to rank 0 ({why}); capture each node with this tbdtrace "
            "version (ranks measure it when init_process_group returns)"
        )
    best = min(known, key=lambda x: x["clock"]["error_bound_ns"])
    c = best["clock"]
    return Node(p, tr, ranks, world, int(c["offset_ns"]), int(c["error_bound_ns"]), best["rank"])


def check_nodes(nodes: Sequence[Node]) -> list[str]:
    """Raise TraceError for parts that cannot be one job; return notes on missing ranks."""
    owner: dict[int, Path] = {}
    for n in nodes:
        for r in n.ranks:
            if r in owner:
                raise TraceError(
                    f"{n.path}: rank {r} is also in {owner[r]}; give each node's part once"
                )
            owner[r] = n.path
    worlds = {n.world_size for n in nodes if n.world_size is not None}
    if len(worlds) > 1:
        raise TraceError(
            "the parts come from jobs of different world sizes ("
            + ", ".join(f"{n.path}: {n.world_size}" for n in nodes)
            + "); merge the parts of one job"
        )
    notes = []
    if 0 not in owner:
        raise TraceError(
            "no part holds rank 0, whose clock the others are measured against; "
            "add rank 0's node's part"
        )
    if worlds:
        missing = sorted(set(range(worlds.pop())) - set(owner))
        if missing:
            notes.append(
                f"ranks {', '.join(map(str, missing))} are in no part (their node's part "
                "was not given); the merged trace holds the others"
            )
    return notes


def _tables(n: Node) -> dict[str, pa.Table]:
    out: dict[str, Any] = {
        t.name: n.tr.table(t.name, cache=False) for t in schema.TABLES if n.tr.has(t.name)
    }
    clock.shift_tables(out, -n.offset_ns)
    return out


def _concat(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables, promote_options="default").unify_dictionaries()


def merged_meta(nodes: Sequence[Node], notes: list[str]) -> dict[str, Any]:
    """The merged trace's meta: the first part's, with ranks, parts and nodes of all."""
    meta: dict[str, Any] = dict(nodes[0].tr.meta)
    extra: dict[str, Any] = dict(meta.get("extra") or {})
    ranks = sorted(r for n in nodes for r in n.ranks)
    parts = []
    for i, n in enumerate(nodes):
        for x in (n.tr.meta.get("extra") or {}).get("parts") or []:
            parts.append({**x, "node": i})
    world = next((n.world_size for n in nodes if n.world_size is not None), None)
    extra["parts"] = parts
    extra["nodes"] = [n.describe() for n in nodes]
    extra["clock_alignment"] = {
        "method": clock.METHOD,
        "reference_rank": 0,
        "how": "each part's times minus its node's offset (the measurement with the "
        "smallest error bound among its ranks)",
    }
    extra["distributed"] = {
        "ranks": ranks,
        "world_size": world,
        "nodes": len(nodes),
        "not_ranks": [
            p
            for n in nodes
            for p in ((n.tr.meta.get("extra") or {}).get("distributed") or {}).get("not_ranks", [])
        ],
    }
    if notes:
        extra["merge_notes"] = notes
    starts = [
        n.tr.meta["start_time_ns"] - n.offset_ns
        for n in nodes
        if n.tr.meta.get("start_time_ns") is not None
    ]
    meta.update(
        ranks=ranks,
        extra=extra,
        host=None,
        start_time_ns=min(starts) if starts else None,
        partial=any(bool(n.tr.meta.get("partial")) for n in nodes),
    )
    meta.pop("schema_version", None)
    return meta


def merge(
    out: str | os.PathLike[str], parts: Sequence[str | os.PathLike[str]], force: bool = False
) -> tuple[Path, list[Node], list[str]]:
    """Write the merged trace of ``parts`` to ``out``; returns (path, nodes, notes)."""
    nodes = [read_node(p) for p in parts]
    target = Path(os.path.abspath(os.fspath(out)))
    for n in nodes:
        if n.path == target:
            raise TraceError(f"{target}: is one of the parts; merge into a new directory")
    notes = check_nodes(nodes)
    tables: dict[str, list[pa.Table]] = {}
    for n in nodes:
        for name, t in _tables(n).items():
            tables.setdefault(name, []).append(t)
    joined = {name: _concat(ts) for name, ts in tables.items()}
    meta = merged_meta(nodes, notes)
    with output_policy.trace_target(target, force, parts) as claimed:
        path = trace.write(claimed.path, joined, meta)
    return path, nodes, notes
