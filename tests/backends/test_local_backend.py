"""The in-process ``LocalBackend`` and the one ``Backend`` seam every backend implements."""

from __future__ import annotations

import pytest
from backend_support import CONFIG, run

from toolproof.backends import Backend, BackendRequest, LocalBackend, ProcessPool
from toolproof.backends.protocol import descriptor_digest
from toolproof.config import load_toolset
from toolproof.contract.tools import ToolResult
from toolproof.errors import CanonicalizationError


def test_the_built_in_backends_are_one_protocol() -> None:
    from toolproof.backends.celery import CelerySettings
    from toolproof.backends.celery_backend import CeleryBackend

    celery = CeleryBackend(CelerySettings(broker="redis://127.0.0.1:1/0"))
    try:
        backends = [ProcessPool(CONFIG, workers=1), celery, LocalBackend(_echo)]
        assert [isinstance(backend, Backend) for backend in backends] == [True, True, True]
    finally:
        celery.close()


async def _echo(request: BackendRequest) -> ToolResult:
    return ToolResult.success({"variant": request.variant, "arguments": request.arguments})


def test_a_local_backend_serves_a_toolset_as_a_worker_would() -> None:
    async def go() -> tuple[object, str | None, object, list[str]]:
        async with load_toolset(CONFIG) as toolset, LocalBackend(toolset) as local:
            digest = descriptor_digest(toolset["add"])
            ok = await local.submit(BackendRequest("add", {"a": 1, "b": 2}, digest))
            stale = await local.submit(BackendRequest("add", {"a": 1, "b": 2}, "sha256:00"))
            bad = await local.submit(BackendRequest("add", {"a": "1", "b": 2}, digest))
            assert stale.failure is not None and bad.failure is not None
            sent = [request.variant for request in local.sent]
            return ok.value, stale.failure.kind, bad.failure.kind, sent

    assert run(go()) == (3, "descriptor_mismatch", "invalid_arguments", ["add", "add", "add"])


def test_a_local_backend_crosses_the_wire_format() -> None:
    local = LocalBackend(_echo)
    result = run(local.submit(BackendRequest("t", {"b": [1.0, None], "a": "x"}, "sha256:ab")))
    assert result.value == {"variant": "t", "arguments": {"a": "x", "b": [1, None]}}
    assert (local.sent[0].timeout, dict(local.sent[0].options)) == (None, {})  # not on the wire
    with pytest.raises(CanonicalizationError):
        run(local.submit(BackendRequest("t", {"a": float("nan")}, "sha256:ab")))
    run(local.aclose())
    assert local.closed
