"""``tbdtrace merge OUT PART...``: join the per-node traces of a distributed job, their
clocks aligned on rank 0's (docs/DISTRIBUTED.md "Several machines")."""

from __future__ import annotations

import argparse
import sys

from tbdtrace.commands import _args


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "merge",
        help="join the per-node traces of a multi-node job into one trace",
        description="Join the trace directories that `tbdtrace capture` wrote on each node "
        "of a distributed job into one trace at OUT. Each node's times are put on rank 0's "
        "clock with the offset its ranks measured through the rendezvous store when "
        "init_process_group returned (meta.extra.nodes records it).",
    )
    _args.mark_output(
        p.add_argument("out", metavar="OUT", help="the merged trace directory (created)"),
        "trace",
    )
    p.add_argument("parts", nargs="+", metavar="PART", help="one capture directory per node")
    p.add_argument("--force", action="store_true", help="replace a trace already at OUT")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tbdtrace.collector import node_merge

    path, nodes, notes = node_merge.merge(args.out, args.parts, force=args.force)
    for note in notes:
        sys.stderr.write(f"tbdtrace merge: warning: {note}\n")
    ranks = sum(len(n.ranks) for n in nodes)
    print(f"{path}: {len(nodes)} node(s), {ranks} rank(s)")
    for n in nodes:
        print(
            f"  {n.path}: ranks {','.join(map(str, n.ranks))}, clock offset "
            f"{n.offset_ns} ns (+/- {n.error_bound_ns} ns)"
        )
    return 0
