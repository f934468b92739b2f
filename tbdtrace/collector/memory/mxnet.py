"""MXNet memory: storage totals over time from MXNet's profiler, model state from Gluon.

MXNet 1.9 keeps no per-tensor allocation stream that Python can read and no CPU
allocator statistics API (``mx.context.gpu_memory_info`` is GPU only). What it does have
on every device is the profiler's storage counter: with ``profile_memory=True`` each
allocation and free made through MXNet's ``Storage`` while the profiler runs updates a
``Memory: <device>`` counter (category ``Device Storage``) in the profiler's Chrome trace,
in bytes, stamped in microseconds of CLOCK_REALTIME. This module runs that profiler with
memory only (no operators, no API calls), reads the counter events back, and sizes the
model from the live Gluon objects::

    with tbdtrace.collector.memory.mxnet.profile("run.tbd", net=net, trainer=trainer) as p:
        for x, y in data:
            train_step(x, y)
            p.step()

The ``memory`` table then holds, per device, four resizable blocks (level allocated, one
fixed address each): ``weights`` (every Parameter's data, BatchNorm running statistics
included), ``gradients`` (the gradient arrays of parameters with ``grad_req != 'null'``;
Gluon keeps them for the parameter's life), ``optimizer_state`` (every NDArray in the
Trainer's updater states: SGD momentum, Adam mean and variance, ...) and ``other``: the
storage total minus those three, never below 0. The storage total is the model state
that existed at ``start()`` plus the counter's change since then (MXNet counts only what
is allocated while its profiler runs). A counter event resizes ``other`` at the event's
time and carries the counter (relative to the start) in ``total_allocated_bytes``.

Model sizes are read at start, at every ``step()``, at stop, and on a background thread
whenever the set of parameter, gradient or state arrays changes (deferred
initialisation, the optimizer's first step). Allocations run on MXNet's engine threads,
so a size change is stamped up to one polling interval after the storage it describes
was counted; in between, that storage counts as ``other``. The totals do not depend on
that timing.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbdtrace.collector.memory.torch_profile import check_out_dir
from tbdtrace.errors import TraceError

MODEL_CATEGORIES = ("weights", "gradients", "optimizer_state")
_ADDR = {"weights": 1, "gradients": 2, "optimizer_state": 3, "other": 4}
# Allocated and freed on each probed device right after the profiler starts: its counter
# event tells the counter's value at start (it keeps its value across profiler runs).
PROBE_BYTES = 4096
# A free's counter event can be recorded a little after the engine reports the free done
# (mx.nd.waitall returns first); waiting this long before stopping keeps it.
GRACE_S = 0.02
_COUNTER_PREFIX = "Memory: "

Sizes = dict[str, dict[str, int]]  # MXNet device name -> category -> bytes


def device_of(name: str) -> tuple[str, int | None, str | None]:
    """(device_type, device_id, memory_kind) for an MXNet device name such as ``cpu/0``,
    ``gpu/1``, ``cpu pinned/`` or ``cpu shared/``."""
    kind, _, idx = name.partition("/")
    dev_id = int(idx) if idx.isdigit() else None
    if kind == "gpu":
        return "cuda", dev_id, None
    return "cpu", dev_id, "pinned" if kind == "cpu pinned" else None


def context_name(ctx: Any) -> str:
    """MXNet's profiler name of a Context: ``cpu/0``, ``gpu/0``, ``cpu pinned/``, ..."""
    kind = str(ctx.device_type)
    if kind in ("cpu", "gpu"):
        return f"{kind}/{int(ctx.device_id)}"
    return kind.replace("_", " ") + "/"


_ITEMSIZE: dict[Any, int] = {}


def array_bytes(a: Any) -> int:
    """Bytes of an NDArray's storage: elements x item size (data plus indices when sparse)."""
    stype = getattr(a, "stype", "default")
    if stype == "row_sparse":
        return array_bytes(a.data) + array_bytes(a.indices)
    if stype == "csr":
        return array_bytes(a.data) + array_bytes(a.indices) + array_bytes(a.indptr)
    dt = a.dtype
    size = _ITEMSIZE.get(dt)
    if size is None:
        import numpy as np

        size = _ITEMSIZE.setdefault(dt, int(np.dtype(dt).itemsize))
    return math.prod(a.shape) * size


def _ndarrays(obj: Any, depth: int = 0) -> Iterator[Any]:
    """NDArrays inside an optimizer state (an NDArray, None, or nested tuples/lists)."""
    from mxnet import nd

    if isinstance(obj, nd.NDArray):
        yield obj
    elif depth < 4 and isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _ndarrays(o, depth + 1)
    elif depth < 4 and isinstance(obj, dict):
        for o in obj.values():
            yield from _ndarrays(o, depth + 1)


def _as_list(obj: Any) -> list[Any]:
    if obj is None:
        return []
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return [obj]


@dataclass
class ModelState:
    """The Gluon objects whose arrays are weights, gradients and optimizer state.

    ``nets``: Blocks (anything with ``collect_params()``) or ParameterDicts; ``trainers``:
    ``gluon.Trainer`` objects. Optimizer states are read from the trainer's updaters
    (``Trainer._updaters``, and the kvstore's updater when the trainer updates on the
    kvstore), the only place Gluon 1.x keeps them.
    """

    nets: list[Any]
    trainers: list[Any]

    def parameters(self) -> list[Any]:
        seen: dict[int, Any] = {}
        for n in self.nets:
            params = n.collect_params() if hasattr(n, "collect_params") else n
            for p in params.values():
                seen.setdefault(id(p), p)
        return list(seen.values())

    def updaters(self) -> list[Any]:
        out = []
        for t in self.trainers:
            out += list(getattr(t, "_updaters", None) or [])
            kv_updater = getattr(getattr(t, "_kvstore", None), "_updater", None)
            if kv_updater is not None:
                out.append(kv_updater)
        return out

    def signature(self, params: list[Any]) -> tuple[int, ...]:
        """Changes when an array list is created or replaced (initialisation, new state).

        Cheap (attribute reads only), so the background thread can poll it."""
        sig = [id(getattr(p, "_data", None)) for p in params]
        sig += [id(getattr(p, "_grad", None)) for p in params]
        for u in self.updaters():
            states = getattr(u, "states", {})
            sig += [len(states), *(id(s) for s in states.values())]
        return tuple(sig)

    def sizes(self, params: list[Any]) -> Sizes:
        """Bytes per device and category, from the arrays themselves."""
        from mxnet.base import MXNetError
        from mxnet.gluon.parameter import DeferredInitializationError

        out: Sizes = {}
        seen: set[int] = set()

        def add(arrays: Iterable[Any], cat: str) -> None:
            for a in arrays:
                if id(a) in seen:
                    continue
                seen.add(id(a))
                dev = out.setdefault(context_name(a.context), dict.fromkeys(MODEL_CATEGORIES, 0))
                dev[cat] += array_bytes(a)

        for p in params:
            try:
                add(p.list_data(), "weights")
            except (DeferredInitializationError, RuntimeError, MXNetError):
                continue  # not initialised yet: no storage
            if p.grad_req != "null":
                with suppress(DeferredInitializationError, RuntimeError, MXNetError):
                    add(p.list_grad(), "gradients")
        for u in self.updaters():
            add(_ndarrays(list(getattr(u, "states", {}).values())), "optimizer_state")
        return out


@dataclass
class Sampler:
    """MXNet's storage counter plus model sizes; use through :func:`profile`."""

    model: ModelState
    interval_s: float = 0.01  # how often the background thread looks for new arrays
    samples: list[tuple[int, Sizes]] = field(default_factory=list)  # (ts_ns, sizes)
    # ts_ns, device, bytes counted since start (see _read_counters)
    counters: list[tuple[int, str, int]] = field(default_factory=list)
    step_ends_ns: list[int] = field(default_factory=list)
    start_ns: int = 0
    stop_ns: int = 0
    counter_start: dict[str, int] = field(default_factory=dict)  # device -> value at start
    counter_low: dict[str, int] = field(default_factory=dict)  # device -> lowest change (<= 0)
    # Also profile operators (symbolic and imperative) in the same run; the profiler's
    # dump is then kept in ``dump_text`` for the MXNet importer (capture --backend mxnet).
    operators: bool = False
    dump_text: str = ""

    def __post_init__(self) -> None:
        self._params: list[Any] = []
        self._sig: tuple[int, ...] = ()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tbdtrace-mx-memory", daemon=True)
        self._dump = Path(tempfile.mkdtemp(prefix="tbdtrace-mx-")) / "profile.json"
        self._probed: set[str] = set()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Size the model, start MXNet's memory profiler, probe the counters."""
        import mxnet as mx
        from mxnet import profiler
        from mxnet.base import MXNetError

        mx.nd.waitall()
        self.start_ns = time.time_ns()
        self.sample(force=True)
        try:
            profiler.set_config(
                profile_memory=True,
                profile_symbolic=self.operators,
                profile_imperative=self.operators,
                profile_api=False,
                aggregate_stats=False,
                filename=str(self._dump),
            )
        except MXNetError as e:
            self._remove_dump()
            first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise TraceError(
                "mx.profiler cannot be configured in this process (was it dumped with "
                f"finished=True already?): {first}; profile memory in a fresh process"
            ) from None
        profiler.set_state("run")
        self._probe()
        self._thread.start()

    def _probe(self) -> None:
        import mxnet as mx

        ctxs = {"cpu/0": mx.cpu(0)}
        for dev in self.samples[0][1] if self.samples else {}:
            kind, dev_id, _ = device_of(dev)
            if kind == "cuda" and dev_id is not None:
                ctxs[dev] = mx.gpu(dev_id)
        for ctx in ctxs.values():
            probe = mx.nd.zeros((PROBE_BYTES // 4,), ctx=ctx, dtype="float32")
            mx.nd.waitall()
            del probe
            mx.nd.waitall()
        self._probed = set(ctxs)

    def track(self, net: Any = None, trainer: Any = None) -> None:
        """Add Blocks and Trainers made after the profile started (lists work too)."""
        with self._lock:
            self.model.nets += _as_list(net)
            self.model.trainers += _as_list(trainer)
            self._params = []  # collect the parameters again at the next sample
        self.sample(force=True)

    def step(self) -> None:
        """End a training step: wait for MXNet's engine, size the model, stamp the end."""
        import mxnet as mx

        mx.nd.waitall()
        self.sample()
        self.step_ends_ns.append(time.time_ns())

    def stop(self) -> None:
        """Stop sampling and the profiler; read the counter events back."""
        import mxnet as mx
        from mxnet import profiler

        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        mx.nd.waitall()
        time.sleep(GRACE_S)
        self.sample(force=True)
        self.stop_ns = time.time_ns()
        profiler.set_state("stop")
        profiler.dump(finished=False)  # after finished=True MXNet refuses set_config
        try:
            text = self._dump.read_text() if self._dump.exists() else ""
            self.dump_text = text if self.operators else ""
            self._read_counters(text)
        finally:
            self._remove_dump()

    def _remove_dump(self) -> None:
        self._dump.unlink(missing_ok=True)
        self._dump.parent.rmdir()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self, force: bool = False) -> None:
        """Size the model now if its arrays changed since the last sample (or ``force``)."""
        with self._lock:
            params = self.model.parameters() if force or not self._params else self._params
            sig = self.model.signature(params)
            if not force and sig == self._sig:
                return
            self._params, self._sig = params, sig
            self.samples.append((time.time_ns(), self.model.sizes(params)))

    # -- the profiler's counters -------------------------------------------------------------
    def _read_counters(self, text: str) -> None:
        """Counter events of this run from the dump (a first dump has the JSON header; a
        later one in the same process continues the event list after a comma)."""
        text = text.strip()
        try:
            if text.startswith("{"):
                events = json.loads(text + "]}")["traceEvents"]
            else:
                events = json.loads("[" + text.lstrip(",") + "]") if text else []
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise TraceError(f"MXNet's profiler dump could not be read ({err})") from None
        lo_us = self.start_ns // 1000
        found: list[tuple[int, int, str, int]] = []
        for i, e in enumerate(events):
            if not isinstance(e, dict) or e.get("ph") != "C":
                continue
            name = e.get("name")
            if not isinstance(name, str) or not name.startswith(_COUNTER_PREFIX):
                continue
            ts, value = e.get("ts"), (e.get("args") or {}).get(name)
            if isinstance(ts, int) and isinstance(value, int) and ts >= lo_us:
                found.append((ts * 1000, i, name[len(_COUNTER_PREFIX) :], value))
        found.sort()
        for ts_ns, _, dev, value in found:
            if dev not in self.counter_start:
                if dev in self._probed and value >= PROBE_BYTES:
                    self.counter_start[dev] = value - PROBE_BYTES
                    continue  # the probe's own allocation
                self.counter_start[dev] = 0
            # Below its start value the counter is freeing arrays older than the capture
            # (MXNet clamps it at 0, losing the rest): those frees are not subtracted, as
            # the memory pass drops frees without an alloc; counting restarts from there.
            change = value - self.counter_start[dev]
            low = self.counter_low[dev] = min(self.counter_low.get(dev, 0), change)
            self.counters.append((ts_ns, dev, change - low))

    # -- the memory table --------------------------------------------------------------------
    def memory_columns(self) -> dict[str, list[Any]]:
        """The ``memory`` table: resizable blocks per device (see the module docstring)."""
        base = {d: sum(c.values()) for d, c in (self.samples[0][1] if self.samples else {}).items()}
        known: Sizes = {}
        counted: dict[str, int] = {}  # device -> storage counted since start
        live: dict[tuple[str, str], int] = {}
        rows: list[tuple[int, str, str, str, int, int | None]] = []

        def resize(dev: str, new: dict[str, int], ts: int, total: int | None = None) -> None:
            # All frees before any alloc: the moment never shows old and new sizes at once.
            changed = [
                (c, live.get((dev, c), 0), n) for c, n in new.items() if live.get((dev, c), 0) != n
            ]
            rows.extend((ts, "free", dev, c, old, total) for c, old, _ in changed if old)
            rows.extend((ts, "alloc", dev, c, n, total) for c, _, n in changed if n)
            live.update({(dev, c): n for c, _, n in changed})

        def other(dev: str) -> int:
            storage = base.get(dev, 0) + counted.get(dev, 0)
            return max(0, storage - sum(known.get(dev, {}).values()))

        stream = [(ts, 0, i) for i, (ts, _) in enumerate(self.samples)]
        stream += [(ts, 1, i) for i, (ts, _, _) in enumerate(self.counters)]
        for ts, kind, i in sorted(stream):
            if kind == 0:
                sizes = self.samples[i][1]
                for dev in sorted(set(known) | set(sizes)):
                    known[dev] = dict(sizes.get(dev, dict.fromkeys(MODEL_CATEGORIES, 0)))
                    resize(dev, {**known[dev], "other": other(dev)}, ts)
            else:
                _, dev, value = self.counters[i]
                counted[dev] = value
                resize(dev, {"other": other(dev)}, ts, value)
        addr = {d: 16 * k for k, d in enumerate(sorted({r[2] for r in rows}))}
        devs = {d: device_of(d) for d in addr}
        return {
            "ts_ns": [r[0] for r in rows],
            "action": [r[1] for r in rows],
            "level": ["allocated"] * len(rows),
            "bytes": [r[4] for r in rows],
            "address": [addr[r[2]] + _ADDR[r[3]] for r in rows],
            "device_type": [devs[r[2]][0] for r in rows],
            "device_id": [devs[r[2]][1] for r in rows],
            "memory_kind": [devs[r[2]][2] for r in rows],
            "pid": [os.getpid()] * len(rows),
            "category": [r[3] for r in rows],
            "total_allocated_bytes": [r[5] for r in rows],
        }

    def model_bytes(self) -> dict[str, int]:
        """Weights, gradients and optimizer state at the last sample, summed over devices."""
        last = self.samples[-1][1] if self.samples else {}
        return {c: sum(d[c] for d in last.values()) for c in MODEL_CATEGORIES}

    def storage_summary(self) -> dict[str, dict[str, int]]:
        """Per device: the counter's value at start, the most it counted since, the lowest
        change (negative when arrays older than the capture were freed) and its events."""
        out: dict[str, dict[str, int]] = {}
        for _, dev, value in self.counters:
            d = out.setdefault(
                dev,
                {
                    "start_bytes": self.counter_start.get(dev, 0),
                    "peak_bytes": 0,
                    "events": 0,
                    "lowest_change_bytes": self.counter_low.get(dev, 0),
                },
            )
            d["peak_bytes"] = max(d["peak_bytes"], value)
            d["events"] += 1
        return out


@contextmanager
def profile(
    out_dir: str | os.PathLike[str],
    net: Any = None,
    trainer: Any = None,
    interval_s: float = 0.01,
    workload: str | None = None,
) -> Iterator[Sampler]:
    """Record MXNet memory for the block; on exit write a trace to ``out_dir``.

    ``net``: a Gluon Block (or ParameterDict), or a list of them; ``trainer``: a
    ``gluon.Trainer`` or a list. Both are optional (without them every byte is
    ``other``). MXNet's profiler must not be used by the program at the same time.
    Start before the model is built to have every allocation counted; started later,
    frees of older arrays that are not model state lower the total (never below the
    model state).
    """
    from tbdtrace import trace as trace_io

    check_out_dir(out_dir)
    sampler = Sampler(ModelState(_as_list(net), _as_list(trainer)), interval_s=interval_s)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()
    tables: dict[str, Any] = {"memory": sampler.memory_columns()}
    ends = sampler.step_ends_ns
    if ends:
        tables["steps"] = {
            "step": list(range(len(ends))),
            "start_ns": [sampler.start_ns, *ends[:-1]],
            "end_ns": ends,
            "pid": [os.getpid()] * len(ends),
            "source": ["memory"] * len(ends),
        }
    trace_io.write(
        out_dir,
        tables,
        {
            "source": "mxnet",
            "framework": "mxnet",
            "workload": workload,
            "start_time_ns": sampler.start_ns,
            "extra": {
                "memory_model": sampler.model_bytes(),
                "mxnet_storage": sampler.storage_summary(),
            },
        },
    )
