"""``LocalBackend``: the in-process backend, shipped the way httpx ships ``MockTransport``.

It serves each :class:`~toolproof.backends.protocol.BackendRequest` as a worker
would, in the caller's own process and event loop: the request and the result
cross the wire format (RFC 8785 canonical JSON, so a value with no JSON form fails
here as it would on a pipe), the named variant is looked up in a Toolset, its
descriptor is compared and the arguments are validated again
(:func:`~toolproof.backends.protocol.serve_request`). Use it in tests and examples
that exercise a backend layer without starting processes or a broker::

    async with LocalBackend(toolset) as local:
        result = await local.submit(BackendRequest("add", {"a": 1, "b": 2}, digest))

or hand it a ``handler(request) -> ToolResult`` to answer with a chosen result or
fault.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Self, TypeAlias

from toolproof.backends.protocol import (
    BackendRequest,
    decode_request,
    decode_result,
    encode_request,
    encode_result,
    serve_request,
)
from toolproof.contract.tools import ToolResult
from toolproof.tools.toolset import Toolset

__all__ = ["Handler", "LocalBackend"]

Handler: TypeAlias = Callable[[BackendRequest], Awaitable[ToolResult]]
"""``async (request) -> ToolResult``: what a :class:`LocalBackend` answers with."""


class LocalBackend:
    """A :class:`~toolproof.backends.protocol.Backend` that runs each call in this process.

    Args:
        target: the "worker's" Toolset (each request's variant is looked up there,
            as :mod:`toolproof.backends.worker` does), or a handler answering each
            decoded request.

    Attributes:
        sent: every request submitted, as decoded from its wire bytes, in order.
        closed: whether :meth:`aclose` ran.

    """

    def __init__(self, target: Toolset | Handler) -> None:
        self._target = target
        self.sent: list[BackendRequest] = []
        self.closed = False

    async def submit(self, request: BackendRequest) -> ToolResult:
        """Serve ``request`` through the wire format; return the decoded result.

        Raises:
            CanonicalizationError: an argument has no JSON form (as on a pipe).
            Exception: whatever a handler raises (the backend form turns it into a
                ``backend`` failure).

        """
        decoded = decode_request(
            encode_request(request.variant, request.arguments, request.descriptor)
        )
        self.sent.append(decoded)
        target = self._target
        if isinstance(target, Toolset):
            result = await serve_request(target, decoded)
        else:
            result = await target(decoded)
        return decode_result(encode_result(result))

    async def aclose(self) -> None:
        """Mark the backend closed (it holds no workers); idempotent."""
        self.closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"LocalBackend({self._target!r}, {len(self.sent)} sent)"
