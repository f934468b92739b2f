"""The analysis passes: each module declares one output in ``engine/outputs.py`` and
exposes ``run(ctx, config=None) -> pyarrow.Table`` (``ctx``: an ``AnalysisContext`` or a
trace). Nothing else lives here; what passes share is in ``tbdtrace.analysis.engine``.

A pass is a pure function of its context: no I/O beyond reading the trace's tables, no
printing, no plotting. Rendering lives in ``tbdtrace.report``.
"""
