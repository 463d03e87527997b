"""``args``: present a tool's parameters differently, like a partial.

Rename a parameter, hide one behind a pinned value, give one a default, or change
a description. The variant declares its own schema; a two-way map (presented name
<-> original name) is built once, when the variant is built, with collisions and
contradictions refused there (FastMCP's tool transformation does the same).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable
from typing import Any

from pydantic import Field, JsonValue

from toolproof.contract.names import PARAMETER_NAME_RE
from toolproof.contract.tools import ToolResult
from toolproof.errors import ExtensionError
from toolproof.extensions.schema import is_flat_object_schema
from toolproof.extensions.wrappers.common import StrictConfig
from toolproof.schema.validation import compile_validator, validation_errors
from toolproof.tools.tool import Tool

__all__ = ["ArgsConfig", "args_factory"]


class ArgsConfig(StrictConfig):
    """Config of ``args``; every map is keyed by the inner tool's original parameter name.

    Attributes:
        rename: original name -> presented name.
        hide: original name -> pinned value; the parameter disappears from the schema.
        defaults: original name -> default; the parameter becomes optional and the
            default is sent when the caller omits it.
        describe: original name -> new parameter description.
        description: a new tool description (empty: keep the inner one).

    """

    rename: dict[str, str] = Field(default_factory=dict)
    hide: dict[str, JsonValue] = Field(default_factory=dict)
    defaults: dict[str, JsonValue] = Field(default_factory=dict)
    describe: dict[str, str] = Field(default_factory=dict)
    description: str = ""


def _refuse(rule: str) -> ExtensionError:
    return ExtensionError(rule)


def _check_value(schema: dict[str, Any], param: str, sub: Any, value: Any, what: str) -> None:
    probe = dict(sub) if isinstance(sub, dict) else {}
    for defs in ("$defs", "definitions"):
        if defs in schema:
            probe[defs] = schema[defs]
    errors = validation_errors(compile_validator(probe if isinstance(sub, dict) else sub), value)
    if errors:
        raise _refuse(f"args: {what} for {param!r} breaks its schema: {errors[0].message}")


def _check_names(cfg: ArgsConfig, properties: dict[str, Any], tool: str) -> None:
    for table in ("rename", "hide", "defaults", "describe"):
        for param in getattr(cfg, table):
            if param not in properties:
                raise _refuse(f"args: {table}: tool {tool!r} has no parameter {param!r}")
    for first, second in (("hide", "rename"), ("hide", "defaults"), ("hide", "describe")):
        both = sorted(set(getattr(cfg, first)) & set(getattr(cfg, second)))
        if both:
            raise _refuse(
                f"args: parameter {both[0]!r} is both in {first} and {second} "
                "(rule: a hidden parameter is pinned; it cannot also be presented)"
            )
    seen: dict[str, str] = {}
    for original, new in cfg.rename.items():
        if not PARAMETER_NAME_RE.match(new):
            raise _refuse(f"args: rename {original!r} -> {new!r}: not a valid parameter name")
        if new != original and new in properties:
            raise _refuse(
                f"args: renaming {original!r} onto existing parameter {new!r} "
                "(rule: a rename never replaces another parameter)"
            )
        if new in seen:
            raise _refuse(f"args: {seen[new]!r} and {original!r} are both renamed to {new!r}")
        seen[new] = original


def args_factory(inner: Tool, *, name: str, config: Any) -> Tool:
    """Build the ``args`` variant of ``inner``; see :class:`ArgsConfig`.

    Raises:
        ExtensionError: an unknown parameter, a rename onto an existing name, a
            parameter both hidden and presented, or a pinned value or default that
            breaks the parameter's schema.

    """
    cfg: ArgsConfig = config
    schema = inner.spec.input_schema
    properties: dict[str, Any] = dict(schema.get("properties") or {})
    _check_names(cfg, properties, inner.name)
    for param, value in cfg.hide.items():
        _check_value(schema, param, properties[param], value, "pinned value")
    for param, value in cfg.defaults.items():
        _check_value(schema, param, properties[param], value, "default")
    to_inner: dict[str, str] = {}
    presented: dict[str, Any] = {}
    for original, sub in properties.items():
        if original in cfg.hide:
            continue
        new = cfg.rename.get(original, original)
        sub = copy.deepcopy(sub)
        if original in cfg.describe and isinstance(sub, dict):
            sub["description"] = cfg.describe[original]
        if original in cfg.defaults and isinstance(sub, dict):
            sub["default"] = copy.deepcopy(cfg.defaults[original])
        presented[new] = sub
        to_inner[new] = original
    to_outer = {original: new for new, original in to_inner.items()}
    new_schema = {
        k: copy.deepcopy(v) for k, v in schema.items() if k not in ("properties", "required")
    }
    new_schema["properties"] = presented
    required = [
        to_outer[param]
        for param in schema.get("required") or []
        if param in to_outer and param not in cfg.defaults
    ]
    if required:
        new_schema["required"] = required
    hidden_or_renamed = sorted(set(cfg.hide) | {o for o, n in cfg.rename.items() if o != n})
    if schema.get("additionalProperties") is not False and hidden_or_renamed:
        new_schema["propertyNames"] = {"not": {"enum": hidden_or_renamed}}
    renames = {new: original for new, original in to_inner.items() if new != original}
    pinned = copy.deepcopy(cfg.hide)
    defaults = cfg.defaults
    run = inner.run_validated if is_flat_object_schema(schema) else inner.call

    def body(arguments: dict[str, Any]) -> Awaitable[ToolResult]:
        # not a coroutine itself: it maps the arguments and returns the inner call
        if renames:
            mapped = {renames.get(key, key): value for key, value in arguments.items()}
        else:
            mapped = dict(arguments)
        for param, value in defaults.items():
            if param not in mapped:
                mapped[param] = copy.deepcopy(value)
        if pinned:
            mapped.update(copy.deepcopy(pinned))
        return run(mapped)

    spec = inner.spec.model_copy(
        update={
            "name": name,
            "input_schema": new_schema,
            "description": cfg.description or inner.spec.description,
        }
    )
    return Tool(spec, body)
