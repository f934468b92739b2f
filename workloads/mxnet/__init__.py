"""TBD workloads on MXNet 1.9 Gluon.

Run each with ``.venv-mxnet/bin/python -m workloads.mxnet.<model>`` (``make venv-mxnet``).
"""
