"""The report's sections, in the order the JSON document and the text report show them.

A section is declared in its module with :func:`tbdtrace.report.section_api.section`
and is in the report when it is listed here: this list is the one place that decides
what the report contains and in which order.
"""

from __future__ import annotations

from tbdtrace.report import (
    cpu_section,
    flops_section,
    memory_section,
    passes_sections,
    ranks_section,
    sections,
    series_sections,
    window_section,
)
from tbdtrace.report.section_api import Section, section_of

SECTIONS: list[Section] = [
    section_of(compute)
    for compute in (
        sections.summary_section,
        sections.devices_section,
        sections.kernels_section,
        cpu_section.cpu_activity_section,
        passes_sections.steps_section,
        passes_sections.utilization_section,
        passes_sections.categories_section,
        passes_sections.hotspots_section,
        passes_sections.idle_section,
        passes_sections.memcpy_section,
        passes_sections.fp32_section,
        window_section.phases_section,
        series_sections.memory_timeline_section,
        series_sections.step_timeline_section,
        series_sections.collective_skew_section,
        memory_section.memory_section,
        ranks_section.ranks_section,
        flops_section.flops_section,  # after "fp32", whose figures it refers to
    )
]
