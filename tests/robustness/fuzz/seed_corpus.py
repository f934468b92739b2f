"""Write the fuzz target's seed corpus and route table (run by ``make fuzz``).

Seeds: the first events of every Kineto fixture trace (decompressed, cut to at most
SEED_BYTES at an event boundary and closed, so each seed is a valid small trace), plus the
hostile-input cases of tests/robustness/cases_input.py that are Kineto JSON, plus the hostile
sizes of cases_sizes.py at fuzzing size. Each seed is prefixed with the byte that sets the
piece size (csrc fuzz target): 0 (whole), 7, and 9 (odd: with a small unit limit).

Usage: python tests/robustness/fuzz/seed_corpus.py CORPUS_DIR ROUTES_FILE
"""

from __future__ import annotations

import gzip
import hashlib
import sys
from pathlib import Path

SEED_BYTES = 8 << 10


def _fixture_seeds() -> list[bytes]:
    from tests.conftest import KINETO_TRACES

    seeds = []
    for path in KINETO_TRACES:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as f:
                raw = f.read(SEED_BYTES * 4)
        cut = raw[:SEED_BYTES]
        end = cut.rfind(b"},")
        seeds.append(cut[: end + 1] + b"]}" if end > 0 else cut)
    return seeds


def _case_seeds() -> list[bytes]:
    from tests.robustness.cases_input import CASES

    return [c.content for c in CASES if c.fmt in (None, "kineto") and c.content[:1] in b"{["]


def _size_seeds() -> list[bytes]:
    from tests.robustness.cases_sizes import small_seeds

    return small_seeds()


def main(corpus: str, routes_file: str) -> int:
    from tbdtrace.importers.kineto.vocab import ROUTES

    Path(routes_file).write_text("".join(f"{c} {r}\n" for c, r in ROUTES))
    out = Path(corpus)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for seed in _fixture_seeds() + _case_seeds() + _size_seeds():
        # 0: whole; 7: 7-byte pieces; 9: 9-byte pieces with the 8 KiB unit limit (odd)
        for step in (0, 7, 9):
            data = bytes([step]) + seed
            (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
            n += 1
    print(f"{n} seeds in {out}, routes in {routes_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
