"""Shared setup of the robustness tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _pandas_stays_importable() -> Iterator[None]:
    """The CLI's analysis commands refuse `import pandas` for the rest of the process
    (tbdtrace/_pandas_gate.py); tests that call main() in-process open it again after."""
    yield
    from tbdtrace import _pandas_gate

    _pandas_gate.open_()
