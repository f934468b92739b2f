"""Subcommands of the tbdtrace CLI; see tbdtrace/cli.py for the contract."""
