"""``audit``: one JSON line per call (arguments, outcome, timing), appended to a file.

Listed argument paths (JSON Pointers, RFC 6901) are replaced by
``{"redacted": <JSON kind>, "digest": "sha256:..."}`` before anything is written, so
the log can prove which value was sent without holding it.
"""

from __future__ import annotations

import asyncio
import copy
import os
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import field_validator

from toolproof.contract.tools import ToolResult
from toolproof.extensions.wrappers.common import StrictConfig, base_dir, wrapper_spec
from toolproof.identity import canonical_json, digest_json
from toolproof.tools.tool import Tool

__all__ = ["AuditConfig", "audit_factory", "json_kind", "redact"]


class AuditConfig(StrictConfig):
    """Config of ``audit``.

    Attributes:
        path: the JSONL file (relative to the config file); created if missing, only appended.
        redact: JSON Pointers into the arguments whose values are replaced by kind and digest.

    """

    path: str
    redact: tuple[str, ...] = ()

    @field_validator("redact")
    @classmethod
    def _pointers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pointer in value:
            if not pointer.startswith("/"):
                raise ValueError(f"{pointer!r} is not a JSON Pointer (RFC 6901: starts with '/')")
        return value


def json_kind(value: Any) -> str:
    """The JSON kind of a value: ``object``, ``array``, ``string``, ``integer``, ``number``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _parts(pointer: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]


def redact(arguments: dict[str, Any], pointers: tuple[str, ...]) -> dict[str, Any]:
    """Return a copy of ``arguments`` with each present pointer's value redacted."""
    if not pointers:
        return arguments
    out = copy.deepcopy(arguments)
    for pointer in pointers:
        parent: Any = None
        node: Any = out
        key: Any = None
        for part in _parts(pointer):
            parent = node
            if isinstance(node, dict) and part in node:
                key = part
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                key = int(part)
            else:
                parent = None
                break
            node = node[key]
        if parent is not None:
            parent[key] = {"redacted": json_kind(node), "digest": digest_json(node)}
    return out


def _append(path: str, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, canonical_json(record) + b"\n")
    finally:
        os.close(fd)


def audit_factory(inner: Tool, *, name: str, config: Any, context: Any = None) -> Tool:
    """Build the ``audit`` variant of ``inner``; see :class:`AuditConfig`.

    Each line: ``ts`` (UTC ISO 8601), ``tool``, ``arguments`` (redacted), ``ok``,
    ``value_digest`` (success) or ``failure`` (kind, message, where), ``duration_s``.
    A cancelled call is logged with failure kind ``cancelled`` and still propagates.
    """
    cfg: AuditConfig = config
    target = base_dir(context) / cfg.path
    target.parent.mkdir(parents=True, exist_ok=True)
    path = str(target)
    run = inner.run_validated

    async def body(arguments: dict[str, Any]) -> ToolResult:
        record: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="microseconds"),
            "tool": name,
            "arguments": redact(arguments, cfg.redact),
        }
        started = time.perf_counter()
        try:
            result = await run(arguments)
        except asyncio.CancelledError:
            record.update(
                ok=False,
                failure={
                    "kind": "cancelled",
                    "message": "the call was cancelled",
                    "where": "caller",
                },
                duration_s=round(time.perf_counter() - started, 6),
            )
            _append(path, record)
            raise
        record["ok"] = result.ok
        if result.failure is None:
            record["value_digest"] = digest_json(result.value)
        else:
            failure = result.failure
            record["failure"] = {
                "kind": failure.kind.value,
                "message": failure.message,
                "where": failure.where.value,
            }
        record["duration_s"] = round(time.perf_counter() - started, 6)
        _append(path, record)
        return result

    return Tool(wrapper_spec(inner, name), body)
