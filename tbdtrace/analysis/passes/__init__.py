"""Analysis passes: each module exposes ``run(trace, config=None) -> pyarrow.Table``.

A pass is a pure function of a trace: no I/O beyond reading the trace's tables, no
printing, no plotting. Rendering lives in ``tbdtrace.report``.
"""
