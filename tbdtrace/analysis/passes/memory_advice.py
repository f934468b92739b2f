"""The memory peak by op or by module: the blocks live at the headline device's peak (the
memory summary's, in the context's window), grouped by the op or ``nn.Module`` that
allocated them; the rules are in ``engine/memory_advice.py`` (docs/METRICS.md, "Memory
advice"). The fragmentation and headroom figures are in the report's ``memory.advice``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tbdtrace.analysis.engine import memory_advice, memory_replay, outputs
from tbdtrace.analysis.engine.context import Source, of


@dataclass(frozen=True)
class MemoryAdviceConfig:
    by: str = "op"  # op | module


def run(ctx: Source, config: MemoryAdviceConfig | None = None) -> pa.Table:
    """One row per op (or module) with blocks live at the peak, largest first."""
    ctx = of(ctx)
    config = config or MemoryAdviceConfig()
    summary = memory_replay.summarize(ctx.whole, window=ctx.window)
    rows = memory_advice.peak_by(ctx.whole, summary, config.by)
    out = outputs.MEMORY_ADVICE
    if not rows:
        return out.empty_table()
    return pa.Table.from_pylist(
        [{"by": config.by, **r, "peak_ts_ns": summary["peak_ts_ns"]} for r in rows],
        schema=out.arrow_schema(),
    )
