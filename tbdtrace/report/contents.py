"""The report's sections, in the order the JSON document and the text report show them.

A section is declared in its module as a :class:`tbdtrace.report.section_api.Section`
(key, compute, render) and is in the report when it is listed here: this list is the one
place that decides what the report contains and in which order.
"""

from __future__ import annotations

from tbdtrace.report import (
    cpu_section,
    critical_path_section,
    flops_section,
    memory_section,
    passes_sections,
    ranks_section,
    roofline_section,
    sections,
    series_sections,
    window_section,
)
from tbdtrace.report.section_api import Section

SECTIONS: list[Section] = [
    sections.SUMMARY,
    sections.DEVICES,
    sections.KERNELS,
    cpu_section.CPU_ACTIVITY,
    passes_sections.STEPS,
    passes_sections.UTILIZATION,
    passes_sections.CATEGORIES,
    passes_sections.HOTSPOTS,
    passes_sections.IDLE,
    passes_sections.MEMCPY,
    passes_sections.FP32,
    window_section.PHASES,
    series_sections.MEMORY_TIMELINE,
    series_sections.STEP_TIMELINE,
    series_sections.COLLECTIVE_SKEW,
    memory_section.MEMORY,
    ranks_section.RANKS,
    flops_section.FLOPS,  # after "fp32", whose figures it refers to
    roofline_section.ROOFLINE,  # opt-in (report --roofline); refers to the flops peaks
    critical_path_section.CRITICAL_PATH,  # opt-in (report --critical-path)
]

# Cache entries of the report's contexts that no section after the one named reads:
# let go of once that section is done, so the later sections' peaks do not hold them
# (10M kernels: the cumulative busy lengths, 59 MB, and the launch times and merged
# intervals' opening rows, 0.1 GB). Values are pure functions of the rows: a section
# that does read one later computes it again, the same.
RELEASE_AFTER: dict[str, tuple[str, ...]] = {
    passes_sections.UTILIZATION.key: ("shared_arrays.merged_cum",),
    passes_sections.IDLE.key: ("shared_arrays.launch_times", "shared_arrays.merged_first"),
}

# Sections that read the ops table's row-sized columns (times, names, thread groups):
# computed first, in this order, the document keeping report order;
# then the window lets go of its ops columns, of what its cache derived from them and of
# the entries of OPS_DERIVED, before the other sections run (29M ops: ~0.8 GiB not held
# through the kernel sections, and not held while those sections' own arrays are made).
# Hotspots first: the attribution's arrays are made before the busy intervals that the
# others read are (10M kernels: 0.15 GB less at its peak).
OPS_READERS: tuple[str, ...] = (
    passes_sections.HOTSPOTS.key,
    cpu_section.CPU_ACTIVITY.key,
    passes_sections.STEPS.key,
    passes_sections.FP32.key,
    memory_section.MEMORY.key,
    flops_section.FLOPS.key,
    roofline_section.ROOFLINE.key,
    critical_path_section.CRITICAL_PATH.key,
)
OPS_DERIVED = ("op_flops.counts", "flops.op_precisions", "flops.kernels_in")
