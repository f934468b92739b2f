"""One measured step's device activity, event by event: the report's step timeline.

The step shown is the measured step of median duration on the lowest rank (the typical
step, not the fastest or a slow outlier); on every other rank the step with the same
number is taken. Events are the kernels, memory copies and memory sets of that rank that
overlap the step's window, clipped to it. A trace without steps has no step timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tbdtrace.analysis.engine import outputs, step_events
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.passes import steps as steps_pass

SCHEMA = outputs.STEP_TIMELINE.arrow_schema()  # declared in analysis/engine/outputs.py


@dataclass(frozen=True)
class StepTimelineConfig:
    # Events kept: beyond this the longest are kept, and the rest only counted.
    max_events: int = 4000
    steps: steps_pass.StepsConfig | None = None


def windows(ctx: Source, config: StepTimelineConfig | None = None) -> pa.Table:
    """Windows of the chosen step: rank, step, start_ns, end_ns (one row per rank)."""
    cfg = config or StepTimelineConfig()
    return step_events.windows(steps_pass.run(of(ctx), cfg.steps))


def run(ctx: Source, config: StepTimelineConfig | None = None) -> pa.Table:
    """Events of the chosen step, longest first when more than ``max_events``, else in
    (rank, device, stream, start) order.

    Columns: rank; device_type, device_id, stream_id (where it ran); kind (kernel,
    memcpy, memset); category (tbdtrace.analysis.passes.categories; memcpy/memset for copies and
    sets); offset_ns (start minus the window's start on that rank, clipped at 0, ns);
    duration_ns (the part inside the window, ns).
    """
    ctx = of(ctx)
    return events(ctx, config or StepTimelineConfig())[0]


def events(ctx: Source, cfg: StepTimelineConfig) -> tuple[pa.Table, int]:
    """(:func:`run`'s table, the number of events overlapping the windows before the cut)."""
    ctx = of(ctx)
    return step_events.events(ctx, steps_pass.run(ctx, cfg.steps), cfg.max_events)
