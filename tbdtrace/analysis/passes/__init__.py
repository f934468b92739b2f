"""The analysis passes: each module declares one output in ``engine/outputs.py`` and
exposes ``run(ctx, config=None) -> pyarrow.Table`` (``ctx``: an ``AnalysisContext`` or a
trace; ``config``: the pass's config dataclass, or ``None`` for a pass without options).
Nothing else lives here; what passes share is in ``tbdtrace.analysis.engine``, and so are
the reductions of a pass's table to report figures (``engine/summaries.py``), the kernel
category vocabulary (``engine/categories.py``), the memory replay and its summary
(``engine/memory_replay.py``) and the step timeline's events (``engine/step_events.py``).

A pass is a pure function of its context: no I/O beyond reading the trace's tables, no
printing, no plotting. Rendering lives in ``tbdtrace.report``.

Code outside this package reaches a pass through its ``run`` and its config dataclass
(``*Config``), and through the names declared in :data:`EXPORTED` only;
``tests/analysis/test_pass_boundary.py`` reads every import of a pass module outside this
package and fails on an undeclared name and on a declared one nobody uses.
"""

# "module.name" -> who uses it outside the passes, and why it is not behind ``run``.
EXPORTED: dict[str, str] = {
    # The cross-rank reduce: per-rank parts, written per rank by the rank-by-rank runner
    # and reduced into the ranks section (report ranks, tbdtrace.scaleout).
    "ranks.per_rank": "one row of figures per rank",
    "ranks.step_rows": "step times per rank, for stragglers",
    "ranks.STEP_ROWS": "the schema of step_rows (an empty part)",
    "ranks.match_collectives": "collectives matched across ranks",
    "ranks.match_collective_rows": "the same from the parts' collective rows",
    "ranks.COLLECTIVE_COLUMNS": "the collective columns a part keeps",
    "ranks.Matched": "the matched collectives' type",
    "ranks.judge_stragglers": "straggler steps from the step rows, and the noise rule",
    "ranks.collectives": "collective skew and bandwidth from the matched collectives",
}
