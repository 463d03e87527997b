"""Helpers shared by the built-in wrappers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolproof.contract.tools import ToolSpec
from toolproof.errors import ExtensionError
from toolproof.extensions.schema import add_reserved
from toolproof.tools.tool import Tool

__all__ = ["StrictConfig", "base_dir", "require_repeatable", "wrapper_spec"]


class StrictConfig(BaseModel):
    """Base of the built-in config models: frozen, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def wrapper_spec(
    inner: Tool, name: str, reserved: Mapping[str, Mapping[str, Any]] | None = None
) -> ToolSpec:
    """The spec of a wrapper variant: the inner spec renamed, plus reserved params."""
    update: dict[str, Any] = {"name": name}
    if reserved:
        update["input_schema"] = add_reserved(inner.spec.input_schema, reserved)
    return inner.spec.model_copy(update=update)


def require_repeatable(inner: Tool, extension: str, force: bool, *, keyed: bool = False) -> None:
    """Refuse ``extension`` on a tool marked neither read-only nor idempotent, unless forced.

    MCP's ``readOnlyHint``/``idempotentHint`` (``ToolAnnotations.is_idempotent``) tell
    whether running a call twice, or not at all, is harmless. With ``keyed`` (``retry``:
    it runs the *same* call again, with the same idempotency key) a tool that honours
    the key (``ToolSpec.idempotency == "key"``) is allowed too; ``cache`` is not keyed
    (a cached answer would swallow a second, deliberate occurrence).

    Raises:
        ExtensionError: the tool is not marked; ``rule`` says how to proceed.

    """
    if force or inner.spec.annotations.is_idempotent or (keyed and inner.spec.honours_key):
        return
    if keyed:
        how = (
            ", nor does it honour the idempotency key (rule: mark the tool read_only, "
            'idempotent or idempotency = "key": @toolproof.tool(read_only=True), '
            '@toolproof.tool(idempotent=True) or @toolproof.tool(idempotency="key") on a '
            "Python function; readOnlyHint or idempotentHint on a declared or MCP tool, or "
            'idempotency = "key" in its [tools.NAME] table'
        )
    else:
        how = (
            " (rule: mark the tool read-only or idempotent: @toolproof.tool(read_only=True) or "
            "@toolproof.tool(idempotent=True) on a Python function, readOnlyHint or "
            "idempotentHint on a declared or MCP tool"
        )
    raise ExtensionError(
        f"{extension!r} refused on tool {inner.name!r}: it is marked neither read-only nor "
        f"idempotent{how}; or set config force = true)"
    )


def base_dir(context: Any) -> Path:
    """The directory relative paths in a config are relative to (the config file's)."""
    directory = getattr(context, "base_dir", None)
    return Path(directory) if directory is not None else Path.cwd()
