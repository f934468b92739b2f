"""Shared test fixtures: paths to the bundled real traces."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
KINETO = DATA / "kineto"
KINETO_TRACES = sorted(p for p in KINETO.glob("*/*.json.gz"))


@pytest.fixture(scope="session")
def kineto_dir() -> Path:
    return KINETO
