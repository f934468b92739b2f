"""The package's version (``tbdtrace --version``, the writer named in a trace's marker
file), in a module of its own so that storage and the command line read it without
importing the package's ``__init__`` and what it loads on demand."""

__version__ = "0.1.0"
