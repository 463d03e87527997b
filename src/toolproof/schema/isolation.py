"""Validation bounded in time and memory, in worker processes: the backstop of the limits.

The limits of :mod:`toolproof.schema.limits` refuse a schema bomb at bind, counted on
the walker's model of the validator. This module is what holds when that model is
wrong, however the schema was built: a tool whose schema is *heavy* (see
:func:`toolproof.schema.limits.needs_isolation`) validates each call in a worker
process of a small pool, under

* a deadline, :attr:`ValidationBounds.seconds` (default 5 s): a worker still
  validating then is killed (SIGKILL) and replaced;
* a memory cap, :attr:`ValidationBounds.memory_bytes` (default 1 GiB), set as the
  worker's ``RLIMIT_AS``: an allocation past it fails, the validator aborts, and the
  worker is replaced.

Either is reported as :class:`ValidationLimitError`, which a tool turns into an
``invalid_arguments`` (or ``invalid_result``) failure naming the limit. The calling
event loop only awaits the worker (a thread of this module's own pool waits on the
pipe), so a runaway validation never delays another call or client of a server.

The workers are ``python -m toolproof.schema.isolation`` subprocesses speaking
length-prefixed JSON on their stdin/stdout, not ``multiprocessing`` children: those
re-import the parent's ``__main__`` (spawn and forkserver both do), which would run a
user's unguarded script again in every worker.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_BOUNDS",
    "MAX_VALIDATION_MEMORY",
    "MAX_VALIDATION_SECONDS",
    "IsolatedSchema",
    "ValidationBounds",
    "ValidationLimitError",
    "configure_validation",
    "validation_bounds",
]

MAX_VALIDATION_SECONDS = 5.0
"""Default deadline of validating one call (or one result) of a heavy schema, seconds."""

MAX_VALIDATION_MEMORY = 1 << 30
"""Default address-space cap of a validation worker (``RLIMIT_AS``), bytes (1 GiB)."""

_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The folder holding the ``toolproof`` package the workers import (the caller's copy)."""

_STARTUP_SECONDS = 120.0
"""How long a new worker may take to import and signal that it is ready (not part of
any call's deadline: a loaded machine starts Python slowly)."""

_WORKER_CACHE = 64
"""Compiled validators a worker keeps (least recently used dropped first)."""


@dataclass(frozen=True)
class ValidationBounds:
    """How validating one call of a heavy schema is bounded (process-wide).

    Attributes:
        seconds: the deadline per call, from the request to the worker's answer
            (a positive number; default :data:`MAX_VALIDATION_SECONDS`).
        memory_bytes: the worker's ``RLIMIT_AS`` in bytes, at least 64 MiB (default
            :data:`MAX_VALIDATION_MEMORY`).
        workers: worker processes (and calls validated at once; more wait), 1 to 64.

    Raises:
        ValueError: a bound out of its range, naming it.

    """

    seconds: float = MAX_VALIDATION_SECONDS
    memory_bytes: int = MAX_VALIDATION_MEMORY
    workers: int = 2

    def __post_init__(self) -> None:
        if type(self.seconds) not in (int, float) or not 0 < self.seconds <= 3600:
            raise ValueError(f"ValidationBounds.seconds must be in (0, 3600], not {self.seconds!r}")
        if type(self.memory_bytes) is not int or self.memory_bytes < 64 << 20:
            raise ValueError(
                f"ValidationBounds.memory_bytes must be an integer of at least 64 MiB "
                f"({64 << 20}), not {self.memory_bytes!r}"
            )
        if type(self.workers) is not int or not 1 <= self.workers <= 64:
            raise ValueError(f"ValidationBounds.workers must be 1 to 64, not {self.workers!r}")

    def describe_seconds(self) -> str:
        """``5 s``, ``0.5 s``."""
        return f"{self.seconds:g} s"

    def describe_memory(self) -> str:
        """``1 GiB``, ``256 MiB`` (or bytes when neither divides it)."""
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
            if self.memory_bytes % size == 0:
                return f"{self.memory_bytes // size} {unit}"
        return f"{self.memory_bytes} bytes"


DEFAULT_BOUNDS = ValidationBounds()


class ValidationLimitError(Exception):
    """Validating one value passed a bound of :class:`ValidationBounds`.

    Attributes:
        limit: ``"seconds"`` or ``"memory_bytes"``.
        text: ``validation exceeded 5 s`` / ``validation exceeded 1 GiB``.
        bounds: the bounds the validation ran under.

    """

    def __init__(self, limit: str, text: str, bounds: ValidationBounds) -> None:
        super().__init__(text)
        self.limit = limit
        self.text = text
        self.bounds = bounds


class _WorkerExited(ValueError):
    """A worker ended without a signal (it could not start): reported as the validator's error."""


class _Worker:
    """One worker process and the validators it is known to hold."""

    def __init__(self, bounds: ValidationBounds) -> None:
        # this interpreter and this copy of toolproof; -P: the working directory (where a
        # user's json.py or select.py may sit) is not put on the worker's import path
        paths = [_SOURCE_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "toolproof.schema.isolation", str(bounds.memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        )
        self.known: OrderedDict[str, None] = OrderedDict()
        self.started = False

    def wait_started(self) -> None:
        """Wait for the worker's ready signal (its imports done): the deadline starts after.

        Raises:
            _WorkerExited: it exited, or gave no signal within :data:`_STARTUP_SECONDS`.

        """
        if self.started:
            return
        stdout = self.process.stdout
        assert stdout is not None
        try:
            signal = _read(stdout.fileno(), 8, time.monotonic() + _STARTUP_SECONDS)
        except EOFError:
            signal = None
        if signal != bytes(8):
            self.kill()
            raise _WorkerExited(
                f"the validation worker did not start (exit status {self.process.returncode})"
            )
        self.started = True

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class _Pool:
    """Worker processes, each used by one thread of a private executor at a time."""

    def __init__(self, bounds: ValidationBounds) -> None:
        self.bounds = bounds
        self.executor = ThreadPoolExecutor(bounds.workers, thread_name_prefix="toolproof-validate")
        self.idle: list[_Worker] = []
        self.lock = threading.Lock()
        self.closed = False
        self.pid = os.getpid()  # a forked child makes its own pool: these threads are not its

    def submit(self, key: str, schema: str, instance: Any, limit: int) -> Future[list[list[str]]]:
        return self.executor.submit(self._exchange, key, schema, instance, limit)

    def _take(self) -> _Worker:
        with self.lock:
            while self.idle:
                worker = self.idle.pop()
                if worker.process.poll() is None:
                    return worker
                worker.kill()
        return _Worker(self.bounds)

    def _give_back(self, worker: _Worker) -> None:
        with self.lock:
            if not self.closed:
                self.idle.append(worker)
                return
        worker.kill()

    def _exchange(self, key: str, schema: str, instance: Any, limit: int) -> list[list[str]]:
        worker = self._take()
        try:
            worker.wait_started()
            deadline = time.monotonic() + self.bounds.seconds
            reply = self._ask(worker, key, schema, instance, limit, deadline)
        except (ValidationLimitError, _WorkerExited):
            worker.kill()
            with contextlib.suppress(RuntimeError):  # the pool was closed meanwhile
                self.executor.submit(self._warm)
            raise
        self._give_back(worker)
        if "error" in reply:
            raise ValueError(str(reply["error"]))
        errors: list[list[str]] = reply["errors"]
        return errors

    def _ask(
        self, worker: _Worker, key: str, schema: str, instance: Any, limit: int, deadline: float
    ) -> dict[str, Any]:
        for send_schema in (key not in worker.known, True):
            request = {"key": key, "instance": instance, "limit": limit}
            if send_schema:
                request["schema"] = schema
            reply = self._round_trip(worker, request, deadline)
            if "missing" not in reply:
                worker.known[key] = None
                worker.known.move_to_end(key)
                while len(worker.known) > _WORKER_CACHE:
                    worker.known.popitem(last=False)
                return reply
        raise AssertionError("the worker refused a schema it was sent")  # pragma: no cover

    def _round_trip(
        self, worker: _Worker, request: dict[str, Any], deadline: float
    ) -> dict[str, Any]:
        stdin, stdout = worker.process.stdin, worker.process.stdout
        assert stdin is not None and stdout is not None
        data = json.dumps(request, ensure_ascii=False).encode("utf-8")
        try:
            stdin.write(len(data).to_bytes(8, "big") + data)
            stdin.flush()
            header = _read(stdout.fileno(), 8, deadline)
            if header is None:
                raise self._over("seconds")
            body = _read(stdout.fileno(), int.from_bytes(header, "big"), deadline)
            if body is None:
                raise self._over("seconds")
        except (BrokenPipeError, EOFError):
            status = worker.process.wait()
            if status < 0:  # killed by a signal: the validator aborts when it cannot allocate
                raise self._over("memory_bytes") from None
            raise _WorkerExited(f"the validation worker exited with status {status}") from None
        reply: dict[str, Any] = json.loads(body)
        if reply.get("memory"):
            raise self._over("memory_bytes")
        return reply

    def _over(self, limit: str) -> ValidationLimitError:
        size = (
            self.bounds.describe_seconds() if limit == "seconds" else self.bounds.describe_memory()
        )
        return ValidationLimitError(limit, f"validation exceeded {size}", self.bounds)

    def _warm(self) -> None:
        """Start a worker ahead of the next call (after one was killed)."""
        with self.lock:
            if self.closed or len(self.idle) >= self.bounds.workers:
                return
        worker = _Worker(self.bounds)
        try:
            worker.wait_started()
        except _WorkerExited:
            return  # the next call starts one and reports why it cannot
        self._give_back(worker)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.kill()
        self.executor.shutdown(wait=False)


def _read(fd: int, size: int, deadline: float | None = None) -> bytes | None:
    """``size`` bytes from ``fd``, or ``None`` once ``deadline`` passes.

    ``deadline`` is ``time.monotonic()`` seconds; ``None`` waits as long as it takes.
    Raises EOFError when ``fd`` closes first.
    """
    chunks: list[bytes] = []
    while size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


_STATE: dict[str, Any] = {"bounds": DEFAULT_BOUNDS, "pool": None}
_STATE_LOCK = threading.Lock()


def configure_validation(bounds: ValidationBounds) -> None:
    """Set the bounds of isolated validation for this process (idle workers retire).

    Calls already validating finish under the bounds they started with.
    """
    with _STATE_LOCK:
        pool = _STATE["pool"]
        _STATE["bounds"], _STATE["pool"] = bounds, None
    if pool is not None:
        pool.close()


def validation_bounds() -> ValidationBounds:
    """The bounds in force (:data:`DEFAULT_BOUNDS` unless :func:`configure_validation` ran)."""
    bounds: ValidationBounds = _STATE["bounds"]
    return bounds


def _pool() -> _Pool:
    with _STATE_LOCK:
        pool = _STATE["pool"]
        if pool is None or pool.pid != os.getpid():
            pool = _STATE["pool"] = _Pool(_STATE["bounds"])
        return pool  # type: ignore[no-any-return]


@atexit.register
def _close_at_exit() -> None:
    pool = _STATE["pool"]
    if pool is not None and pool.pid == os.getpid():
        pool.close()


class IsolatedSchema:
    """One schema, validated in the worker pool under :func:`validation_bounds`.

    Args:
        schema: the JSON Schema (plain JSON; compiled in the worker as
            :func:`toolproof.schema.validation.compile_validator` compiles it).

    """

    __slots__ = ("_key", "_text")

    def __init__(self, schema: Any) -> None:
        self._text = json.dumps(schema, ensure_ascii=False, sort_keys=False)
        self._key = hashlib.sha256(self._text.encode("utf-8")).hexdigest()

    def _submit(self, instance: Any, limit: int) -> Future[list[list[str]]]:
        try:
            return _pool().submit(self._key, self._text, instance, limit)
        except RuntimeError:  # configure_validation closed that pool meanwhile
            return _pool().submit(self._key, self._text, instance, limit)

    async def errors(self, instance: Any, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` errors of ``instance`` (``[]``: valid), awaited off the event loop.

        Args:
            instance: plain JSON (checked by :func:`~toolproof.schema.validation.json_problem`).
            limit: the most errors to collect (at least 1).

        Returns:
            ``(JSON Pointer into the instance, message)`` pairs, in validator order.

        Raises:
            ValidationLimitError: the deadline or the memory cap was passed.
            ValueError: the validator raised on the instance (message kept).

        """
        found = await asyncio.wrap_future(self._submit(instance, limit))
        return [(pointer, message) for pointer, message in found]

    def errors_blocking(self, instance: Any, limit: int) -> list[tuple[str, str]]:
        """:meth:`errors` for a synchronous caller: blocks its thread (never past the bounds)."""
        found = self._submit(instance, limit).result()
        return [(pointer, message) for pointer, message in found]


def _serve(memory_bytes: int) -> None:  # pragma: no cover - runs in the worker process
    """The worker: answer length-prefixed JSON requests on stdin until it closes."""
    import resource

    from toolproof.schema.validation import compile_validator, validation_errors

    out = os.dup(1)
    os.dup2(2, 1)  # nothing printed may corrupt the replies
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    cache: OrderedDict[str, Any] = OrderedDict()
    os.write(out, bytes(8))  # ready: an empty message
    while True:
        try:
            header = _read(0, 8)
            body = _read(0, int.from_bytes(header or b"", "big"))
        except EOFError:  # the parent closed the pipe: this worker's end
            return
        request = json.loads(body or b"{}")
        reply: dict[str, Any]
        try:
            key = request["key"]
            validator = cache.get(key)
            if validator is None and "schema" not in request:
                reply = {"missing": True}
            else:
                if validator is None:
                    validator = cache[key] = compile_validator(json.loads(request["schema"]))
                    while len(cache) > _WORKER_CACHE:
                        cache.popitem(last=False)
                cache.move_to_end(key)
                instance = request["instance"]
                errors = []
                if not validator.is_valid(instance):
                    found = validation_errors(validator, instance, request["limit"])
                    errors = [[error.pointer, error.message] for error in found]
                reply = {"errors": errors}
        except MemoryError:
            cache.clear()
            reply = {"memory": True}
        except Exception as exc:  # the validator's own error, reported as a refusal
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(reply, ensure_ascii=False).encode("utf-8")
        view = memoryview(len(data).to_bytes(8, "big") + data)
        while view:
            view = view[os.write(out, view) :]


if __name__ == "__main__":  # pragma: no cover - the worker's entry point
    _serve(int(sys.argv[1]))
