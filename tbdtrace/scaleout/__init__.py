"""Per-rank analysis of many-rank trace sets as tasks, on a local process pool or a Dask
cluster (docs/DISTRIBUTED.md, "Analysis on a Dask cluster").

:mod:`executors` opens the executor (one ``concurrent.futures`` interface for all three);
:mod:`rankwork` holds the per-rank task (import one rank file, write its parts as Parquet
in a work directory) and the cross-rank reduce over those parts.
"""

from tbdtrace.scaleout.executors import ExecutorSpec, open_executor
from tbdtrace.scaleout.rankwork import RankPart, map_ranks, ranks_report

__all__ = ["ExecutorSpec", "RankPart", "map_ranks", "open_executor", "ranks_report"]
