"""The relocation protocol: what a backend sends to a worker and what comes back.

A backend never ships a callable. It sends a **request**, the RFC 8785 canonical
JSON of::

    {"protocol": 1, "variant": "add", "arguments": {...}, "descriptor": "sha256:...",
     "trace": {"traceparent": "00-...", "tracestate": "..."}, "idempotency_key": "idem_..."}

``variant`` names the tool *inside* the backend, ``arguments`` are the arguments the
caller already validated against it, and ``descriptor`` is the digest of that
variant's :class:`~toolproof.contract.tools.ToolDescriptor` on the caller's side
(name, version, and a fingerprint over spec, source and extension stack). The
worker built the same Toolset from the same composition root; it looks the variant
up by name, refuses a descriptor that differs from its own (naming both digests),
runs the variant and answers with the canonical JSON of a
:class:`~toolproof.contract.tools.ToolResult`. Nothing is pickled, so a worker runs
only code its own composition root bound.

``trace`` (present only with telemetry on, :mod:`toolproof.tools.hooks`) is the W3C
Trace Context of the caller's submit span; the worker's span continues that trace.
``idempotency_key`` (present only when the call has one: a recording session's call,
:mod:`toolproof.tools.idempotency`) is the call's key; the body reads it in the worker
as it would in the caller's process.

In the caller's process the same request is a :class:`BackendRequest`, and every
backend (the ``process`` pool, the ``celery`` client, the in-process
:class:`~toolproof.backends.local.LocalBackend`, a plugin's) is a :class:`Backend`:
``async submit(request) -> ToolResult`` and ``aclose()``, the way every httpx
transport is ``handle_async_request(request) -> Response``. Policy (retries, a
cache) lives in the layers around a backend, never inside it.

The process backend frames each message on a pipe as a 4-byte big-endian length
followed by the JSON bytes (:func:`frame`, :class:`FrameReader`).
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from toolproof.contract.tools import ToolResult
from toolproof.errors import ProtocolError, validation_problem
from toolproof.identity import canonical_json, digest_json
from toolproof.tools import hooks
from toolproof.tools.idempotency import current_idempotency_key
from toolproof.tools.observe import observe
from toolproof.tools.resources import ResourceKey
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = [
    "DESCRIPTOR_DIGESTS",
    "MAX_FRAME",
    "PROTOCOL_VERSION",
    "Backend",
    "BackendRequest",
    "FrameReader",
    "ProtocolError",
    "decode_request",
    "decode_result",
    "descriptor_digest",
    "encode_request",
    "encode_result",
    "frame",
    "serve_request",
]

PROTOCOL_VERSION = 1
"""The version of the request/response format; a worker refuses any other."""

MAX_FRAME = 256 * 1024 * 1024
"""The largest message (bytes) a pipe frame may carry: 256 MiB."""

_HEADER = struct.Struct(">I")


_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


def _no_options() -> Mapping[str, Any]:
    return _NO_OPTIONS


DESCRIPTOR_DIGESTS = ResourceKey[dict[str, str]]("backends.descriptor_digests")
"""A worker's cache, per sealed Toolset: variant name -> its descriptor digest."""


@dataclass(frozen=True, slots=True)
class BackendRequest:
    """One call a backend executes: what travels to the worker, and how to deliver it.

    Attributes:
        variant: the name of the tool to run on the worker (the tool *inside* the
            backend layer).
        arguments: the JSON arguments object, already validated by the caller.
        descriptor: the caller's descriptor digest of that tool (``sha256:<hex>``,
            :func:`descriptor_digest`); the worker refuses a different one.
        timeout: seconds the call may take (``None``: the backend's own limit, or
            none); over it the backend answers ``kind="timeout"``.
        options: per-call delivery options, not sent to the body (the ``celery``
            backend's ``queue``, ``countdown``, ``priority``, ``expires``); empty
            unless the backend form declares ``call_options``.
        trace: the caller's W3C Trace Context (``traceparent``, ``tracestate``), or
            empty; on the caller's side it is read from the current span when the
            request is encoded.
        idempotency_key: the call's idempotency key, or ``""``; on the caller's side it
            is read from the running call when the request is encoded.
        retry_safe: whether running the call again is harmless: the tool is read-only,
            idempotent or honours the idempotency key (caller's side only; an engine
            that retries, such as ``temporal``, retries only such calls).

    Only ``variant``, ``arguments``, ``descriptor``, ``trace`` and ``idempotency_key``
    cross the wire (:func:`encode_request`); a decoded request has no timeout, no
    options and ``retry_safe`` False.
    """

    variant: str
    arguments: dict[str, Any]
    descriptor: str
    timeout: float | None = None
    options: Mapping[str, Any] = field(default_factory=_no_options)
    trace: Mapping[str, str] = field(default_factory=_no_options)
    idempotency_key: str = ""
    retry_safe: bool = False


@runtime_checkable
class Backend(Protocol):
    """Executes exactly one call elsewhere (a worker process, a Celery worker, in-process).

    Implementations: :class:`~toolproof.backends.process.ProcessPool`,
    :class:`~toolproof.backends.celery_backend.CeleryBackend`,
    :class:`~toolproof.backends.local.LocalBackend`. Build one into a variant with
    the backend form, :func:`toolproof.backends.decorators.backend`.
    """

    async def submit(self, request: BackendRequest) -> ToolResult:
        """Run ``request.variant`` on ``request.arguments``; return its result.

        An engine fault (a dead worker, an unreachable broker, a timeout) is a
        failed :class:`ToolResult` naming it, never an exception and never a
        fabricated success; cancellation propagates.
        """
        ...

    async def aclose(self) -> None:
        """Release the backend's workers and connections; idempotent."""
        ...


_KEY = re.compile(r"idem_[0-9a-f]{64}")
_TRACE_KEYS = frozenset({"traceparent", "tracestate"})
_TRACE_MAX = 1024
"""The longest ``traceparent``/``tracestate`` value (characters) a worker accepts."""


def descriptor_digest(tool: Tool) -> str:
    """The digest (``sha256:<hex>``) of ``tool``'s descriptor, compared across processes."""
    return digest_json(tool.descriptor().to_json())


def encode_request(
    variant: str,
    arguments: dict[str, Any],
    descriptor: str,
    trace: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
) -> bytes:
    """The canonical JSON bytes of a request.

    Args:
        variant: the tool the worker runs.
        arguments: its validated arguments.
        descriptor: the caller's descriptor digest of ``variant``.
        trace: the W3C Trace Context to send; ``None``: the current span's
            (:func:`toolproof.tools.hooks.carrier`, empty with telemetry off). An empty
            context adds no ``trace`` field.
        idempotency_key: the key to send; ``None``: the running call's
            (:func:`~toolproof.tools.idempotency.current_idempotency_key`); no key (or
            ``""``) adds no ``idempotency_key`` field.

    Raises:
        CanonicalizationError: an argument has no JSON form.

    """
    message: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "variant": variant,
        "arguments": arguments,
        "descriptor": descriptor,
    }
    carried = hooks.carrier() if trace is None else trace
    if carried:
        message["trace"] = dict(carried)
    key = current_idempotency_key() if idempotency_key is None else idempotency_key
    if key:
        message["idempotency_key"] = key
    return canonical_json(message)


def _trace_of(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if (
        not isinstance(value, dict)
        or not set(value) <= _TRACE_KEYS
        or not all(isinstance(item, str) and len(item) <= _TRACE_MAX for item in value.values())
    ):
        raise ProtocolError(
            "request field 'trace' must be an object of W3C Trace Context strings "
            f"(keys traceparent, tracestate; at most {_TRACE_MAX} characters each)"
        )
    return dict(value)


def decode_request(data: bytes | str) -> BackendRequest:
    """Parse and check a request.

    Raises:
        ProtocolError: not JSON, a missing or mistyped field, or another protocol version.

    """
    try:
        message = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"request is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("request must be a JSON object")
    version = message.get("protocol")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"request has protocol version {version!r}, this worker speaks {PROTOCOL_VERSION}"
        )
    variant, arguments, descriptor = (
        message.get("variant"),
        message.get("arguments"),
        message.get("descriptor"),
    )
    if not isinstance(variant, str):
        raise ProtocolError("request field 'variant' must be a string")
    if not isinstance(arguments, dict):
        raise ProtocolError("request field 'arguments' must be a JSON object")
    if not isinstance(descriptor, str):
        raise ProtocolError("request field 'descriptor' must be a string")
    trace = _trace_of(message.get("trace"))
    key = message.get("idempotency_key", "")
    if not isinstance(key, str) or (key and not _KEY.fullmatch(key)):
        raise ProtocolError("request field 'idempotency_key' must be 'idem_' and 64 hex digits")
    return BackendRequest(variant, arguments, descriptor, trace=trace, idempotency_key=key)


def encode_result(result: ToolResult) -> bytes:
    """The canonical JSON bytes of ``result``."""
    return result.canonical()


def decode_result(data: bytes | str) -> ToolResult:
    """Parse a worker's answer into a :class:`ToolResult`.

    Raises:
        ProtocolError: the answer is not the JSON of a ToolResult.

    """
    try:
        return ToolResult.model_validate_json(data)
    except ValidationError as exc:
        first = validation_problem(exc)
        raise ProtocolError(f"answer is not a ToolResult: {first.message}") from None


async def serve_request(toolset: Toolset, request: BackendRequest) -> ToolResult:
    """Run one request against the worker's ``toolset`` (the worker side of the protocol).

    With telemetry on, the run is a ``SERVER`` span ``toolproof.backend.run {variant}``
    continuing the caller's trace (``request.trace``), with ``gen_ai.tool.name``,
    ``toolproof.worker.pid`` and, for a failure (a refused request included),
    ``error.type``.

    The arguments are validated again against the variant's schema (a broker is not
    a trusted channel), so a request the caller did not validate never reaches a body.

    Returns:
        The variant's result, or a failure with ``where="worker"``: ``kind="backend"``
        when the worker has no such variant, ``kind="descriptor_mismatch"`` when the
        caller's and the worker's descriptors differ (both digests are named).

    """
    attributes: dict[str, str | int] = {
        "gen_ai.tool.name": request.variant,
        "toolproof.worker.pid": os.getpid(),
    }
    name = f"toolproof.backend.run {request.variant}"
    with hooks.span(name, attributes, kind="server", parent=request.trace) as span:
        result = await _run_request(toolset, request)
        if result.failure is not None:
            hooks.fail(span, result.failure.kind, result.failure.message)
        return result


async def _run_request(toolset: Toolset, request: BackendRequest) -> ToolResult:
    tool = toolset.get(request.variant)
    if tool is None:
        return ToolResult.fail(
            "backend",
            f"worker toolset has no tool {request.variant!r} (rule: caller and worker build "
            "the same Toolset from the same composition root)",
            where="worker",
        )
    digests = toolset.resources.setdefault(DESCRIPTOR_DIGESTS, dict)
    mine = digests.get(request.variant)
    if mine is None:
        mine = descriptor_digest(tool)
        if toolset.sealed:  # a sealed Toolset's descriptors never change
            digests[request.variant] = mine
    if mine != request.descriptor:
        return ToolResult.fail(
            "descriptor_mismatch",
            f"tool {request.variant!r}: caller descriptor {request.descriptor} differs from "
            f"worker descriptor {mine} (rule: caller and worker build the same Toolset from "
            "the same composition root; restart the worker with the caller's toolproof.toml)",
            where="worker",
            detail={"caller_descriptor": request.descriptor, "worker_descriptor": mine},
        )
    key = request.idempotency_key
    if key and current_idempotency_key() != key:  # a worker: the body reads the caller's key
        return (await observe(tool.call(request.arguments), idempotency_key=key)).result
    return await tool.call(request.arguments)  # in the caller's call (local): its scope


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its 4-byte big-endian length.

    Raises:
        ProtocolError: the payload is larger than :data:`MAX_FRAME`.

    """
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f"message of {len(payload)} bytes exceeds {MAX_FRAME} bytes")
    return _HEADER.pack(len(payload)) + payload


class FrameReader:
    """Collects bytes read from a pipe and yields complete frames."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk``; return every frame it completes, in order.

        Raises:
            ProtocolError: a frame announces more than :data:`MAX_FRAME` bytes.

        """
        buffer = self._buffer
        buffer.extend(chunk)
        frames: list[bytes] = []
        while len(buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buffer)
            if size > MAX_FRAME:
                raise ProtocolError(f"frame announces {size} bytes, over {MAX_FRAME} bytes")
            end = _HEADER.size + size
            if len(buffer) < end:
                break
            frames.append(bytes(buffer[_HEADER.size : end]))
            del buffer[:end]
        return frames

    @property
    def pending(self) -> int:
        """Bytes held that do not yet form a complete frame."""
        return len(self._buffer)
