"""HTA's side of the import benchmark: load a trace directory and compute the kernel
breakdown. Runs in the benchmark venv (``make bench-venv``), not the project's."""

import sys

from hta.trace_analysis import TraceAnalysis

analyzer = TraceAnalysis(trace_dir=sys.argv[1])
kernel_type_df, kernel_df = analyzer.get_gpu_kernel_breakdown(visualize=False)
print(kernel_type_df.shape, kernel_df.shape)
