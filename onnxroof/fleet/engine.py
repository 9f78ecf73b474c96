"""One way to run a batch of independent tasks: in this process, in a pool of local processes, or on Dask.

``check -j`` and ``audit`` both hand their tasks here. A task is a picklable top-level function and a tuple of
picklable arguments; :func:`run` yields ``(task index, result)`` as tasks finish, in completion order. A task
whose worker failed (killed, out of memory, lost) yields a :class:`TaskFailure` instead of a result; the other
tasks still run. Dask is an optional dependency (``pip install onnxroof[dask]``): it is imported only when a Dask
engine is asked for, and its absence is one :class:`MissingExtra` error naming the extra.

Workers on a Dask cluster run the task function by import: they need onnxroof installed (the same version)
and every path the tasks name (models, platform files) visible at the same place, e.g. a shared filesystem.
Ctrl-C while waiting cancels the tasks not yet finished and closes the client (and an embedded cluster).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from enum import StrEnum
from pathlib import Path
from typing import Any

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass

DASK_HINT = "pip install onnxroof[dask]"
CONNECT_TIMEOUT_S = 20
#: Tasks submitted to Dask at once; the rest wait on this client (bounds the scheduler's and client's memory).
MAX_IN_FLIGHT = 10_000


class MissingExtra(OnnxroofError):
    """An optional dependency is not installed; the message says which extra brings it."""


class EngineKind(StrEnum):
    serial = "serial"  # in this process, one task after another
    processes = "processes"  # a local ProcessPoolExecutor
    dask_local = "dask-local"  # an embedded dask.distributed LocalCluster
    dask = "dask"  # a running Dask scheduler (address or scheduler file)


@frozen_dataclass(slots=True)
class Engine:
    """Where a batch runs. ``workers`` counts processes for the local kinds; ``scheduler`` is a Dask
    scheduler address (``tcp://host:8786``) or the path of a scheduler file (``dask scheduler
    --scheduler-file``)."""

    kind: EngineKind = EngineKind.serial
    workers: int = 1
    scheduler: str | None = None

    @property
    def describe(self) -> str:
        if self.kind is EngineKind.dask:
            return f"Dask scheduler {self.scheduler}"
        if self.kind is EngineKind.dask_local:
            return f"a local Dask cluster of {self.workers} worker(s)"
        if self.kind is EngineKind.processes:
            return f"{self.workers} local processes"
        return "this process"


def choose_engine(*, workers: int = 1, scheduler: str | None = None, dask: bool = False) -> Engine:
    """The engine for the options: a scheduler wins; else Dask's LocalCluster when ``dask``; else processes
    when ``workers`` > 1; else this process."""
    if scheduler:
        return Engine(EngineKind.dask, workers, scheduler)
    if dask:
        return Engine(EngineKind.dask_local, max(1, workers))
    return Engine(EngineKind.processes if workers > 1 else EngineKind.serial, max(1, workers))


@frozen_dataclass(slots=True)
class TaskFailure:
    """A task whose worker failed (the task function itself should return errors, not raise them)."""

    message: str


def require_dask() -> None:
    """Raise :class:`MissingExtra` (one line naming the extra) unless dask.distributed can be imported."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"this needs Dask ({exc.name or 'dask'} is not installed): {DASK_HINT}") from None


def run(fn: Callable[..., Any], tasks: Sequence[tuple], engine: Engine) -> Iterator[tuple[int, Any]]:
    """Run ``fn(*args)`` for every ``args`` of ``tasks`` on ``engine``; yield ``(index, result)`` as each finishes.

    A worker failure yields :class:`TaskFailure` for that task. Closing the iterator early (or Ctrl-C) cancels
    what has not run.
    """
    if not tasks:
        return
    if engine.kind is EngineKind.serial or (engine.kind is EngineKind.processes and len(tasks) == 1):
        for index, args in enumerate(tasks):
            yield index, fn(*args)
    elif engine.kind is EngineKind.processes:
        yield from _run_pool(fn, tasks, min(engine.workers, len(tasks)))
    else:
        yield from _run_dask(fn, tasks, engine)


def _run_pool(fn: Callable[..., Any], tasks: Sequence[tuple], workers: int) -> Iterator[tuple[int, Any]]:
    pool = ProcessPoolExecutor(max_workers=workers)
    futures = {pool.submit(fn, *args): index for index, args in enumerate(tasks)}
    try:
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except Exception as exc:  # a worker died: its task's row says so
                yield futures[future], TaskFailure(f"worker process failed: {type(exc).__name__}: {exc}")
    finally:
        for future in futures:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(fn: Callable[..., Any], tasks: Sequence[tuple], engine: Engine) -> Iterator[tuple[int, Any]]:
    """At most :data:`MAX_IN_FLIGHT` tasks are submitted at once; each one finished makes room for the next, so
    that the scheduler and this client hold a bounded number of futures whatever the batch's size."""
    require_dask()
    from dask.distributed import as_completed as dask_completed

    batch = uuid.uuid4().hex[:12]
    with _client(engine) as client:

        def submit(index: int):
            return client.submit(fn, *tasks[index], key=f"onnxroof-{batch}-{index}", pure=False, retries=0)

        first = min(MAX_IN_FLIGHT, len(tasks))
        live = {index: submit(index) for index in range(first)}
        index_of = {future.key: index for index, future in live.items()}
        following = iter(range(first, len(tasks)))
        finished = dask_completed(list(live.values()))
        try:
            for future in finished:
                index = index_of.pop(future.key)
                del live[index]
                yield index, _outcome(future)
                future.release()
                upcoming = next(following, None)
                if upcoming is not None:
                    live[upcoming] = submit(upcoming)
                    index_of[live[upcoming].key] = upcoming
                    finished.add(live[upcoming])
        finally:
            client.cancel(list(live.values()))


def _outcome(future) -> Any:
    if future.status == "error":
        exc = future.exception()
        return TaskFailure(f"Dask task failed: {type(exc).__name__}: {exc}")
    if future.status == "cancelled":
        return TaskFailure("Dask task cancelled (was a worker lost?)")
    return future.result()


class _client:
    """A dask.distributed Client on the engine's cluster; an embedded LocalCluster is started and closed here."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.cluster = None
        self.client = None

    def __enter__(self):
        from dask.distributed import Client, LocalCluster

        if self.engine.kind is EngineKind.dask_local:
            self.cluster = LocalCluster(
                n_workers=self.engine.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            )
            self.client = Client(self.cluster)
            return self.client
        target = self.engine.scheduler or ""
        try:
            if Path(target).is_file():
                self.client = Client(scheduler_file=target, timeout=f"{CONNECT_TIMEOUT_S}s")
            else:
                self.client = Client(target, timeout=f"{CONNECT_TIMEOUT_S}s")
        except (OSError, TimeoutError) as exc:
            raise OnnxroofError(
                f"--scheduler {target}: cannot reach the Dask scheduler within {CONNECT_TIMEOUT_S} s ({exc})"
            ) from None
        return self.client

    def __exit__(self, *exc_info) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
