"""TBD training workloads: one module per model and framework.

``workloads/<framework>/<model>.py`` is runnable as ``python -m workloads.<framework>.<model>``
and takes the options of :mod:`workloads.harness`. :mod:`workloads.registry` lists every
model/framework pair and how to launch it. This package imports nothing heavy, so
``workloads.registry`` and ``workloads.harness`` load in any interpreter (the MXNet venv
included).
"""
