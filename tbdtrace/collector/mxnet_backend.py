"""``--backend mxnet``: MXNet's own profiler inside the captured program, on CPU or GPU.

Started by the bootstrap right after the program imports MXNet
(:mod:`tbdtrace.collector.profiler_child`), :class:`MxnetBackend` runs MXNet's profiler
once, with operators (symbolic and imperative) and storage
(:class:`tbdtrace.collector.memory.mxnet.Sampler` with ``operators=True``). At ``stop()``
the profiler's dump is read twice: by the MXNet importer (:mod:`tbdtrace.importers.mxnet`:
``ops``, and on ``cpu/N`` a CPU ``kernels`` row per operator) and by the sampler (the
storage counter: the ``memory`` table). Weights, gradients and optimizer state are sized
from the Gluon Blocks and Trainers the program made, found by type
(:mod:`tbdtrace.collector.model_discovery`) and handed to the sampler as they appear.

MXNet runs backward passes of a recorded graph in bulk by default
(``MXNET_EXEC_BULK_EXEC_TRAIN``): the profiler then shows one ``ImperativeBulk`` operator
per bulk, not the operators inside it. The capture leaves the program's setting alone
(unbulking would change its speed).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from tbdtrace.collector.model_discovery import Discovery, instances


class MxnetBackend:
    """MXNet's profiler with storage and model sizes: ``start()``, then ``stop()``."""

    name = "mxnet"

    def __init__(self, memory_interval_s: float = 0.01):
        self.memory_interval_s = memory_interval_s  # how often new arrays are looked for
        self._tracked: set[int] = set()
        self._discovery = Discovery(self._scan)
        self.memory: Any = None

    def _scan(self) -> None:
        from mxnet import gluon

        blocks = instances((gluon.Block,))
        children = {id(c) for b in blocks for c in getattr(b, "_children", {}).values()}
        nets = [b for b in blocks if id(b) not in children and id(b) not in self._tracked]
        trainers = [t for t in instances((gluon.Trainer,)) if id(t) not in self._tracked]
        if nets or trainers:
            self._tracked.update(id(o) for o in (*nets, *trainers))
            self.memory.track(net=nets, trainer=trainers)

    def start(self) -> None:
        from tbdtrace.collector.memory.mxnet import ModelState, Sampler

        self.memory = Sampler(ModelState([], []), interval_s=self.memory_interval_s, operators=True)
        self.memory.start()
        self._discovery.start()

    def pause(self) -> None:
        """Capture windows: no operators recorded until :meth:`resume` (MXNet's profiler
        writes nothing after a stop and a new start in the same process)."""
        from mxnet import profiler

        profiler.pause()

    def resume(self) -> None:
        from mxnet import profiler

        profiler.resume()

    def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        import mxnet

        from tbdtrace.importers import mxnet as mx_import

        self._discovery.stop()
        self.memory.stop()
        fd, tmp = tempfile.mkstemp(prefix="tbdtrace-mx-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                # A dump with finished=False leaves the event list open (see Sampler.stop).
                f.write(self.memory.dump_text.rstrip().rstrip(",") + "\n]}\n")
            tables, meta = mx_import.import_files([Path(tmp)])
        finally:
            os.unlink(tmp)
        tables["memory"] = self.memory.memory_columns()
        meta.update(source="mxnet", backend="mxnet", framework="mxnet", source_files=[])
        extra = meta.setdefault("extra", {})
        extra.pop("files", None)
        extra["memory_model"] = self.memory.model_bytes()
        # What the memory table tells apart; the rest is inside "other" (suite rows).
        extra["memory_categories"] = ["weights", "gradients", "optimizer_state", "other"]
        extra["mxnet_storage"] = self.memory.storage_summary()
        extra["mxnet"] = {"version": mxnet.__version__}
        return tables, meta
