"""Progress of long commands on a terminal: the one progress facility (rich's display).

A :class:`Task` is one line on stderr: what is being done, how far (bytes, rows, ranks,
steps or sections, of a total when it is known), the time spent and, with a total, an
estimate of the time left. It is shown only when all of these hold:

* stderr is a terminal (nothing when it is piped or redirected, so logs and scripts see
  only the command's own lines);
* the command was not given ``--quiet`` (:func:`set_quiet`, called by the CLI);
* the work is long: the caller says so with ``big`` (an input over :data:`BIG_BYTES` or
  :data:`BIG_ROWS`, see :func:`is_big`; capture and rank-by-rank reports always are).

Otherwise every call is a no-op and rich is not even imported. The display is transient:
it is erased when the task ends, so what the command prints stays as it was. Updates may
come from any thread; they are throttled to :data:`REFRESH_S`.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any

BIG_BYTES = 100 << 20  # an input file (as stored) at least this large shows progress
BIG_ROWS = 1 << 20  # ... or a trace with at least this many event rows
REFRESH_S = 0.1  # the most often a task's display is updated

_quiet = False
_lock = threading.Lock()
_display: Any = None  # the rich Progress shared by the tasks on screen
_open_tasks = 0


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress at all in this process."""
    global _quiet
    _quiet = quiet


def on_terminal() -> bool:
    """Progress can be shown: stderr is a terminal and ``--quiet`` was not given."""
    if _quiet:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def is_big(nbytes: int = 0, rows: int = 0) -> bool:
    """An input this large (stored bytes, or event rows) shows progress."""
    return nbytes >= BIG_BYTES or rows >= BIG_ROWS


UNITS = ("bytes", "rows", "ranks", "steps", "sections", "figures", "events")


class Task:
    """One progress line (a no-op when not shown). ``unit``: one of :data:`UNITS`;
    ``total``: the amount of work, when known (an estimate of the time left then)."""

    def __init__(
        self, label: str, total: float | None = None, unit: str = "rows", big: bool = True
    ):
        assert unit in UNITS, unit
        self.unit = unit
        self.total = total
        self.done = 0.0
        self._last = 0.0
        self._id: Any = None
        if big and on_terminal():
            self._start(label)

    @property
    def shown(self) -> bool:
        return self._id is not None

    def _start(self, label: str) -> None:
        global _display, _open_tasks
        with _lock:
            if _display is None:
                _display = _make_display()
                _display.start()
            _open_tasks += 1
            self._id = _display.add_task(_shown(label), total=self.total, unit=self.unit)

    def update(
        self, done: float | None = None, advance: float = 0, label: str | None = None
    ) -> None:
        """Set (``done``) or advance the amount done; ``label``: a new description.
        Throttled: the display changes at most every :data:`REFRESH_S`; a new label is
        drawn at once (a step of a few milliseconds would otherwise never be seen)."""
        if self._id is None:
            return
        self.done = done if done is not None else self.done + advance
        now = time.monotonic()
        if label is None and now - self._last < REFRESH_S:
            return
        self._last = now
        kw: dict[str, Any] = {"completed": self.done}
        if label is not None:
            kw["description"] = _shown(label)
        with _lock:
            if _display is not None:
                _display.update(self._id, **kw)
                if label is not None:
                    _display.refresh()

    def set_total(self, total: float | None) -> None:
        self.total = total
        if self._id is not None:
            with _lock:
                if _display is not None:
                    _display.update(self._id, total=total)

    def close(self) -> None:
        """Erase the line (and the display, after the last task)."""
        global _display, _open_tasks
        if self._id is None:
            return
        with _lock:
            if _display is not None:
                _display.remove_task(self._id)
                _open_tasks -= 1
                if _open_tasks == 0:
                    _display.stop()
                    _display = None
        self._id = None

    def __enter__(self) -> Task:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _make_display() -> Any:
    """rich's Progress on stderr: description, bar, amount (with unit), elapsed, left."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Amount(ProgressColumn):
        """Done (of total) in the task's unit: MB for bytes, counts otherwise."""

        def render(self, task: Any) -> Text:
            unit = task.fields.get("unit", "rows")
            if unit == "bytes":
                done = f"{task.completed / 1e6:,.0f}"
                of = f" / {task.total / 1e6:,.0f}" if task.total else ""
                return Text(f"{done}{of} MB")
            of = f" / {task.total:,.0f}" if task.total else ""
            return Text(f"{task.completed:,.0f}{of} {unit}")

    class Left(TimeRemainingColumn):
        """Time left, only where a total makes it an estimate."""

        def render(self, task: Any) -> Text:
            if not task.total:
                return Text("")
            return Text("~") + super().render(task) + Text(" left")

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=24),
        Amount(),
        TimeElapsedColumn(),
        Left(),
        # the stream under the CLI's escaping of stderr: the display's own codes pass
        console=Console(file=getattr(sys.stderr, "unescaped", sys.stderr)),
        transient=True,
        refresh_per_second=8,
    )


def _shown(label: str) -> str:
    """A label as the display shows it: a file name's control characters as escapes, its
    brackets as text (not rich markup)."""
    from rich.markup import escape

    from tbdtrace.safe_text import printable

    return escape(printable(label))


def task(label: str, total: float | None = None, unit: str = "rows", big: bool = True) -> Task:
    """A :class:`Task` (shown on a terminal when ``big``)."""
    return Task(label, total, unit, big)
