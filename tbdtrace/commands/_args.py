"""Arguments several commands share: the output options, and the validating types every
number, rate and address is parsed with (a bad value is a usage error at parse time:
exit 2 with argparse's usage line and one line naming the option).

Output options are marked (:data:`OUTPUT_KIND` on the argparse action) with what they
name (:class:`tbdtrace.output_policy.Kind`), so the robustness tests find every output of
every command (tests/robustness/generators.py) without a list kept by hand.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tbdtrace.report.emit import Dest

# Attribute of an argparse action naming an output: "file", "folder", "trace", or
# "file|folder" (a file, or with --format csv of several tables a folder).
OUTPUT_KIND = "tbdtrace_output"


def mark_output(action: argparse.Action, kind: str) -> argparse.Action:
    setattr(action, OUTPUT_KIND, kind)
    return action


def add_force(p: argparse.ArgumentParser, what: str = "an existing output") -> None:
    p.add_argument("--force", action="store_true", help=f"replace {what}")


def add_output(
    p: argparse.ArgumentParser,
    formats: tuple[str, ...] = ("text", "json", "csv"),
    folder_csv: bool = True,
    section: bool = True,
) -> None:
    """``--format``, ``-o/--output``, ``--force``, ``--section`` and ``--raw-csv``."""
    p.add_argument("--format", choices=formats, default="text")
    where = (
        "(with --format csv: a folder, one <table>.csv per table)"
        if folder_csv and "csv" in formats
        else ""
    )
    mark_output(
        p.add_argument(
            "-o",
            "--output",
            metavar="PATH",
            help=f"write to PATH instead of stdout {where}; an existing file is replaced "
            "only with --force (never a trace's files or an input)".replace("  ", " "),
        ),
        "file|folder" if folder_csv and "csv" in formats else "file",
    )
    add_force(p, "an existing -o file (in a folder: the files of the same names)")
    if section:
        p.add_argument(
            "--section",
            metavar="NAME",
            help="with --format csv or json: only this table (e.g. kernels, hotspots.ops) "
            "or section",
        )
    if "csv" in formats:
        p.add_argument(
            "--raw-csv",
            action="store_true",
            help="CSV cells exactly as they are: without it, a text cell starting with "
            "= + - @ TAB or CR gets a leading ' so spreadsheets do not run it as a formula",
        )


def output_usage(args: argparse.Namespace, prog: str, folder_csv: bool = True) -> str | None:
    """A usage error line for impossible combinations of the output options, else None."""
    section = getattr(args, "section", None)
    if section and args.format not in ("csv", "json"):
        return f"tbdtrace {prog}: --section needs --format csv or json"
    if args.format == "xlsx" and not args.output:
        return f"tbdtrace {prog}: --format xlsx needs -o FILE (a workbook, one sheet per table)"
    if folder_csv and args.format == "csv" and not (args.output or section):
        return (
            f"tbdtrace {prog}: --format csv needs -o DIR (one file per table) or "
            "--section NAME (one table to stdout)"
        )
    return None


def dest(args: argparse.Namespace, inputs: list[str]) -> Dest:
    """Where the parsed output options send a document."""
    from tbdtrace.report.emit import Dest

    return Dest(
        path=args.output,
        force=bool(getattr(args, "force", False)),
        inputs=tuple(inputs),
        section=getattr(args, "section", None),
        raw_csv=bool(getattr(args, "raw_csv", False)),
    )


def check_output(args: argparse.Namespace, inputs: list[str], one_table: bool = False) -> None:
    """Refuse an unusable ``-o`` before any work (TraceError, one line); the same checks
    run again when the output is written (tbdtrace.report.emit)."""
    from tbdtrace import output_policy

    if not args.output:
        return
    force = bool(getattr(args, "force", False))
    if args.format == "csv" and not (getattr(args, "section", None) or one_table):
        output_policy.folder_target(args.output, force, inputs, "-o with --format csv")
    else:
        output_policy.file_target(args.output, force, inputs)


# ---- validating types ---------------------------------------------------------------------


class _Type:
    """A type= callable whose failure argparse reports as ``argument --x: invalid ...``
    (its ``__name__`` names the kind of value)."""

    def __init__(self, name: str, check: Any):
        self.__name__ = name
        self._check = check

    def __call__(self, text: str) -> Any:
        return self._check(text)

    def __repr__(self) -> str:
        return self.__name__


def _int_at_least(low: int) -> _Type:
    def check(text: str) -> int:
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{v} is below {low}; give an integer >= {low}")
        return v

    return _Type(f"integer >= {low}", check)


positive_int = _int_at_least(1)
nonnegative_int = _int_at_least(0)


def _finite(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    return v


def _positive_finite(text: str) -> float:
    v = _finite(text)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0; give a number > 0")
    return v


positive_float = _Type("finite number > 0", _positive_finite)

# Dask's address schemes (distributed.comm): tcp, tls, inproc, ucx, ws, wss.
SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")
_ADDRESS = re.compile(r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?(?P<rest>.*)")


def _address(text: str) -> str:
    m = _ADDRESS.fullmatch(text.strip())
    scheme = (m.group("scheme") if m else None) or "tcp"
    rest = m.group("rest") if m else ""
    if scheme not in SCHEMES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown scheme {scheme!r}; use one of {', '.join(SCHEMES)} "
            "(e.g. tcp://head:8786)"
        )
    if scheme == "inproc":
        return text
    host, colon, port = rest.rpartition(":")
    if not colon:
        host, port = rest, ""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or "/" in host or " " in host:
        raise argparse.ArgumentTypeError(f"{text!r}: no host; give an address like tcp://head:8786")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise argparse.ArgumentTypeError(f"{text!r}: port {port!r} is not a number from 1 to 65535")
    return text.strip()


scheduler_address = _Type("scheduler address", _address)


__all__ = [
    "OUTPUT_KIND",
    "add_force",
    "add_output",
    "check_output",
    "dest",
    "mark_output",
    "nonnegative_int",
    "output_usage",
    "positive_float",
    "positive_int",
    "scheduler_address",
]
