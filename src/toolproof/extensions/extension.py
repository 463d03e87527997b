"""An extension: a factory registered under a name, with a kind and its options.

The record every form builds (``register_extension``, ``@extension``, ``@wrapper``,
``@transformer``, ``@backend``) and the registry holds. It sits below both the
built-ins and the registry, so neither imports the other to get it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from pydantic import BaseModel, ValidationError

from toolproof.errors import ExtensionError, validation_problem
from toolproof.extensions.kinds import ExtensionKind
from toolproof.identity import digest_json
from toolproof.tools.tool import Tool

__all__ = ["EXTENSION_NAME_RE", "Extension", "Factory", "normalize_reserved"]

EXTENSION_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")
"""What an extension name must match (it becomes part of variant names)."""


Factory: TypeAlias = Callable[..., Tool]
"""``(inner: Tool, *, name: str, config) -> Tool``: build the variant ``name`` over ``inner``.

``config`` is the validated config model instance, or ``None`` when the extension
has no config model. Extensions registered with ``wants_context=True`` also get
``context=`` (an :class:`toolproof.extensions.apply.ApplyContext`). A factory
refuses with :class:`ExtensionError` (``rule=``); the apply site names the tool
and the combo.
"""


def normalize_reserved(
    value: Mapping[str, Any] | Sequence[str],
) -> Mapping[str, Mapping[str, Any]]:
    """Reserved params as a read-only ``name -> JSON Schema`` map (names alone mean ``{}``)."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): dict(v) for k, v in value.items()})
    return MappingProxyType({str(k): {} for k in value})


@dataclass(frozen=True)
class Extension:
    """A registered extension.

    Attributes:
        name: the registered name; variants are named ``<inner>_<name>``.
        kind: its :class:`ExtensionKind`.
        factory: ``(inner, *, name, config) -> Tool``, see :class:`Factory`.
        config: the pydantic model its ``config`` table is validated with, or ``None``
            (then giving a non-empty config is refused).
        reserved_params: parameter name -> JSON Schema of a parameter the variant adds
            to its input schema for the wrapper itself (``timeout_s``); only for kinds
            that preserve the input schema. A sequence of names means ``{}`` schemas.
        requires_body_locality: the layer only works in the process running the body,
            so it must sit inside (before) any relocating extension of the combo.
        runs_at_admission: the layer runs in the process that admits the call, never
            where a relocating extension outside it ships the call (``approve``): the
            backend ships the tool inside it, and it is rebuilt around the backend
            (:mod:`toolproof.extensions.admission`).
        version: the extension's version, recorded in each variant's stack.
        description: one line for ``toolproof extensions list``.
        wants_context: the factory also takes ``context=`` (the Toolset, the config file,
            the ``[backends]`` tables): for backends and file-backed wrappers.
        origin: where it was registered from (``builtin``, a module, an entry point).

    Raises:
        ExtensionError: (on construction) a bad name, or reserved params on a kind
            that does not preserve the input schema.

    """

    name: str
    kind: ExtensionKind
    factory: Factory
    config: type[BaseModel] | None = None
    reserved_params: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    requires_body_locality: bool = False
    runs_at_admission: bool = False
    version: str = "0"
    description: str = ""
    wants_context: bool = False
    origin: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or EXTENSION_NAME_RE.match(self.name) is None:
            raise ExtensionError(
                f"must match {EXTENSION_NAME_RE.pattern}",
                message=f"extension name {self.name!r}: must match {EXTENSION_NAME_RE.pattern}",
                extension=str(self.name),
            )
        object.__setattr__(self, "kind", ExtensionKind(self.kind))
        object.__setattr__(self, "reserved_params", normalize_reserved(self.reserved_params))
        if self.reserved_params and not self.kind.preserves_schema:
            rule = f"reserved params are for kinds that preserve the input schema, not {self.kind}"
            message = f"extension {self.name!r}: {rule}"
            raise ExtensionError(rule, message=message, extension=self.name)

    def parse_config(self, raw: Mapping[str, Any] | None) -> tuple[Any, str]:
        """Validate a config table; return ``(config for the factory, config digest)``.

        Raises:
            ExtensionError: config given to an extension without a config model, or
                config failing the model; ``rule`` says which.

        """
        if self.config is None:
            if raw:
                keys = ", ".join(sorted(raw))
                rule = f"extension {self.name!r} takes no config (got keys: {keys})"
                raise ExtensionError(rule, extension=self.name)
            return None, digest_json({})
        try:
            model = self.config.model_validate(dict(raw or {}))
        except ValidationError as exc:
            first = validation_problem(exc, empty="(config)")
            rule = f"invalid config for extension {self.name!r}: {first.where}: {first.rule}"
            raise ExtensionError(rule, extension=self.name) from None
        return model, digest_json(model.model_dump(mode="json"))

    def build(self, inner: Tool, *, name: str, config: Any, context: Any = None) -> Tool:
        """Call the factory (with ``context=`` when :attr:`wants_context`)."""
        if self.wants_context:
            return self.factory(inner, name=name, config=config, context=context)
        return self.factory(inner, name=name, config=config)

    def to_json(self) -> dict[str, Any]:
        """The listing record of ``toolproof extensions list --json``."""
        return {
            "name": self.name,
            "kind": str(self.kind),
            "version": self.version,
            "description": self.description,
            "config": self.config.model_json_schema() if self.config is not None else None,
            "reserved_params": {k: dict(v) for k, v in self.reserved_params.items()},
            "requires_body_locality": self.requires_body_locality,
            "origin": self.origin,
        }
