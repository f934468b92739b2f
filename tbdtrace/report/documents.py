"""The documents commands emit (:func:`tbdtrace.report.emit.emit`): each knows its JSON,
its tables (CSV) and its text; the rendering itself lives in the view modules.

* :class:`ReportDoc`: ``report`` (one trace, or ranks imported together), and
  :func:`rank_by_rank` for the report reduced from per-rank tasks;
* :class:`DiffDoc`: ``diff``; :class:`HotspotsDoc`: ``hotspots``;
* :class:`SqlDoc`: a ``sql`` result; :class:`InfoDoc`: ``info``.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable
from typing import Any

from tbdtrace.report import csvout, tabular
from tbdtrace.report.emit import UnknownSection, json_text
from tbdtrace.report.section_api import ReportOptions
from tbdtrace.report.tabular import Tab
from tbdtrace.report.textui import Console


class _Doc:
    """Defaults: JSON of the whole document or one section of it, tables by shape."""

    prog = ""
    formats: tuple[str, ...] = ("text", "json", "csv")
    text_width = 160
    one_table = False

    def __init__(self, data: Any):
        self.data = data

    def json_value(self, section: str | None) -> Any:
        if section is None:
            return self.data
        if section not in self.data:
            raise UnknownSection(section, list(self.data))
        return self.data[section]

    def json_text(self, value: Any) -> str:
        return json_text(value)

    def tables(self) -> list[Tab]:
        return tabular.all_tables(self.data)

    def csv_text(self, tab: Tab, raw: bool) -> str:
        out = io.StringIO()
        csvout.write(tab, out, raw=raw)
        return out.getvalue()

    def render_text(self, console: Console) -> None:
        raise NotImplementedError


class ReportDoc(_Doc):
    """The report document (:func:`tbdtrace.report.build`) and the options its text uses."""

    prog = "report"
    formats: tuple[str, ...] = ("text", "json", "csv", "html", "xlsx")

    def __init__(self, data: dict[str, Any], opts: ReportOptions):
        super().__init__(data)
        self.opts = opts

    def render_text(self, console: Console) -> None:
        from tbdtrace.report.text import render

        render(self.data, self.opts, console)

    def render_html(self) -> str:
        from tbdtrace.report import html

        return html.render(self.data)


def rank_by_rank(
    parts: Iterable[Any],
    section: dict[str, Any] | None,
    paths: list[str],
    win: Any,
    opts: ReportOptions,
) -> ReportDoc:
    """The report of per-rank tasks (:class:`tbdtrace.scaleout.RankPart`, reduced to the
    ``ranks`` ``section``): the trace block says which inputs, ranks and window, and the
    events every rank's import skipped."""
    parts = list(parts)
    skipped: dict[str, int] = {}
    for p in parts:
        for k, v in p.skipped_events.items():
            skipped[k] = skipped.get(k, 0) + v
    data = {
        "trace": {
            "path": " ".join(paths),
            "source": "rank by rank",
            "ranks": sum(len(p.ranks) for p in parts),
            "skipped_events": skipped,
            # resolved on each rank's own steps, as the one-process report does
            "window": win.name,
        },
        "ranks": section,
    }
    return ReportDoc(data, dataclasses.replace(opts, covers=f"{win.name} window of each rank"))


class DiffDoc(_Doc):
    """A comparison (:func:`tbdtrace.report.diff_view.document`): its JSON is the
    document, a section and the CSV come from its flat tables; Markdown (a CI summary,
    ``top`` rows per table), an HTML page and a workbook (a sheet per flat table)."""

    prog = "diff"
    formats: tuple[str, ...] = ("text", "json", "csv", "markdown", "html", "xlsx")

    def __init__(self, data: dict[str, Any], top: int = 5):
        super().__init__(data)
        self.top = top

    def render_markdown(self) -> str:
        from tbdtrace.report import diff_view

        return diff_view.markdown(self.data, top=self.top)

    def render_html(self) -> str:
        from tbdtrace.report import diff_view

        return diff_view.render_html(self.data)

    def json_value(self, section: str | None) -> Any:
        if section is None:
            return self.data
        return _Doc(self._flat()).json_value(section)

    def _flat(self) -> dict[str, Any]:
        from tbdtrace.report import diff_view

        return diff_view.tables(self.data)

    def tables(self) -> list[Tab]:
        return tabular.all_tables(self._flat())

    def render_text(self, console: Console) -> None:
        from tbdtrace.report import diff_view

        diff_view.render_text(self.data, console)


class HotspotsDoc(_Doc):
    """The top rows of ``hotspots`` (:func:`tbdtrace.report.hotspots_view.document`); its
    CSV is the one table of rows."""

    prog = "hotspots"
    text_width = 200
    one_table = True

    def __init__(self, data: dict[str, Any], by: str, source: str):
        super().__init__(data)
        self.by, self.source = by, source

    def tables(self) -> list[Tab]:
        return tabular.tables("hotspots", self.data["rows"])[:1]

    def render_text(self, console: Console) -> None:
        from tbdtrace.report import hotspots_view

        hotspots_view.render_text(self.data, self.by, self.source, console)


class SqlDoc(_Doc):
    """A query's result (an Arrow table): records as JSON (values JSON cannot hold as
    text), CSV with a header row, a text table, or the table itself as Parquet."""

    prog = "sql"
    formats: tuple[str, ...] = ("text", "json", "csv", "parquet")
    one_table = True

    def __init__(self, result: Any):
        from tbdtrace.report import sql_view

        super().__init__(None)
        self.arrow = result
        self._records = sql_view.records

    def json_value(self, section: str | None) -> Any:
        return self._records(self.arrow)

    def json_text(self, value: Any) -> str:
        return json_text(value, default=str)

    def tables(self) -> list[Tab]:
        return [Tab("result", list(self.arrow.column_names), [])]

    def csv_text(self, tab: Tab, raw: bool) -> str:
        from tbdtrace.report import sql_view

        out = io.StringIO(newline="")
        sql_view.write_csv(out, self.arrow.column_names, self._records(self.arrow), raw=raw)
        return out.getvalue()

    def render_text(self, console: Console) -> None:
        from tbdtrace.report import sql_view

        sql_view.render_text(self.arrow, console)


class InfoDoc(_Doc):
    """``info``: a trace's meta.json and the rows of each table."""

    prog = "info"
    formats: tuple[str, ...] = ("text", "json")

    def __init__(self, path: str, meta: dict[str, Any], rows: dict[str, int]):
        super().__init__({"meta": meta, "rows": rows})
        self.path = path

    def json_text(self, value: Any) -> str:
        return json_text(value, sort_keys=True)

    def render_text(self, console: Console) -> None:
        from tbdtrace.report import info_view

        info_view.render_text(self.path, self.data["meta"], self.data["rows"], console)


__all__ = ["DiffDoc", "HotspotsDoc", "InfoDoc", "ReportDoc", "SqlDoc", "rank_by_rank"]
