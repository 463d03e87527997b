"""A tool's definition as MCP lists it: what the lock pins and the lint reads."""

from __future__ import annotations

from typing import Any

from toolproof.contract.tools import ToolSpec

__all__ = ["locked_spec"]


def locked_spec(spec: ToolSpec) -> dict[str, Any]:
    """The spec as the lock pins it: MCP field names, ``title`` out of the annotations."""
    annotations = spec.annotations.model_dump(
        mode="json", exclude_none=True, exclude={"schema_version"}
    )
    title = annotations.pop("title", None)
    pinned: dict[str, Any] = {
        "name": spec.name,
        "version": spec.version,
        "description": spec.description,
        "inputSchema": spec.input_schema,
    }
    if title is not None:
        pinned["title"] = title
    if spec.output_schema is not None:
        pinned["outputSchema"] = spec.output_schema
    if annotations:
        pinned["annotations"] = annotations
    return pinned
