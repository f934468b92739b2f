"""The analysis engine: what every pass shares, between the trace and the passes.

The window and the analysis context a pass reads through, the per-context cache, arrays
computed once (``shared_arrays``), grouping, intervals, joins, memory blocks, device
peaks, kernel names, op FLOPs and their formulas, and the declared pass outputs. The
engine imports storage (``tbdtrace.trace``, ``schema``, ``tablefile``) and nothing above.
"""
