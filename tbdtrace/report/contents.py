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
