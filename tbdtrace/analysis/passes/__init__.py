"""The analysis passes: each module declares one output in ``engine/outputs.py`` and
exposes ``run(ctx, config=None) -> pyarrow.Table`` (``ctx``: an ``AnalysisContext`` or a
trace; ``config``: the pass's config dataclass, or ``None`` for a pass without options).
Nothing else lives here; what passes share is in ``tbdtrace.analysis.engine``.

A pass is a pure function of its context: no I/O beyond reading the trace's tables, no
printing, no plotting. Rendering lives in ``tbdtrace.report``.

Code outside this package reaches a pass through its ``run`` and its config dataclass
(``*Config``), and through the names declared in :data:`EXPORTED` only;
``tests/analysis/test_pass_boundary.py`` reads every import of a pass module outside this
package and fails on an undeclared name and on a declared one nobody uses.
"""

# "module.name" -> who uses it outside the passes, and why it is not behind ``run``.
EXPORTED: dict[str, str] = {
    # The category vocabulary and the per-kernel classification.
    "categories.CATEGORIES": "the category names, in order (diff, its gate, the exporter)",
    "categories.kernel_categories": "a category per kernel row (the timeline exporter)",
    "categories.name_categories": "kernel name -> category (diff's per-kernel rows)",
    # Reductions of a pass's table to the report's figures.
    "collective_skew.summarize": "per collective name (report collective_skew)",
    "idle.summarize": "idle totals per rank (report idle)",
    "memory.summarize": "peaks and levels (report memory, diff's memory peaks)",
    "steps.summarize": "step statistics (report steps)",
    "steps.by_rank": "step statistics per rank (report steps, diff)",
    "summary.by_rank": "device figures per rank (report summary, diff)",
    "utilization.cpu": "CPU utilization from host samples (report utilization)",
    "memory.timeline": "the replayed memory events (the timeline exporter's counters)",
    "step_timeline.events": "the chosen step's events and their count before the cut",
    "step_timeline.windows": "the chosen step's window per rank (report step_timeline)",
    # The cross-rank reduce: per-rank parts, written per rank by the rank-by-rank runner
    # and reduced into the ranks section (report ranks, tbdtrace.scaleout).
    "ranks.per_rank": "one row of figures per rank",
    "ranks.step_rows": "step times per rank, for stragglers",
    "ranks.STEP_ROWS": "the schema of step_rows (an empty part)",
    "ranks.match_collectives": "collectives matched across ranks",
    "ranks.match_collective_rows": "the same from the parts' collective rows",
    "ranks.COLLECTIVE_COLUMNS": "the collective columns a part keeps",
    "ranks.Matched": "the matched collectives' type",
    "ranks.stragglers": "straggler steps from the step rows",
    "ranks.collectives": "collective skew and bandwidth from the matched collectives",
}
