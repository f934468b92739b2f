"""``python -m tbdtrace``: the same as the ``tbdtrace`` console script."""

from tbdtrace.cli import run

run()
