"""The TBD workloads on PyTorch, one module per model (``python -m workloads.pytorch.<model>``)."""
