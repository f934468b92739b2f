"""Errors meant for people: the message is the one line the CLI prints."""

from __future__ import annotations


class TraceError(Exception):
    """Bad input or an unusable environment.

    The message names the file (or thing), what is wrong and what to do; the CLI prints
    it as ``tbdtrace: <message>`` and exits with code 1.
    """
