"""A model provider as a tool: one OpenAI-compatible ``POST /chat/completions`` per call.

The ``llm`` reasoner reaches its model only through the provider port of a run
(:data:`~toolproof.evidence.reasoners.ProviderCall`), so every exchange is a recorded
call: the request body is the call's arguments (in ``tool_called``, in the hash
chain), the endpoint's JSON response is the call's result (stored as evidence), and
frozen replay serves the recorded response without touching the network.

Works with any endpoint speaking the Chat Completions API: OpenAI
(``https://api.openai.com/v1``), vLLM and llama.cpp's server (``http://HOST:PORT/v1``),
Ollama (``http://127.0.0.1:11434/v1``). The API key is read from the environment
variable named by ``api_key_env`` at call time and sent as ``Authorization: Bearer``;
it is never an argument, so it never enters a run. The base URL appears in the tool's
description, its source name and its failure messages only as
:func:`toolproof.redaction.redact_url` stores it (userinfo removed, secret parameters
redacted).

Failures are typed, never plausible text:

* ``timeout``: no response within ``timeout_seconds``;
* ``unavailable``: the endpoint cannot be reached (connection refused, DNS);
* ``rate_limited``: HTTP 429 after ``max_retries`` retries (each waits ``Retry-After``
  seconds, at most :data:`MAX_RETRY_WAIT`); every retried 429 is reported as a failure
  this layer recovered from, so the run records it (``failure_observed``);
* ``tool_error``: any other HTTP error status (``detail.status``, ``detail.body``);
* ``invalid_result``: a body that is not a JSON object with ``choices[0].message.content``;
* ``refused``: the model refused (``message.refusal``, or ``finish_reason`` =
  ``content_filter``).
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from typing import Any

import httpx

from toolproof.contract.tools import ToolFailure, ToolResult
from toolproof.failures import FailureKind
from toolproof.redaction import redact_url
from toolproof.tools.declared import ToolContribution, bind_contribution
from toolproof.tools.observe import note_failure, note_recovery
from toolproof.tools.tool import Tool

__all__ = ["CHAT_REQUEST_SCHEMA", "MAX_RETRY_WAIT", "chat_provider_tool"]

MAX_RETRY_WAIT = 30.0
"""The longest wait before retrying a 429, in seconds, whatever ``Retry-After`` says."""

_EXCERPT = 500
"""Bytes of an error body kept in a failure's detail."""

_MESSAGE = {
    "type": "object",
    "properties": {
        "role": {"enum": ["system", "user", "assistant"]},
        "content": {"type": "string"},
    },
    "required": ["role", "content"],
    "additionalProperties": False,
}

CHAT_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "messages": {"type": "array", "items": _MESSAGE, "minItems": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "seed": {"type": "integer"},
        "max_tokens": {"type": "integer", "minimum": 1},
        "response_format": {"type": "object"},
    },
    "required": ["model", "messages"],
    "additionalProperties": False,
}
"""The arguments of the provider tool: the Chat Completions request body, as sent."""


def _retry_after(response: httpx.Response) -> float:
    raw = response.headers.get("retry-after", "").strip()
    if not raw:
        return 1.0
    try:
        seconds = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(raw) if raw else None
        seconds = parsed.timestamp() - time.time() if parsed is not None else 1.0
    if seconds != seconds:  # NaN
        return 1.0
    return min(max(seconds, 0.0), MAX_RETRY_WAIT)


def _http_failure(name: str, response: httpx.Response, kind: FailureKind) -> ToolResult:
    body = response.content[:_EXCERPT].decode("utf-8", "replace")
    return ToolResult.fail(
        kind,
        f"model provider {name!r}: HTTP {response.status_code} from "
        f"{redact_url(str(response.request.url))}",
        where="tool",
        retryable=kind == "rate_limited" or response.status_code >= 500,
        detail={"status": response.status_code, "body": body},
    )


def _checked(name: str, response: httpx.Response) -> ToolResult:
    try:
        value = response.json()
    except ValueError:
        excerpt = response.content[:_EXCERPT].decode("utf-8", "replace")
        return ToolResult.fail(
            "invalid_result",
            f"model provider {name!r}: the response body is not JSON",
            where="output",
            detail={"body": excerpt},
        )
    choices = value.get("choices") if isinstance(value, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(first, dict) or not isinstance(message, dict):
        return ToolResult.fail(
            "invalid_result",
            f"model provider {name!r}: the response has no choices[0].message",
            where="output",
        )
    refusal = message.get("refusal")
    if (isinstance(refusal, str) and refusal.strip()) or first.get(
        "finish_reason"
    ) == "content_filter":
        return ToolResult.fail(
            "refused",
            f"model provider {name!r}: the model refused: {refusal or 'content_filter'}",
            where="tool",
            detail={"refusal": refusal or "", "finish_reason": first.get("finish_reason")},
        )
    if not isinstance(message.get("content"), str):
        return ToolResult.fail(
            "invalid_result",
            f"model provider {name!r}: choices[0].message.content is not a string",
            where="output",
        )
    return ToolResult.success(value)


def chat_provider_tool(
    *,
    name: str,
    base_url: str,
    api_key_env: str | None = None,
    timeout_seconds: float = 60.0,
    max_retries: int = 2,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Tool:
    """Bind the provider tool ``name`` for the endpoint at ``base_url``.

    Args:
        name: the tool name the reasoner calls (``llm.chat``).
        base_url: the API root, e.g. ``http://127.0.0.1:8031/v1``; the tool POSTs to
            ``{base_url}/chat/completions``.
        api_key_env: the environment variable holding the API key (read at each call;
            ``None``: no ``Authorization`` header).
        timeout_seconds: the limit of one HTTP exchange, in seconds.
        max_retries: retries of a 429 answer before ``rate_limited``.
        transport: an httpx transport (default: a real connection).

    Returns:
        A Tool validating :data:`CHAT_REQUEST_SCHEMA`; see the module docstring for
        the failures it returns.

    """
    url = base_url.rstrip("/") + "/chat/completions"
    shown = redact_url(url)  # what failures, the description and the source name
    shown_base = redact_url(base_url)

    async def invoke(arguments: dict[str, Any]) -> ToolResult:
        headers = {"content-type": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env, "")
            if not key.strip():
                return ToolResult.fail(
                    "unavailable",
                    f"model provider {name!r}: the environment variable {api_key_env} "
                    "that should hold the API key is not set",
                    where="tool",
                )
            headers["authorization"] = f"Bearer {key}"
        async with httpx.AsyncClient(timeout=timeout_seconds, transport=transport) as client:
            for attempt in range(max_retries + 1):
                try:
                    response = await client.post(url, json=arguments, headers=headers)
                except httpx.TimeoutException:
                    return ToolResult.fail(
                        "timeout",
                        f"model provider {name!r}: no response from {shown} within "
                        f"{timeout_seconds:g} s",
                        where="tool",
                        retryable=True,
                    )
                except httpx.TransportError as exc:
                    return ToolResult.fail(
                        "unavailable",
                        f"model provider {name!r}: cannot reach {shown}: "
                        f"{type(exc).__name__}: {exc}",
                        where="tool",
                        retryable=True,
                    )
                if response.status_code == 429 and attempt < max_retries:
                    failure = _http_failure(name, response, FailureKind.RATE_LIMITED).failure
                    assert isinstance(failure, ToolFailure)
                    note_failure(failure)
                    note_recovery(failure, name)
                    await asyncio.sleep(_retry_after(response))
                    continue
                if response.status_code == 429:
                    return _http_failure(name, response, FailureKind.RATE_LIMITED)
                if response.status_code >= 400:
                    return _http_failure(name, response, FailureKind.TOOL_ERROR)
                return _checked(name, response)
        raise AssertionError("unreachable: the loop returns")  # pragma: no cover

    return bind_contribution(
        ToolContribution(
            name=name,
            description=f"Chat Completions at {shown_base} (the llm reasoner's model)",
            input_schema=CHAT_REQUEST_SCHEMA,
            invoke=invoke,
            source=f"provider:{shown_base}",
            deterministic=False,
            varies=("model",),
        )
    )
