"""Memory over time: live bytes per category, event by event (the replay and the summary
live in ``engine/memory_replay.py``).

Input: the ``memory`` table (alloc/free events, level reserved or allocated, category).
Events are paired into blocks by :func:`tbdtrace.analysis.engine.memory_blocks.pair`; a free
without a matching alloc (the block predates the capture) is dropped, so no total ever
goes negative, and a block's free subtracts exactly what its alloc added. A row without a
category counts as ``other``.

Levels are never mixed: ``reserved`` (what the allocator took from the device, CUPTI) and
``allocated`` (tensors inside the allocator) each get their own timeline (:func:`timeline`:
the replay, summed over every device and process of that level). The summary
(:func:`summarize`) works per device and never sums devices: a device's level is the
allocator's own totals where the trace has them (PyTorch-profiler imports), aligned with
the replay, else the replay (see :mod:`._memory_devices`). Its headline numbers use
``allocated`` when the trace has it (it carries the categories), else ``reserved``.
"""

from __future__ import annotations

import pyarrow as pa

from tbdtrace.analysis.engine import memory_replay
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.engine.memory_replay import MemoryConfig, timeline

# Kept for code written before the summary moved to the engine (engine/memory_replay.py).
summarize = memory_replay.summarize
CATEGORY_COLUMNS = memory_replay.CATEGORY_COLUMNS


def run(ctx: Source, config: MemoryConfig | None = None) -> pa.Table:
    """The pass entry point: :func:`timeline`."""
    ctx = of(ctx)
    return timeline(ctx, config)
