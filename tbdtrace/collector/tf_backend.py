"""``--backend tf``: TensorFlow's own profiler inside the captured program, on CPU or GPU.

Started by the bootstrap right after the program imports TensorFlow
(:mod:`tbdtrace.collector.profiler_child`), :class:`TfBackend` runs

* ``tf.profiler.experimental.start(logdir)`` (host tracer level 2: every op the executor
  runs, with TraceMe ranges), whose XSpace file is read back at ``stop()`` through the
  TensorFlow importer (:mod:`tbdtrace.importers.tensorflow`): ``ops`` rows named
  ``<op name>:<op type>``, each also a CPU ``kernels`` row since it ran on the CPU, and
  ``markers`` for the other ranges;
* FLOPs of the matrix ops (``ops.flops``), from the ``tf.function`` graphs the program
  traced (:mod:`tbdtrace.collector.tf_flops`);
* the allocator sampler of :mod:`tbdtrace.collector.memory.tensorflow` (bytes in use and
  the peak between samples, per device), with weights and optimizer state sized from the
  Keras models and optimizers the program made, found by type
  (:mod:`tbdtrace.collector.model_discovery`). Gradients live only inside a
  ``GradientTape`` step: their size (the trainable variables' bytes) goes to
  ``meta.extra.memory_model`` and their bytes count under ``other`` in the ``memory``
  table.

The capture command sets ``TF_CPU_ALLOCATOR_USE_BFC=true`` for the program (unless it is
set already): TensorFlow's default CPU allocator keeps no statistics for small
allocations, so without it the CPU totals would be low.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from tbdtrace.collector.model_discovery import Discovery, instances
from tbdtrace.errors import TraceError


def _keras_types() -> tuple[tuple[type, ...], tuple[type, ...]] | None:
    """(model types, optimizer types) of Keras once the program has imported it (the
    capture never imports it first: the program may configure it before its import)."""
    keras = sys.modules.get("keras")
    model = getattr(keras, "Model", None)
    opt = getattr(getattr(keras, "optimizers", None), "Optimizer", None)
    if not isinstance(model, type) or not isinstance(opt, type):
        return None
    return (model,), (opt,)


class TfBackend:
    """TensorFlow's profiler and allocator totals: ``start()``, then ``stop()``."""

    name = "tf"

    def __init__(self, memory_interval_s: float = 0.005):
        self.memory_interval_s = memory_interval_s  # allocator sampling period
        self._logdir = Path(tempfile.mkdtemp(prefix="tbdtrace-tf-"))
        self._lock = threading.Lock()
        self._sizes = {"weights": 0, "optimizer_state": 0, "gradients": 0}
        self._models: dict[int, Any] = {}
        self._held: dict[int, Any] = {}  # id -> model, optimizer or ConcreteFunction found
        self.graphs: list[Any] = []  # the traced tf.function graphs found (tf_flops)
        self._discovery = Discovery(self._scan)
        self.memory: Any = None

    def _scan(self) -> None:
        from tbdtrace.collector.memory.tensorflow import variable_bytes
        from tbdtrace.collector.tf_flops import concrete_function_type

        types = _keras_types()
        fn_t = concrete_function_type()
        if types is None and fn_t is None:
            return  # neither Keras nor tf.function in use yet
        model_t, opt_t = types or ((), ())
        wanted = tuple(t for t in (*model_t, *opt_t, fn_t) if t is not None)
        found = instances(wanted)
        with self._lock:
            # Kept once found: the program's objects may be gone by the last scan.
            for o in found:
                self._held.setdefault(id(o), o)
            held = list(self._held.values())
        models: list[Any] = [o for o in held if model_t and isinstance(o, model_t)]
        opts: list[Any] = [o for o in held if opt_t and isinstance(o, opt_t)]
        fns: list[Any] = [o for o in held if fn_t is not None and isinstance(o, fn_t)]
        self.graphs = [f.graph for f in fns]
        weights = _unique(v for m in models for v in m.variables)
        trainable = _unique(v for m in models for v in m.trainable_variables)
        state = _unique(v for o in opts for v in o.variables)
        sizes = {
            "weights": variable_bytes(weights),
            "optimizer_state": variable_bytes(state),
            "gradients": variable_bytes(trainable),
        }
        with self._lock:
            self._sizes = sizes
            self._models = {id(m): type(m).__name__ for m in models}

    def _sized(self) -> dict[str, int]:
        with self._lock:
            return {k: self._sizes[k] for k in ("weights", "optimizer_state")}

    def start(self) -> None:
        import tensorflow as tf

        from tbdtrace.collector.memory.tensorflow import Sampler

        # Default options: host tracer level 2 (TensorFlow 2.21 warns that it "expects an
        # i value" for ProfilerOptions given from Python, and ignores them).
        tf.profiler.experimental.start(str(self._logdir))
        self.memory = Sampler(interval_s=self.memory_interval_s, sizer=self._sized)
        self.memory.start()
        self._discovery.start()

    def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        import tensorflow as tf

        from tbdtrace.importers import tensorflow as tf_import

        self._discovery.stop()
        self.memory.stop()
        try:
            tf.profiler.experimental.stop()
            files = sorted(self._logdir.rglob("*.xplane.pb"))
            if not files:
                raise TraceError("TensorFlow's profiler wrote no .xplane.pb file")
            tables, meta = tf_import.import_files(files[-1:])
        finally:
            shutil.rmtree(self._logdir, ignore_errors=True)
        tables["memory"] = self.memory.memory_columns()
        flop_rows = 0
        if tables.get("ops"):
            from tbdtrace.collector.tf_flops import add_flops

            ops = {c: _as_list(a) for c, a in tables["ops"].items()}
            flop_rows = add_flops(ops, self.graphs)
            tables["ops"] = ops
        meta.update(source="tensorflow", backend="tf", framework="tensorflow", source_files=[])
        extra = meta.setdefault("extra", {})
        extra["memory_model"] = dict(self._sizes)
        # What the memory table tells apart; the rest is inside "other" (suite rows).
        extra["memory_categories"] = ["weights", "optimizer_state", "other"]
        extra["tensorflow"] = {
            "version": tf.__version__,
            "host_tracer_level": 2,
            "models_found": sorted(set(self._models.values())),
            "ops_with_graph_flops": flop_rows,  # tf_flops: matrix ops counted from graphs
        }
        return tables, meta


def _as_list(col: Any) -> list[Any]:
    """An importer column (Arrow array or list) as a list."""
    return col.to_pylist() if hasattr(col, "to_pylist") else list(col)


def _unique(variables: Any) -> list[Any]:
    """Variables without repeats (a layer shared by two models counts once)."""
    seen: dict[int, Any] = {}
    for v in variables:
        seen.setdefault(id(v), v)
    return list(seen.values())
