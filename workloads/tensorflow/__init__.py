"""TBD workloads on TensorFlow 2 / Keras 3.

Run each with ``python -m workloads.tensorflow.<model>``. Importing this package quiets
TensorFlow's C++ start-up logging (before any module imports TensorFlow).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
