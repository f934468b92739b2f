"""TBD workloads on TensorFlow 2 / Keras 3; run each with ``python -m workloads.tensorflow.<model>``."""
