"""``tbdtrace bench``: run TBD workloads under capture and tabulate the results.

:mod:`plan` turns the options into jobs (one per model x framework x batch size),
:mod:`capture` is the pluggable step that runs one job and leaves a trace,
:mod:`rows` computes a job's row of the TBD table from its trace, :mod:`table` writes the
table as markdown, CSV and JSON, and :mod:`runner` ties them together, one process per
workload.
"""

from tbdtrace.suite.plan import BenchConfig, Job, make_jobs
from tbdtrace.suite.rows import COLUMNS
from tbdtrace.suite.runner import run_jobs

__all__ = ["COLUMNS", "BenchConfig", "Job", "make_jobs", "run_jobs"]
