"""The capture's parent/child protocol is declared once (tbdtrace/collector/child_protocol.py):
the native readers and the harness are read against it, and no other module of the
package spells a ``TBDTRACE_`` name in its code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tbdtrace.collector import child_protocol as proto

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bTBDTRACE_[A-Z0-9_]+\b")
GETENV = re.compile(r'(?:getenv|env_u64)\("(TBDTRACE_[A-Z0-9_]+)"')
QUOTED = re.compile(r'"(TBDTRACE_[A-Z0-9_]+)"')  # a name as a C++ string (not a build macro)


def _source(name: str) -> str:
    """A C++ source of csrc/ by file name, wherever it sits (csrc/ or a room of it)."""
    (path,) = (ROOT / "csrc").rglob(name)
    return path.read_text()


def _declared(reader: str) -> set[str]:
    return {v.name for v in proto.VARIABLES if v.reader == reader}


def test_every_name_is_declared_once_with_a_reader_and_a_doc() -> None:
    names = [v.name for v in proto.VARIABLES]
    assert len(names) == len(set(names))
    consts = {v for k, v in vars(proto).items() if k.isupper() and isinstance(v, str)}
    assert set(names) == {c for c in consts if c.startswith("TBDTRACE_")}
    assert all(v.doc and v.reader for v in proto.VARIABLES)


def test_the_injection_library_reads_exactly_its_declared_names() -> None:
    text = _source("inject.cpp")
    assert set(GETENV.findall(text)) == _declared("inject.cpp")
    assert set(QUOTED.findall(text)) <= proto.names()


def test_the_extension_reads_only_declared_names() -> None:
    text = _source("bindings.cpp")
    assert set(GETENV.findall(text)) == _declared("bindings.cpp")
    assert set(QUOTED.findall(text)) <= proto.names()


def test_the_harness_copies_match_the_protocol() -> None:
    """workloads/harness.py keeps its own copies (standard library only, no tbdtrace)."""
    from workloads import harness

    assert harness.STEPS_FILE_ENV == proto.STEPS_FILE
    assert harness.MEMORY_TRACE_ENV == proto.MEMORY_TRACE
    text = (ROOT / "workloads" / "harness.py").read_text()
    assert set(NAME.findall(text)) <= proto.names()
    assert _declared("harness") == {proto.STEPS_FILE, proto.MEMORY_TRACE}


def _code_strings(path: Path) -> list[str]:
    """String constants of a module's code (docstrings left out: they may name variables)."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            docs.add(id(first.value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_no_other_module_spells_a_protocol_name() -> None:
    """No string constant of the package's code is a ``TBDTRACE_`` name (a variable's key);
    a message may mention one in prose (a build option, say)."""
    own = ROOT / "tbdtrace" / "collector" / "child_protocol.py"
    offenders = [
        f"{p.relative_to(ROOT)}: {s}"
        for p in sorted((ROOT / "tbdtrace").rglob("*.py"))
        if p != own
        for s in _code_strings(p)
        if NAME.fullmatch(s)
    ]
    assert offenders == []
